"""The row-lock order of forks and releases (DESIGN §4.4, migrations 0022 and 0023), shown
with two or three connections: a Fork INHERIT locks its source (FOR SHARE) and key-shares
the holders of its segments in one pass in id order (before issue #34's last fix: the
holders first, then the source); a release (a trim, the erasure job) must never
wait for such a key share while holding what the fork waits for, nor two releases for each
other. The race of many of them at once is
`test_fork_depth_races`; these pin each order down without timing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

import asyncpg
import pytest

from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app as create_storage
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, inherit, listed, trim
from tests.support.fixtures import INSERT_SESSION, MakeSession, TestSpace
from tests.support.fresh import fresh_database
from tests.tree.conftest import erased
from tree_service.app import create_service
from tree_service.models import SweepQuery

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "who waits for whom is read from pg_blocking_pids of the one server; on Citus the "
        "row locks are taken on a worker (test_fork_depth_races runs there)"
    ),
]

Stub = storage_pb2_grpc.SessionStorageStub

KEY_SHARE = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR KEY SHARE
"""

KEY_SHARE_NOWAIT = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR KEY SHARE NOWAIT
"""

BLOCKED_BY = """
SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))
"""


# Who the backends waiting for a lock wait for, and what they run (a failure's message).
WAITING = """
SELECT pid, pg_blocking_pids(pid) AS blockers, left(query, 120) AS query
FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0
"""

PATIENCE_S = 30.0


async def waits(pool: asyncpg.Pool) -> str:
    """The backends waiting for a lock, one line each."""
    rows = await pool.fetch(WAITING)
    return "; ".join(f"{r['pid']} waits for {r['blockers']}: {r['query']}" for r in rows)


async def runs_past(pool: asyncpg.Pool, pid: int, work: Awaitable[None]) -> bool:
    """Whether `work` ends while the transaction of backend `pid` is open (False: it waits
    for it). It may take PATIENCE_S; past that the test fails saying who waits for whom,
    and `work` is cancelled (a task left running would outlive the test)."""
    task = asyncio.ensure_future(work)
    deadline = asyncio.get_running_loop().time() + PATIENCE_S
    try:
        while not task.done():
            if await pool.fetchval(BLOCKED_BY, pid):
                return False
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail(
                    f"neither done nor waiting for {pid} after {PATIENCE_S:.0f} s: "
                    f"{await waits(pool)}"
                )
            await asyncio.sleep(0.01)
    except BaseException:
        task.cancel()
        raise
    await task
    return True


async def blocked_by(pool: asyncpg.Pool, pid: int, job: asyncio.Future[None]) -> None:
    """Return once a backend waits for backend `pid`, while `job` runs; fail (saying who
    waits for whom) if `job` ends first or nothing waits for `pid` within PATIENCE_S."""
    deadline = asyncio.get_running_loop().time() + PATIENCE_S
    while not await pool.fetchval(BLOCKED_BY, pid):
        assert not job.done(), "the job ended without waiting for the fork's key share"
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"nothing waits for {pid} after {PATIENCE_S:.0f} s: {await waits(pool)}")
        await asyncio.sleep(0.01)


async def chain(stub: Stub, space: TestSpace, make_session: MakeSession) -> list[uuid.UUID]:
    """root <- middle <- leaf, each with a record of its own: the leaf's segments are held
    by the root and the middle, and the middle reads from the root."""
    sessions = [await make_session()]
    await append(stub, space, sessions[0], rec("root 1"), rec("root 2"))
    for name in ("middle", "leaf"):
        child = await make_session()
        await inherit(stub, space, child, sessions[-1])
        await append(stub, space, child, rec(name))
        sessions.append(child)
    return sessions


@pytest.mark.parametrize("release", ["trim", "delete"])
async def test_a_release_never_waits_for_a_forks_key_share_of_a_reader(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, release: str
) -> None:
    """A fork of the leaf key-shares the middle (a reader of the root) and may then wait for
    the root; a release of the root locks the root, then its readers: NO KEY UPDATE, which
    a key share does not block (FOR UPDATE did: the two deadlocked)."""
    root, middle, leaf = await chain(stub, space, make_session)
    before = await listed(stub, space, leaf)
    tree = create_service(pool)

    async def released() -> None:
        if release == "trim":
            await trim(stub, space, root, 1)
        else:
            await tree.erasure.delete_subtree(space.id, root)
            await erased(pool)

    async with pool.acquire() as fork:
        async with fork.transaction():
            await fork.fetch(KEY_SHARE, space.id, middle)
            assert await runs_past(pool, fork.get_server_pid(), released())
    assert [(r.seq, r.content) for r in await listed(stub, space, leaf)] == [
        (r.seq, r.content) for r in before
    ]


# Two sessions of a fresh database's space: $2 the parent (a root), $3 its child.
PARENT_AND_CHILD = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label)
VALUES ($1, $2, NULL, $2, 0, 0, 'parent'), ($1, $3, $2, $2, 1, 0, 'child')
"""


async def never_blocked_by(
    pool: asyncpg.Pool, pid: int, job: asyncio.Future[None], seconds: float
) -> None:
    """Fail when a backend waits for backend `pid` within `seconds`, while `job` runs."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline and not job.done():
        assert not await pool.fetchval(BLOCKED_BY, pid), await waits(pool)
        await asyncio.sleep(0.01)


NEVER_BLOCKED_S = 3.0
"""Longer than the erasure job's quick tries (1.3 s: `RELEASE_TRIES`), after which its
last try used to wait for what it was skipping."""


async def test_the_erasure_job_never_waits_for_a_forks_key_share_of_its_batch(
    admin_dsn: str, settings: StelloSettings
) -> None:
    """A fork holding a key share of a batch session (a holder of its source's rows) may
    next key-share another of the batch: the job never waits for the key share while it
    holds a batch row. It skips what is held and tries again (claimed by depth and
    waited for, the job held the deeper, higher id and waited for the lower: a deadlock;
    later it waited, in id order, on its last try), and erases the batch once the fork
    is done. In a database of its own: the run's database holds other tests' hidden
    sessions, which the job (one space at a time, behind the background erasers of the
    run's servers) may be busy with for longer than the test may wait."""
    parent, child = sorted([uuid.uuid4(), uuid.uuid4()])  # the deeper session: the higher id
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        await pool.execute(PARENT_AND_CHILD, space.id, parent, child)
        await create_service(pool).erasure.delete_subtree(space.id, parent)
        async with pool.acquire() as fork:
            async with fork.transaction():
                await fork.fetch(KEY_SHARE, space.id, parent)
                job = asyncio.ensure_future(erased(pool))
                try:
                    await never_blocked_by(pool, fork.get_server_pid(), job, NEVER_BLOCKED_S)
                    assert not job.done(), "the job erased a batch the fork holds"
                    async with asyncio.timeout(PATIENCE_S):
                        assert await fork.fetch(KEY_SHARE, space.id, child)
                except BaseException:
                    job.cancel()
                    raise
            await job
        left = await pool.fetchval(
            "SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY ($2::uuid[])",
            space.id,
            [parent, child],
        )
        assert left == 0


FOR_UPDATE_NOWAIT = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR UPDATE NOWAIT
"""


# Session $2 becomes a provisional session past its time: the sweep's.
DUE = """
UPDATE sessions SET provisional_until = now() - interval '1 hour'
WHERE space_id = $1 AND id = $2
"""


@pytest.mark.parametrize("release", ["erasure", "sweep"])
async def test_a_release_waits_for_a_reader_holding_none_of_its_sessions(
    admin_dsn: str, settings: StelloSettings, release: str
) -> None:
    """When a reader of a release (the erasure job's batch, the provisional sweep's due
    sessions) stays held, the release's patient tries wait for it, but before they claim
    its sessions: a trim holding the reader may be waiting for a batch session (its
    statement began before the session was hidden), and the job holding it while it
    waited for the reader was a deadlock (seen on Citus). R reads H's rows (a fork by
    reference made elsewhere); H is hidden, or a provisional session past its time; R
    is held."""
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        stub = Stub((await fresh.start(create_storage)).channel(space.key))
        h, r = await roots(pool, space, 2)
        await append(stub, space, h, rec("h1"), rec("h2"))
        await inherit(stub, space, r, h)
        tree = create_service(pool)
        if release == "erasure":
            await tree.erasure.delete_subtree(space.id, h)
        else:
            await pool.execute(DUE, space.id, h)

        async def released() -> None:
            if release == "erasure":
                await erased(pool)
            else:
                assert [s.id for s in await tree.sweeps.sweep(SweepQuery())] == [h]

        async with pool.acquire() as trim_, pool.acquire() as other:
            async with trim_.transaction():
                await trim_.fetch(NO_KEY_UPDATE, space.id, r)
                job = asyncio.ensure_future(released())
                try:
                    await blocked_by(pool, await trim_.fetchval(BACKEND), job)
                    async with other.transaction():
                        assert await other.fetch(FOR_UPDATE_NOWAIT, space.id, h)
                except BaseException:
                    job.cancel()
                    raise
            await job
        assert await pool.fetchval("SELECT count(*) FROM sessions WHERE id = $1", h) == 0
        assert [(x.seq, x.content) for x in await listed(stub, space, r)] == [
            (1, "h1"),
            (2, "h2"),
        ]


# -- Release against release -----------------------------------------------------------

# The server backend of a connection in a transaction (through PgBouncer in transaction
# mode, `get_server_pid()` answers PgBouncer's own number).
BACKEND = "SELECT pg_backend_pid()"

NO_KEY_UPDATE = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR NO KEY UPDATE
"""

ERASER_TRIES_S = 0.5
"""How long a test lets the erasure job try while a trim waits (it backs off and tries
again when a row it needs is locked: `tree_service.erasure.release.RELEASE_TRIES`)."""

# Who waits for whom in this database (a cycle among them is a deadlock in the making:
# the detector breaks it only after deadlock_timeout, and the storage server's retry
# hides it from the caller).
WAIT_EDGES = """
SELECT a.pid, pg_blocking_pids(a.pid) AS blockers, left(a.query, 100) AS query
FROM pg_stat_activity a
WHERE a.datname = current_database() AND cardinality(pg_blocking_pids(a.pid)) > 0
"""

DEADLOCKS = """
SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()
"""


async def wait_cycle(pool: asyncpg.Pool) -> str | None:
    """A cycle in the database's wait-for graph, described; None when there is none."""
    rows = await pool.fetch(WAIT_EDGES)
    edges = {r["pid"]: set(r["blockers"]) for r in rows}
    queries = {r["pid"]: r["query"] for r in rows}
    for start in edges:
        path, pid = [start], start
        while True:
            nxt = next((b for b in sorted(edges.get(pid, ())) if b in edges), None)
            if nxt is None:
                break
            if nxt in path:
                cycle = path[path.index(nxt) :]
                return " -> ".join(f"{p} ({queries[p]})" for p in [*cycle, nxt])
            path.append(nxt)
            pid = nxt
    return None


async def without_cycle(pool: asyncpg.Pool, jobs: list[asyncio.Future[None]]) -> None:
    """Await `jobs`, failing as soon as their backends wait for each other in a cycle (or
    after PATIENCE_S); any job's error is raised."""
    deadline = asyncio.get_running_loop().time() + PATIENCE_S
    try:
        while not all(job.done() for job in jobs):
            cycle = await wait_cycle(pool)
            assert cycle is None, f"backends wait for each other in a cycle: {cycle}"
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail(f"not done after {PATIENCE_S:.0f} s: {await waits(pool)}")
            await asyncio.sleep(0.01)
    finally:
        for job in jobs:
            if not job.done():
                job.cancel()
    for job in jobs:
        await job


async def stopped(jobs: list[asyncio.Future[None]]) -> None:
    """Cancel what is left of `jobs` and let each end (none outlives its test)."""
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


async def deadlocks(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as con:
        await con.execute("SELECT pg_stat_clear_snapshot()")
        count: int = await con.fetchval(DEADLOCKS)
        return count


async def roots(pool: asyncpg.Pool, space: TestSpace, count: int) -> list[uuid.UUID]:
    """`count` root sessions, by id ascending (a test gives them roles by id)."""
    ids = sorted(uuid.uuid4() for _ in range(count))
    for sid in ids:
        await pool.execute(INSERT_SESSION, space.id, sid, None, "Session", "active", None, False)
    return ids


def trim_op(space: TestSpace, sid: uuid.UUID, keep: int) -> storage_pb2.TransactRequest:
    op = storage_pb2.Operation.TrimRecordsOp(session_id=str(sid), keep_recent=keep)
    return storage_pb2.TransactRequest(
        space_id=space.sid, operations=[storage_pb2.Operation(trim_records=op)]
    )


async def trimmed_too(stub: Stub, space: TestSpace, sid: uuid.UUID) -> None:
    assert await trim(stub, space, sid, 1) == 1


@pytest.mark.parametrize("via", ["TrimRecords", "Transact"])
@pytest.mark.parametrize(
    ("shape", "other"),
    [("reader_of_both", "erasure"), ("reader_of_both", "trim"), ("hidden_reader", "erasure")],
)
async def test_two_releases_never_wait_for_each_other(
    admin_dsn: str, settings: StelloSettings, via: str, shape: str, other: str
) -> None:
    """Two releases whose sets overlap in opposite roles (issue #34): the trim of T and the
    release of U (the erasure job's, or a trim of U) each lock sessions the other needs;
    taken "own sessions first, then the readers", each held one and waited for the other.
    A third connection holds a reader's lock to stop the trim where the other release
    overtakes it, deterministically:

    - reader_of_both: U <- T <- R (R reads U and T), Q reads T only; ids Q < R < T. The
      trim held T and waited for Q (held); the release of U took R, then waited for T;
      freed, the trim took Q, then waited for R.
    - hidden_reader: T <- U <- R, U hidden (being erased); ids R < T < U. The trim held T
      and waited for R (held); the erasure took U and waited for R behind it; freed, the
      trim took R, then waited for U, a reader of T the erasure holds.

    Now a trim takes T and its readers (never a hidden one) in one pass in id order, and
    the erasure job takes its row locks without waiting, backing off (migration 0023;
    SKIP LOCKED with a count check since issue #34). In a database of its own: no other
    erasure runs there."""
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        channel = (await fresh.start(create_storage)).channel(space.key)
        stub = Stub(channel)
        if shape == "reader_of_both":
            q, r, t, u = await roots(pool, space, 4)
            await append(stub, space, u, rec("u1"), rec("u2"))
            await inherit(stub, space, t, u)
            await append(stub, space, t, rec("t3"), rec("t4"))
            await inherit(stub, space, r, t)
            await append(stub, space, r, rec("r5"))
            await inherit(stub, space, q, t)
            await trim(stub, space, q, 2)  # Q's view: t3, t4, read from T only
            held, shown_after = q, {r: 5, q: 2, t: 1}
        else:
            r, t, u = await roots(pool, space, 3)
            await append(stub, space, t, rec("t1"), rec("t2"))
            await inherit(stub, space, u, t)
            await append(stub, space, u, rec("u3"))
            await inherit(stub, space, r, u)
            await append(stub, space, r, rec("r4"))
            held, shown_after = r, {r: 4, t: 1}
        before = {sid: await listed(stub, space, sid) for sid in shown_after}
        if other == "erasure":
            await create_service(pool).erasure.delete_subtree(space.id, u)
        lost = await deadlocks(pool)

        async def trimmed() -> None:
            if via == "TrimRecords":
                assert await trim(stub, space, t, 1)
            else:
                await stub.Transact(trim_op(space, t, 1))

        async with pool.acquire() as lock:
            jobs: list[asyncio.Future[None]] = []
            try:
                async with lock.transaction():
                    await lock.fetch(NO_KEY_UPDATE, space.id, held)
                    jobs.append(asyncio.ensure_future(trimmed()))
                    await blocked_by(pool, await lock.fetchval(BACKEND), jobs[0])
                    if other == "erasure":
                        jobs.append(asyncio.ensure_future(erased(pool)))
                    else:
                        jobs.append(asyncio.ensure_future(trimmed_too(stub, space, u)))
                    # It overtakes the trim and ends, or waits (before migration 0023), or
                    # (the erasure, since) backs off until the trim is done: a moment to try.
                    deadline = asyncio.get_running_loop().time() + ERASER_TRIES_S
                    while not jobs[1].done() and asyncio.get_running_loop().time() < deadline:
                        if len(await pool.fetch(WAIT_EDGES)) > 1:
                            break
                        await asyncio.sleep(0.01)
                await without_cycle(pool, jobs)
            finally:
                await stopped(jobs)
        assert await deadlocks(pool) == lost
        for sid, count in shown_after.items():
            now = [(x.seq, x.content) for x in await listed(stub, space, sid)]
            assert now == [(x.seq, x.content) for x in before[sid]][-count:], sid
        await channel.close()


def appends(space: TestSpace, *sids: uuid.UUID) -> storage_pb2.TransactRequest:
    ops = [
        storage_pb2.Operation(
            append_records=storage_pb2.Operation.AppendRecordsOp(
                session_id=str(sid), records=[rec(f"by both {sid}")]
            )
        )
        for sid in sids
    ]
    return storage_pb2.TransactRequest(space_id=space.sid, operations=ops)


async def test_a_trim_starts_over_when_a_fork_adds_a_reader_below_its_locks(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """A fork that commits while a trim is locking adds a reader the trim has not seen,
    maybe with a lower id than what it holds: locked last, it could close a cycle with a
    Transact that locks the newcomer, then the trimmed session (in id order, as every
    Transact does). The trim rolls back its locks and takes the new set from the start.
    Ids N < T < R < S; R and S read T. The trim holds T, waits for R (held); N is forked
    from S (a key share of T: no wait); a Transact appending to N and T holds N, waits
    for T."""
    n, t, r, s = sorted([await make_session() for _ in range(4)])
    await append(stub, space, t, rec("t1"), rec("t2"))
    await inherit(stub, space, r, t)
    await inherit(stub, space, s, t)
    async with pool.acquire() as lock:
        jobs: list[asyncio.Future[None]] = []
        try:
            async with lock.transaction():
                await lock.fetch(NO_KEY_UPDATE, space.id, r)
                backend = await lock.fetchval(BACKEND)

                async def trimmed() -> None:
                    # t1 and t2: it let the Transact (which appended to T) go first
                    assert await trim(stub, space, t, 1) == 2

                jobs.append(asyncio.ensure_future(trimmed()))
                await blocked_by(pool, backend, jobs[0])
                # A new reader of T, below it (its key share of T waits for no trim).
                await asyncio.wait_for(inherit(stub, space, n, s), PATIENCE_S)

                async def both() -> None:
                    await stub.Transact(appends(space, n, t))

                jobs.append(asyncio.ensure_future(both()))
                deadline = asyncio.get_running_loop().time() + PATIENCE_S
                while len(await pool.fetch(WAIT_EDGES)) < 2:  # it waits for the trim
                    assert not jobs[1].done(), "the Transact did not wait for the trim"
                    assert asyncio.get_running_loop().time() < deadline, await waits(pool)
                    await asyncio.sleep(0.01)
            await without_cycle(pool, jobs)
        finally:
            await stopped(jobs)
    assert [x.content for x in await listed(stub, space, t)] == [f"by both {t}"]
    assert [x.content for x in await listed(stub, space, n)] == ["t1", "t2", f"by both {n}"]


FOR_UPDATE = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR UPDATE
"""


async def test_a_fork_locks_its_source_and_holders_in_one_id_order(
    admin_dsn: str, settings: StelloSettings
) -> None:
    """A fork of S locks S and the holders of S's segments in id order, as a Transact
    naming several sessions does: C holds S's rows, ids S < C. The fork used to key-share
    C first, then lock S: a Transact appending to S and C (S, then C, FOR UPDATE) held S
    and waited for the fork's key share of C, while the fork waited for S. A third
    connection holds C FOR UPDATE until both wait, so the fork is first in line for C.
    In a database of its own (the deadlock count is the database's)."""
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        stub = Stub((await fresh.start(create_storage)).channel(space.key))
        s, c, n = await roots(pool, space, 3)
        await append(stub, space, c, rec("c1"), rec("c2"))
        await inherit(stub, space, s, c)
        lost = await deadlocks(pool)
        async with pool.acquire() as lock:
            jobs: list[asyncio.Future[None]] = []
            try:
                async with lock.transaction():
                    await lock.fetch(FOR_UPDATE, space.id, c)
                    backend = await lock.fetchval(BACKEND)

                    async def forked() -> None:
                        assert await inherit(stub, space, n, s) == 2

                    jobs.append(asyncio.ensure_future(forked()))
                    await blocked_by(pool, backend, jobs[0])

                    async def both() -> None:
                        await stub.Transact(appends(space, s, c))

                    jobs.append(asyncio.ensure_future(both()))
                    deadline = asyncio.get_running_loop().time() + PATIENCE_S
                    while len(await pool.fetch(WAIT_EDGES)) < 2:
                        assert not jobs[1].done(), "the Transact did not wait"
                        assert asyncio.get_running_loop().time() < deadline, await waits(pool)
                        await asyncio.sleep(0.01)
                await without_cycle(pool, jobs)
            finally:
                await stopped(jobs)
        assert await deadlocks(pool) == lost
        assert [x.content for x in await listed(stub, space, n)] == ["c1", "c2"]
        assert [x.content for x in await listed(stub, space, s)] == ["c1", "c2", f"by both {s}"]
