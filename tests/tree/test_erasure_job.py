"""A delete of any size answers at once; the erasure job finishes it (DESIGN §4.8).

DeleteSubtree hides the subtree in one transaction (every read answers it as absent,
its SUBTREE_DELETED events written there) and the job erases it afterwards in bounded
batches, deepest first, resuming after a crash: a real `python -m tree_service`
killed mid-erasure finishes it once restarted, and no session of the subtree is
readable at any moment after the first answer.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import grpc
import pytest

from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.support.fixtures import TestSpace
from tests.tree.conftest import TreeClient, erased, session_count
from tests.tree.owned import belongings, give_belongings
from tests.tree.seed import chain, fanout_tree, seed_topology
from tree_service.erasure.job import ERASE_LOCK_KEY, erase_batch

pytestmark = pytest.mark.sql

HIDDEN = """
SELECT count(*) FROM sessions WHERE space_id = $1 AND provisional_until = 'infinity'
"""


@asynccontextmanager
async def erasure_held(
    pool: asyncpg.Pool,
) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[asyncpg.Record]]:
    """Another replica's erasure holds the job's lock: no round erases meanwhile.

    The lock is a transaction's, held by an open transaction, as the job's own: through
    PgBouncer in transaction mode a session lock would stay on whichever server
    connection took it (the unlock may land on another), and the server's rounds would
    take it there or wait for it forever."""
    async with pool.acquire() as con, con.transaction():
        await con.execute("SELECT pg_advisory_xact_lock($1)", ERASE_LOCK_KEY)
        yield con


async def delete(stub: tree_pb2_grpc.SessionTreeStub, space: TestSpace, session: str) -> list[str]:
    reply = await stub.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(space_id=space.sid, session_id=session),
        metadata=space.metadata,
    )
    return list(reply.deleted_ids)


async def not_found(call: object) -> bool:
    """Whether the awaited call answers NOT_FOUND."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as err:
        return err.code() == grpc.StatusCode.NOT_FOUND
    return False


class TestHiding:
    async def test_answers_before_the_erasure_and_hides_at_once(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """DeleteSubtree answers every id while the rows still exist (the job not run yet),
        and from that answer on no read finds any of them, nor their refs from outside."""
        root = await tree.create()
        middle = await tree.child(root.id)
        leaf = await tree.child(middle.id)
        hidden = await tree.child(middle.id, provisional=True)
        other = await tree.create()
        await tree.stub.AddRef(
            tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=other.id, to_id=leaf.id)
        )
        await give_belongings(pool, tree.space.id, uuid.UUID(leaf.id))
        async with erasure_held(pool):
            deleted = await delete(tree.stub, tree.space, middle.id)
            assert deleted[0] == middle.id
            assert set(deleted) == {middle.id, leaf.id, hidden.id}
            assert await pool.fetchval(HIDDEN, tree.space.id) == 3
            assert await belongings(pool, tree.space.id, uuid.UUID(leaf.id)) == 5
            for session in deleted:
                assert await not_found(tree.node(session))
            assert await not_found(tree.commit(hidden.id))
            assert list((await tree.node(root.id)).children) == []
            assert list((await tree.node(other.id)).refs) == []
            assert await not_found(tree.child(leaf.id))
            assert await not_found(delete(tree.stub, tree.space, middle.id))
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 2
        assert await belongings(pool, tree.space.id, uuid.UUID(leaf.id)) == 0

    async def test_deleting_above_a_hidden_subtree_names_only_the_new(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Deleting an ancestor of a subtree still being erased answers only the sessions
        it hid itself; both are erased."""
        root = await tree.create()
        middle = await tree.child(root.id)
        leaf = await tree.child(middle.id)
        async with erasure_held(pool):
            assert await delete(tree.stub, tree.space, middle.id) == [middle.id, leaf.id]
            assert await delete(tree.stub, tree.space, root.id) == [root.id]
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 0


class TestBatches:
    async def test_deepest_first_in_bounded_batches(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The job erases at most a batch per transaction, always the deepest sessions left,
        so the hidden rows left are always a chain's top part."""
        ids = await seed_topology(pool, tree.space.id, chain(7))
        await erased(pool)  # nothing else is left to erase
        left = []
        # This transaction holds the job's lock: the server's rounds give up; its own
        # batches (each a subtransaction of it) run.
        async with erasure_held(pool) as con:
            await delete(tree.stub, tree.space, str(ids[0]))
            while True:
                async with con.transaction():
                    count = await erase_batch(con, 3)  # type: ignore[arg-type]
                if not count:
                    break
                rows = await con.fetch(
                    "SELECT id FROM sessions WHERE space_id = $1 ORDER BY depth",
                    tree.space.id,
                )
                left.append((count, [r["id"] for r in rows]))
        assert left == [(3, ids[:4]), (3, ids[:1]), (1, [])]


@asynccontextmanager
async def tree_process(
    database_env: dict[str, str], **settings: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`python -m tree_service` as a real process; its address once it listens."""
    env = {
        **os.environ,
        **database_env,
        "STELLO_AUTH_CACHE_TTL_S": "0",
        "STELLO_TREE_PORT": "0",
        **settings,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tree_service",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while True:
            line = (await process.stderr.readline()).decode()
            lines.append(line)
            found = re.search(r"listening on port (\d+)", line)
            if found:
                break
            if not line:
                raise AssertionError("tree process ended early:\n" + "".join(lines))
    drain = asyncio.create_task(process.stderr.read())
    try:
        yield process, f"127.0.0.1:{found.group(1)}"
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await drain


class TestCrash:
    @pytest.mark.slow
    async def test_a_killed_erasure_finishes_after_restart(
        self, database_env: dict[str, str], tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """`python -m tree_service` killed (SIGKILL) mid-erasure of a 4,000-session subtree:
        no session of it is readable at any moment after the answer, and a restarted
        process erases the rest."""
        ids = await seed_topology(pool, tree.space.id, fanout_tree(4_000, 20))
        settings = {"STELLO_TREE_ERASE_BATCH": "25", "STELLO_TREE_ERASE_INTERVAL_S": "0.2"}
        async with tree_process(database_env, **settings) as (process, address):
            async with grpc.aio.insecure_channel(address) as channel:
                stub = tree_pb2_grpc.SessionTreeStub(channel)
                deleted = await delete(stub, tree.space, str(ids[0]))
                assert len(deleted) == 4_000
                for _ in range(6000):
                    if await session_count(pool, tree.space.id) < 4_000:
                        break
                    await asyncio.sleep(0.01)
                process.send_signal(signal.SIGKILL)
                await process.wait()
        left = await session_count(pool, tree.space.id)
        assert 0 < left < 4_000, "the kill came before or after the erasure"
        for session in ids[:: len(ids) // 50]:
            assert await not_found(tree.node(str(session)))
        async with tree_process(database_env, **settings):
            for _ in range(1200):
                if not await session_count(pool, tree.space.id):
                    break
                for session in ids[:: len(ids) // 10]:
                    assert await not_found(tree.node(str(session)))
                await asyncio.sleep(0.1)
        assert await pool.fetchval(HIDDEN, tree.space.id) == 0
