"""DeleteSubtree: one transaction, one statement over the computed set, everything owned goes."""

from __future__ import annotations

import asyncio
import gc
import uuid

import asyncpg
import grpc
import pytest

from stello.tree.v1 import tree_pb2
from tests.tree.conftest import (
    TreeClient,
    code_of,
    commit_a_child_while,
    erased,
    hide_while,
    session_count,
    visible_count,
)
from tests.tree.owned import belongings, give_belongings
from tests.tree.seed import chain, fanout_tree, seed_topology

# DeleteSubtree's first statement (its subtree, locked), as pg_stat_statements shows it.
LOCK_SUBTREE_CALLS = """
SELECT COALESCE(sum(calls), 0) FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query LIKE '%WITH RECURSIVE subtree (id)%s.id = $2 AND s.provisional_until IS NULL%'
"""

pytestmark = pytest.mark.sql


async def delete(tree: TreeClient, session_id: str) -> list[str]:
    reply = await tree.stub.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return list(reply.deleted_ids)


class TestDeleteSubtree:
    async def test_erases_subtree_and_belongings(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The session, its descendants (provisional too) and their rows go; the rest stays."""
        root = await tree.create()
        a = await tree.child(root.id)
        a1 = await tree.child(a.id)
        a2 = await tree.child(a.id, provisional=True)
        b = await tree.child(root.id)
        for node in (a, a1, a2, b):
            await give_belongings(pool, tree.space.id, uuid.UUID(node.id))
        await tree.stub.AddRef(
            tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=b.id, to_id=a1.id)
        )
        await tree.stub.AddRef(
            tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=a1.id, to_id=b.id)
        )
        deleted = await delete(tree, a.id)
        assert deleted[0] == a.id and set(deleted) == {a.id, a1.id, a2.id}
        await erased(pool)
        for node in (a, a1, a2):
            assert await belongings(pool, tree.space.id, uuid.UUID(node.id)) == 0
        assert await belongings(pool, tree.space.id, uuid.UUID(b.id)) == 5
        assert await session_count(pool, tree.space.id) == 2
        after = await tree.node(b.id)
        assert (after.index, list(after.refs)) == (1, [])
        assert list((await tree.node(root.id)).children) == [b.id]

    async def test_sources_outside_are_cleared(self, tree: TreeClient) -> None:
        """A session forked from an erased one stays, with source_session_id cleared."""
        root = await tree.create()
        a = await tree.child(root.id)
        inside = await tree.child(a.id, source_session_id=a.id)
        outside = await tree.child(root.id, source_session_id=inside.id)
        await delete(tree, a.id)
        assert not (await tree.node(outside.id)).HasField("source_session_id")

    async def test_second_call_is_not_found(self, tree: TreeClient) -> None:
        """Erasure is not idempotent by id: the second call answers NOT_FOUND."""
        root = await tree.create()
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=root.id)
        )
        assert await delete(tree, root.id) == [root.id]  # archived: allowed
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await delete(tree, root.id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_provisional_is_not_found(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A provisional session cannot be erased by id (it does not exist yet); nothing goes."""
        hidden = await tree.create(provisional=True)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await delete(tree, hidden.id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, tree.space.id) == 1

    async def test_concurrent_creates_under_the_subtree(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Children created while their ancestor is erased are erased too, or refused NOT_FOUND."""
        root = await tree.create()
        middle = await tree.child(root.id)

        async def create() -> grpc.StatusCode:
            try:
                await tree.child(middle.id)
            except grpc.aio.AioRpcError as err:
                return err.code()
            return grpc.StatusCode.OK

        outcomes = await asyncio.gather(
            *(create() for _ in range(20)), delete(tree, root.id), *(create() for _ in range(20))
        )
        codes = [o for o in outcomes if isinstance(o, grpc.StatusCode)]
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND}
        assert await visible_count(pool, tree.space.id) == 0
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 0

    async def test_a_child_committed_while_the_delete_waits_goes_with_it(
        self, tree: TreeClient, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """A create holding the parent's lock when DeleteSubtree comes commits its child while
        the delete waits: the delete hides that child too, in the same pass (its subtree is
        locked once, not recomputed), and answers it."""
        root = await tree.create()
        middle = await tree.child(root.id)
        child = uuid.uuid4()
        space_id = tree.space.id
        counter = await asyncpg.connect(direct_database_url)
        try:
            preload = await counter.fetchval("SHOW shared_preload_libraries")
            counting = "pg_stat_statements" in preload
            if counting:
                await counter.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

            async def start() -> asyncio.Task[list[str]]:
                if counting:
                    await counter.execute("SELECT pg_stat_statements_reset()")
                return asyncio.create_task(delete(tree, root.id))

            parent = uuid.UUID(middle.id)
            deleting = await commit_a_child_while(pool, counter, space_id, parent, child, start)
            deleted = await deleting
            assert deleted[:2] == [root.id, middle.id] and set(deleted[2:]) == {str(child)}
            if counting:
                assert await counter.fetchval(LOCK_SUBTREE_CALLS) == 1
        finally:
            await counter.close()
        await erased(pool)
        assert await session_count(pool, space_id) == 0

    async def test_a_delete_waiting_on_the_same_delete_finds_nothing(
        self, tree: TreeClient, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """A DeleteSubtree that waits on another's locks of the same subtree answers NOT_FOUND
        once that one commits, and writes no event: four at once each answered every id
        and wrote its own SUBTREE_DELETED events (found from outside)."""
        root = await tree.create()
        await tree.child(root.id)
        watcher = await asyncpg.connect(direct_database_url)
        try:

            async def start() -> asyncio.Task[list[str]]:
                return asyncio.create_task(delete(tree, root.id))

            space_id, session_id = tree.space.id, uuid.UUID(root.id)
            waiting = await hide_while(pool, watcher, space_id, session_id, start)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await waiting
        finally:
            await watcher.close()
        assert code_of(caught.value) == grpc.StatusCode.NOT_FOUND
        assert await pool.fetch(SUBTREE_EVENTS, tree.space.id) == []

    async def test_a_delete_above_a_delete_answers_only_what_it_hid(
        self, tree: TreeClient, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """A DeleteSubtree of an ancestor that waits on a delete below it answers (and names
        in its events) only the sessions it hid itself, as tree.proto says: it answered
        the other delete's sessions too."""
        root = await tree.create()
        middle = await tree.child(root.id)
        await tree.child(middle.id)
        other = await tree.child(root.id)
        watcher = await asyncpg.connect(direct_database_url)
        try:

            async def start() -> asyncio.Task[list[str]]:
                return asyncio.create_task(delete(tree, root.id))

            space_id, below = tree.space.id, uuid.UUID(middle.id)
            deleted = await (await hide_while(pool, watcher, space_id, below, start))
        finally:
            await watcher.close()
        assert deleted == [root.id, other.id]
        events = await pool.fetch(SUBTREE_EVENTS, tree.space.id)
        assert [[str(i) for i in e["session_ids"]] for e in events] == [deleted]
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 0

    @pytest.mark.slow
    async def test_ten_thousand_deep_chain(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Erasing a 10,000-deep chain from its root erases it all in one call.

        Without the indexes on the foreign keys' columns this ran for minutes and hit the test's
        timeout; its speed is measured in bench/, not asserted here.
        """
        ids = await seed_topology(pool, tree.space.id, chain(10_000))
        await give_belongings(pool, tree.space.id, ids[-1])
        deleted = await delete(tree, str(ids[0]))
        assert deleted == [str(i) for i in ids]
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 0


SUBTREE_EVENTS = """
SELECT position, session_id, session_ids FROM space_events
WHERE space_id = $1 AND kind = 'subtree_deleted' ORDER BY position
"""


class TestDeletionEvents:
    async def test_a_large_subtree_is_named_in_events_of_at_most_a_thousand(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Erasing 2,500 sessions writes three SUBTREE_DELETED events of the same root, at
        consecutive positions, naming each erased session once, the root first; no event
        is larger than SUBTREE_EVENT_IDS ids."""
        ids = await seed_topology(pool, tree.space.id, fanout_tree(2_500, 50))
        deleted = await delete(tree, str(ids[0]))
        events = await pool.fetch(SUBTREE_EVENTS, tree.space.id)
        assert [len(e["session_ids"]) for e in events] == [1000, 1000, 500]
        assert {e["session_id"] for e in events} == {ids[0]}
        positions = [e["position"] for e in events]
        assert positions == list(range(positions[0], positions[0] + 3))
        named = [str(i) for e in events for i in e["session_ids"]]
        assert named == deleted
        assert named[0] == str(ids[0])
        assert set(named) == {str(i) for i in ids}


BLOCKED_BY = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))"


class TestDeadline:
    async def test_a_lock_wait_ends_at_the_deadline(
        self, tree: TreeClient, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The caller's deadline passes while the delete waits for a row another transaction
        holds: the call answers DEADLINE_EXCEEDED, and the wait ends there too (the
        statement bound by the deadline), while the row is still held: the transaction
        rolls back (said in the log when the caller left first), nothing deleted, no error
        logged (no orphan task's). On main it waited until the row was free, holding its
        connection and locks, then logged "Task exception was never retrieved" (explore14
        F7); before that it was cut where it stood (explore4 F10)."""
        root = await tree.create(label="r")
        child = await tree.child(root.id, label="c")
        async with pool.acquire() as holder:
            holding = holder.transaction()
            await holding.start()
            await holder.execute(
                "SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2 FOR UPDATE",
                tree.space.id,
                uuid.UUID(child.id),
            )
            holder_pid = await holder.fetchval("SELECT pg_backend_pid()")  # PgBouncer's too
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await tree.stub.DeleteSubtree(
                    tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=root.id),
                    timeout=0.5,
                )
            assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            for _ in range(40):  # within 2 s of the deadline, the row still held
                if await pool.fetchval(BLOCKED_BY, holder_pid) == 0:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the delete still waits for the row past its deadline")
            await holding.rollback()
        assert await visible_count(pool, tree.space.id) == 2
        assert (
            await tree.stub.GetNode(
                tree_pb2.GetNodeRequest(space_id=tree.space.sid, session_id=child.id)
            )
        ).node.id == child.id
        gc.collect()  # an orphan task's unretrieved error is logged when it is collected
        await asyncio.sleep(0)
        errors = [r for r in caplog.records if r.levelname == "ERROR"]
        assert errors == [], [r.getMessage() for r in errors]

    async def test_a_deadline_months_away(self, tree: TreeClient) -> None:
        """A caller whose deadline is months away (a client's "no real deadline") has its
        subtree deleted: the statements are bound by PostgreSQL's longest statement_timeout
        (about 24.8 days). It answered INTERNAL: the deadline in milliseconds was over the
        setting's range, which the database refused."""
        root = await tree.create(label="r")
        child = await tree.child(root.id, label="c")
        reply = await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=root.id),
            timeout=400 * 24 * 3600,
        )
        assert list(reply.deleted_ids) == [root.id, child.id]
