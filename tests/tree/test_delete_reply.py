"""DeleteSubtree's answer: the erased ids and their count, the count alone on request, and a
subtree whose ids would not fit the reply refused before anything is hidden."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from stello.errors import ResourceExhausted, field_violations
from stello.tree.v1 import tree_pb2
from tests.support.fixtures import ServerStarter, TestSpace
from tests.tree.conftest import (
    TreeClient,
    commit_a_child_while,
    erased,
    open_tree,
    session_count,
    visible_count,
)
from tests.tree.seed import fanout_tree, seed_topology
from tree_service.app import create_app, create_service
from tree_service.erasure.service import DELETE_REPLY_OVERHEAD, DELETED_ID_BYTES

pytestmark = pytest.mark.sql

EVENTS = "SELECT count(*) FROM space_events WHERE space_id = $1 AND kind = 'subtree_deleted'"


async def delete(
    tree: TreeClient, session_id: str, *, count_only: bool = False, max_reply_bytes: int = 0
) -> tree_pb2.DeleteSubtreeResponse:
    reply: tree_pb2.DeleteSubtreeResponse = await tree.stub.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(
            space_id=tree.space.sid,
            session_id=session_id,
            count_only=count_only,
            max_reply_bytes=max_reply_bytes,
        )
    )
    return reply


def fitting(ids: int) -> int:
    """The reply limit that fits `ids` erased ids and no more."""
    return DELETE_REPLY_OVERHEAD + DELETED_ID_BYTES * ids


class TestTheAnswer:
    async def test_the_ids_come_with_their_count(self, tree: TreeClient) -> None:
        root = await tree.create()
        child = await tree.child(root.id)
        reply = await delete(tree, root.id)
        assert list(reply.deleted_ids) == [root.id, child.id]
        assert reply.deleted_count == 2

    async def test_count_only_answers_the_count_alone(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The subtree is hidden as without it; the reply carries no id."""
        root = await tree.create()
        doomed = await tree.child(root.id)
        for _ in range(2):
            await tree.child(doomed.id)
        reply = await delete(tree, doomed.id, count_only=True)
        assert (list(reply.deleted_ids), reply.deleted_count) == ([], 3)
        assert await visible_count(pool, tree.space.id) == 1
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.node(doomed.id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        await erased(pool)
        assert await session_count(pool, tree.space.id) == 1


class TestTheReplyLimit:
    async def test_ids_past_the_limit_are_refused_and_nothing_is_hidden(
        self, start_server: ServerStarter, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """30 ids where 29 fit: RESOURCE_EXHAUSTED naming the count and `count_only`, every
        session still visible and no event written; with `count_only` the same call erases
        them."""
        running = await start_server(
            lambda s, p, k: create_app(
                s.model_copy(update={"max_message_bytes": fitting(29)}), p, k
            )
        )
        ids = await seed_topology(pool, space.id, fanout_tree(30, 5))
        async for tree in open_tree(running, space):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await delete(tree, str(ids[0]))
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            details = caught.value.details() or ""
            assert "30 sessions" in details and "count_only" in details
            assert "nothing was deleted" in details
            assert f"(STELLO_MAX_MESSAGE_BYTES = {fitting(29)})" in details
            assert await visible_count(pool, space.id) == 30
            assert await pool.fetchval(EVENTS, space.id) == 0
            reply = await delete(tree, str(ids[0]), count_only=True)
            assert (list(reply.deleted_ids), reply.deleted_count) == ([], 30)
            assert await visible_count(pool, space.id) == 0

    async def test_ids_that_fit_exactly_are_answered(
        self, start_server: ServerStarter, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        running = await start_server(
            lambda s, p, k: create_app(
                s.model_copy(update={"max_message_bytes": fitting(30)}), p, k
            )
        )
        ids = await seed_topology(pool, space.id, fanout_tree(30, 5))
        async for tree in open_tree(running, space):
            reply = await delete(tree, str(ids[0]))
            assert reply.deleted_count == 30
            assert sorted(reply.deleted_ids) == sorted(str(i) for i in ids)

    async def test_the_callers_own_limit_is_kept_too(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """`max_reply_bytes` under the server's limit is the one kept, and named."""
        ids = await seed_topology(pool, tree.space.id, fanout_tree(3, 2))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await delete(tree, str(ids[0]), max_reply_bytes=fitting(2))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"(max_reply_bytes = {fitting(2)})" in (caught.value.details() or "")
        assert await visible_count(pool, tree.space.id) == 3
        reply = await delete(tree, str(ids[0]), max_reply_bytes=fitting(3))
        assert reply.deleted_count == 3 and len(reply.deleted_ids) == 3

    async def test_one_session_is_said_in_the_singular(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A lone session whose id does not fit: "1 session", and the bytes explained."""
        ids = await seed_topology(pool, tree.space.id, fanout_tree(1, 2))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await delete(tree, str(ids[0]), max_reply_bytes=fitting(1) - 1)
        details = caught.value.details() or ""
        assert f"session {ids[0]} has 1 session in its subtree: " in details, details
        assert f"({fitting(1)} bytes: 38 per session and 16 more)" in details, details

    async def test_a_negative_limit_is_invalid(self, tree: TreeClient) -> None:
        root = await tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await delete(tree, root.id, max_reply_bytes=-1)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [(v.field, v.description) for v in field_violations(caught.value)] == [
            ("max_reply_bytes", "must not be negative, got -1")
        ]
        assert (await tree.node(root.id)).id == root.id

    async def test_sessions_found_late_count_before_the_commit(
        self, space: TestSpace, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """A child committed while the delete waits for its parent's lock is hidden with
        the subtree (LOCK_MISSED); when it takes the ids past the limit, the whole hide
        rolls back: the three sessions are all still visible."""
        service = create_service(pool, max_reply_bytes=fitting(2))
        root, middle = await seed_topology(pool, space.id, fanout_tree(2, 1))
        watcher = await asyncpg.connect(direct_database_url)

        async def start() -> asyncio.Task[list[uuid.UUID]]:
            return asyncio.create_task(service.erasure.delete_subtree(space.id, root))

        try:
            deleting = await commit_a_child_while(
                pool, watcher, space.id, middle, uuid.uuid4(), start
            )
            with pytest.raises(ResourceExhausted, match="3 sessions"):
                await deleting
        finally:
            await watcher.close()
        assert await visible_count(pool, space.id) == 3
        assert await pool.fetchval(EVENTS, space.id) == 0
