"""The row-lock order of forks and releases (DESIGN §4.4, migration 0022), shown with two
connections: a Fork INHERIT key-shares the holders of its source's segments in id order,
then locks its source; a release (a trim, the erasure job) must never wait for such a key
share while holding what the fork waits for. The race of many of them at once is
`test_fork_depth_races`; these pin each order down without timing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

import asyncpg
import pytest

from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2_grpc
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, inherit, listed, trim
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.fresh import fresh_database
from tests.tree.conftest import erased
from tree_service.app import create_service

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
            await tree.delete_subtree(space.id, root)
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


async def test_the_erasure_job_locks_its_batch_in_id_order(
    admin_dsn: str, settings: StelloSettings
) -> None:
    """The job picks the deepest hidden sessions but locks them in id order, the order a
    fork key-shares its holders in: a fork holding the lower id's key share can still take
    the higher one's while the job waits for it (locked by depth, the job held the deeper,
    higher id first: a deadlock). In a database of its own: the run's database holds other
    tests' hidden sessions, which the job (one space at a time, behind the background
    erasers of the run's servers) may be busy with for longer than the test may wait."""
    parent, child = sorted([uuid.uuid4(), uuid.uuid4()])  # the deeper session: the higher id
    async with fresh_database(admin_dsn, settings) as fresh:
        pool, space = fresh.pool, fresh.space
        await pool.execute(PARENT_AND_CHILD, space.id, parent, child)
        await create_service(pool).delete_subtree(space.id, parent)
        async with pool.acquire() as fork:
            async with fork.transaction():
                await fork.fetch(KEY_SHARE, space.id, parent)
                job = asyncio.ensure_future(erased(pool))
                try:
                    await blocked_by(pool, fork.get_server_pid(), job)
                    assert await fork.fetch(KEY_SHARE_NOWAIT, space.id, child)
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
