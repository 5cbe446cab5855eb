"""The last lock-order paths of issue #34, each shown with held locks and no timing: a
CommitSession against a trim's waiting pass, the provisional sweep against a trim, a
Transact that trims and checks an insight against a fork, and the erasure job, which must
back off without an ERROR in the server's log (DESIGN §4.4). Each once closed a cycle of
waits (the deadlock detector then aborted one side, retried, or ABORTED
CONCURRENT_MODIFICATION) or made the server log an ERROR per conflict."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
import pytest

from stello.db import pool as db
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app as create_storage
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, inherit, listed, trim
from tests.storage.records.test_release_lock_order import (
    BACKEND,
    ERASER_TRIES_S,
    KEY_SHARE,
    NO_KEY_UPDATE,
    PATIENCE_S,
    WAIT_EDGES,
    blocked_by,
    deadlocks,
    roots,
    stopped,
    trim_op,
    waits,
    without_cycle,
)
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.fresh import fresh_database
from tests.tree.conftest import erased
from tree_service.app import create_service
from tree_service.erasure import job as erasure_job
from tree_service.erasure.release import LocksBusy
from tree_service.models import SweepQuery

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "who waits for whom is read from pg_blocking_pids of the one server; on Citus the "
        "row locks are taken on a worker (test_fork_depth_races runs there)"
    ),
]

Stub = storage_pb2_grpc.SessionStorageStub

FOR_SHARE = """
SELECT id FROM sessions WHERE space_id = $1 AND id = $2 FOR SHARE
"""

# A session made provisional (a child's CommitSession, the sweep's due ones).
PROVISIONAL = """
UPDATE sessions SET provisional_until = now() + make_interval(secs => $3::float8)
WHERE space_id = $1 AND id = $2
"""

SET_PARENT = """
UPDATE sessions SET parent_id = $3, depth = 1, sibling_index = NULL
WHERE space_id = $1 AND id = $2
"""

PRESENT = "SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY ($2::uuid[])"


async def overtaken(pool: asyncpg.Pool, job: asyncio.Future[Any]) -> None:
    """Give `job` a moment to overtake a waiting trim: it ends, waits (a second backend
    waits), or backs off until the trim is done (ERASER_TRIES_S)."""
    deadline = asyncio.get_running_loop().time() + ERASER_TRIES_S
    while not job.done() and asyncio.get_running_loop().time() < deadline:
        if len(await pool.fetch(WAIT_EDGES)) > 1:
            return
        await asyncio.sleep(0.01)


async def behind_a_waiting_trim(
    pool: asyncpg.Pool,
    space: TestSpace,
    held: uuid.UUID,
    trimmed: Coroutine[Any, Any, Any],
    second: Callable[[], Coroutine[Any, Any, Any]],
) -> list[asyncio.Future[Any]]:
    """Hold `held`'s row, start the trim `trimmed` and wait until it waits for that row,
    start `second` and give it a moment to overtake, then let go: both end with no wait
    cycle among them. The two jobs, done."""
    async with pool.acquire() as lock:
        jobs: list[asyncio.Future[Any]] = []
        try:
            async with lock.transaction():
                await lock.fetch(NO_KEY_UPDATE, space.id, held)
                jobs.append(asyncio.ensure_future(trimmed))
                await blocked_by(pool, await lock.fetchval(BACKEND), jobs[0])
                jobs.append(asyncio.ensure_future(second()))
                await overtaken(pool, jobs[1])
            await without_cycle(pool, jobs)
        finally:
            await stopped(jobs)
    return jobs


async def test_a_commit_never_holds_the_child_while_waiting_for_its_parent(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Ids P < R < C: C, a provisional child of P, and R read P's rows. A trim of P in its
    waiting pass holds P and waits for R (held here); a CommitSession of C took C, then
    waited for P (to bump it); freed, the trim took R, then waited for C. Now the commit
    locks P and C together in id order: it waits for P holding nothing."""
    p, r, c = sorted([await make_session() for _ in range(3)])
    await append(stub, space, p, rec("p1"), rec("p2"))
    await inherit(stub, space, r, p)
    await inherit(stub, space, c, p)
    await pool.execute(SET_PARENT, space.id, c, p)
    await pool.execute(PROVISIONAL, space.id, c, 3600.0)
    tree = create_service(pool)
    lost = await deadlocks(pool)
    jobs = await behind_a_waiting_trim(
        pool, space, r, trim(stub, space, p, 1), lambda: tree.sessions.commit_session(space.id, c)
    )
    assert await deadlocks(pool) == lost
    assert jobs[0].result() == 1
    assert jobs[1].result()[0].parent_id == p  # (node, metadata)
    assert [x.content for x in await listed(stub, space, c)] == ["p1", "p2"]


async def test_a_trim_that_checks_an_insight_locks_it_in_its_pass(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Ids T < S: S reads T's rows. A fork of S key-shares T (a holder of S's rows), then
    locks S; a Transact trimming T with an insight check on T took T and S (no key update),
    then T's FOR UPDATE, waiting for the fork's key share while the fork waited for S. Now
    T's FOR UPDATE is taken in the trim's id-ordered pass, before S."""
    t, s = sorted([await make_session() for _ in range(2)])
    await append(stub, space, t, rec("t1"), rec("t2"))
    await inherit(stub, space, s, t)
    check = storage_pb2.Precondition(
        insight_unchanged=storage_pb2.Precondition.InsightUnchangedCheck(session_id=str(t))
    )
    request = trim_op(space, t, 1)
    request.preconditions.append(check)
    lost = await deadlocks(pool)
    async with pool.acquire() as fork:
        jobs: list[asyncio.Future[Any]] = []
        try:
            async with fork.transaction():
                await fork.fetch(KEY_SHARE, space.id, t)
                jobs.append(asyncio.ensure_future(stub.Transact(request)))
                await blocked_by(pool, await fork.fetchval(BACKEND), jobs[0])
                # the fork's last lock, its source's (the Transact must not hold it)
                await asyncio.wait_for(fork.fetch(FOR_SHARE, space.id, s), PATIENCE_S)
            await without_cycle(pool, jobs)
        finally:
            await stopped(jobs)
    assert await deadlocks(pool) == lost
    assert [x.content for x in await listed(stub, space, t)] == ["t2"]
    assert [x.content for x in await listed(stub, space, s)] == ["t1", "t2"]


async def test_the_sweep_never_waits_for_a_reader_while_it_holds_its_claim(
    admin_dsn: str, settings: StelloSettings
) -> None:
    """Ids T < Q < X < P: T <- P <- Q (P forked from T, Q from P), X reads T; P is a due
    provisional session. A trim of T in its waiting pass holds T and Q and waits for X
    (held here); the sweep claimed P, then waited for its reader Q (migration 0022's order);
    freed, the trim took X, then waited for P. Now the sweep locks P's readers SKIP LOCKED,
    and finding one held rolls back and tries again a little later. In a database of its
    own: the sweep spans spaces."""
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        channel = (await fresh.start(create_storage)).channel(space.key)
        stub = Stub(channel)
        t, q, x, p = await roots(pool, space, 4)
        await append(stub, space, t, rec("t1"), rec("t2"))
        await inherit(stub, space, p, t)
        await append(stub, space, p, rec("p3"))
        await inherit(stub, space, q, p)
        await inherit(stub, space, x, t)
        await pool.execute(PROVISIONAL, space.id, p, -1.0)
        tree = create_service(pool)
        lost = await deadlocks(pool)
        jobs = await behind_a_waiting_trim(
            pool, space, x, trim(stub, space, t, 1), lambda: tree.sweeps.sweep(SweepQuery())
        )
        assert await deadlocks(pool) == lost
        swept = jobs[1].result()
        if not swept:
            # The sweep skips a due session held right now (by design: a CommitSession
            # may be making it visible), here the trim's once it was let go: the next
            # sweep takes it.
            swept = await tree.sweeps.sweep(SweepQuery())
        assert [(s.space_id, s.id) for s in swept] == [(space.id, p)]
        assert [x.content for x in await listed(stub, space, q)] == ["t1", "t2", "p3"]
        await channel.close()


async def backed_off(busy: list[LocksBusy], job: asyncio.Future[Any], times: int) -> None:
    """Until the erasure job found rows held and backed off `times` times (`recording`'s
    `busy`), or `job` ended."""
    async with asyncio.timeout(30):
        while True:
            if len(busy) >= times or job.done():
                break
            await asyncio.sleep(0.01)


def recording(
    errors: list[BaseException], busy: list[LocksBusy] | None = None
) -> Callable[..., Awaitable[Any]]:
    """`in_transaction` (the erasure job's), noting each database error that comes out of
    it (every ERROR the server logs for the job's statements reaches it as one), and each
    try that found rows held and backed off (`LocksBusy`) in `busy`."""
    original = db.in_transaction

    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return await original(*args, **kwargs)
        except asyncpg.PostgresError as exc:
            errors.append(exc)
            raise
        except LocksBusy as exc:
            if busy is not None:
                busy.append(exc)
            raise

    return run


async def test_the_erasure_job_backs_off_without_an_error(
    admin_dsn: str, settings: StelloSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """U (hidden) holds rows R reads; R is held here. The job took its locks NOWAIT: each
    try failed with an ERROR the server logged (lock not available), about 25 per race run.
    Now it skips rows others hold, finds one missing, and backs off (LocksBusy) until R is
    free, with no error. In a database of its own: no other erasure runs there."""
    errors: list[BaseException] = []
    busy: list[LocksBusy] = []
    monkeypatch.setattr(erasure_job, "in_transaction", recording(errors, busy))
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        channel = (await fresh.start(create_storage)).channel(space.key)
        stub = Stub(channel)
        r, u = await roots(pool, space, 2)
        await append(stub, space, u, rec("u1"), rec("u2"))
        await inherit(stub, space, r, u)
        await create_service(pool).erasure.delete_subtree(space.id, u)
        async with pool.acquire() as lock:
            jobs: list[asyncio.Future[Any]] = []
            try:
                async with lock.transaction():
                    await lock.fetch(NO_KEY_UPDATE, space.id, r)
                    jobs.append(asyncio.ensure_future(erased(pool)))
                    await backed_off(busy, jobs[0], times=2)
                    assert not jobs[0].done(), await waits(pool)
                await without_cycle(pool, jobs)
            finally:
                await stopped(jobs)
        assert errors == []
        assert await pool.fetchval(PRESENT, space.id, [u]) == 0
        assert [x.content for x in await listed(stub, space, r)] == ["u1", "u2"]
        await channel.close()
