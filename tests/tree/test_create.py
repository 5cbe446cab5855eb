"""CreateSession and CommitSession: ids, defaults, indexes under the parent lock, idempotency."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.tree.v1 import tree_pb2
from tests.support.fixtures import TestSpace
from tests.tree.conftest import TreeClient, erased, session_count

pytestmark = pytest.mark.sql


async def updated_at(pool: asyncpg.Pool, space: TestSpace, session_id: str) -> datetime:
    async with pool.acquire() as con:
        stamp: datetime = await con.fetchval(
            "SELECT updated_at FROM sessions WHERE space_id = $1 AND id = $2",
            space.id,
            uuid.UUID(session_id),
        )
    return stamp


class TestCreateSession:
    async def test_root_defaults(self, tree: TreeClient) -> None:
        """A session without parent is a root: no parent, depth 0, index 0, label "Root", active."""
        node = await tree.create()
        assert uuid.UUID(node.id).version == 4
        assert not node.HasField("parent_id")
        assert (node.depth, node.index, node.label) == (0, 0, "Root")
        assert list(node.children) == [] and list(node.refs) == []
        assert not node.HasField("source_session_id")
        assert node.status == common_pb2.SESSION_STATUS_ACTIVE

    async def test_root_id_is_its_own(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A root's root_id is its own id; a grandchild inherits it."""
        root = await tree.create()
        child = await tree.child(root.id)
        grandchild = await tree.child(child.id)
        async with pool.acquire() as con:
            rows = await con.fetch(
                "SELECT id, root_id FROM sessions WHERE space_id = $1", tree.space.id
            )
        assert {str(r["id"]): str(r["root_id"]) for r in rows} == {
            root.id: root.id,
            child.id: root.id,
            grandchild.id: root.id,
        }

    async def test_child_defaults_and_parent_bump(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A child gets depth + 1, the next index, label "Session", and bumps the parent."""
        root = await tree.create(label="R")
        before = await updated_at(pool, tree.space, root.id)
        first = await tree.child(root.id)
        second = await tree.child(root.id, label="B")
        assert (first.parent_id, first.depth, first.index, first.label) == (
            root.id,
            1,
            0,
            "Session",
        )
        assert (second.index, second.label) == (1, "B")
        assert await updated_at(pool, tree.space, root.id) > before
        assert list((await tree.node(root.id)).children) == [first.id, second.id]

    async def test_source_session_is_recorded(self, tree: TreeClient) -> None:
        """source_session_id is stored and reported by GetNode."""
        root = await tree.create()
        a = await tree.child(root.id)
        b = await tree.child(root.id, source_session_id=a.id)
        assert b.source_session_id == a.id
        assert (await tree.node(b.id)).source_session_id == a.id

    async def test_unknown_parent_is_not_found(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A parent that does not exist answers NOT_FOUND and writes nothing."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.child(str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, tree.space.id) == 0

    async def test_unknown_source_is_not_found(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A source session that does not exist answers NOT_FOUND and writes nothing."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.create(source_session_id=str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, tree.space.id) == 0

    async def test_provisional_parent_or_source_is_not_found(self, tree: TreeClient) -> None:
        """A provisional session can be neither parent nor source until committed."""
        hidden = await tree.create(provisional=True)
        for fields in ({"parent_id": hidden.id}, {"source_session_id": hidden.id}):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await tree.create(**fields)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        await tree.commit(hidden.id)
        assert (await tree.child(hidden.id, source_session_id=hidden.id)).depth == 1

    async def test_archived_parent_is_allowed(self, tree: TreeClient) -> None:
        """A child may be created under an archived parent."""
        root = await tree.create()
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=root.id)
        )
        assert (await tree.child(root.id)).parent_id == root.id

    async def test_config_is_written_with_the_session(self, tree: TreeClient) -> None:
        """A config given at creation is stored in the same transaction, presence kept."""
        node = await tree.create(
            config=common_pb2.SessionConfig(skills=common_pb2.SkillList(names=[])),
            provisional=True,
        )
        await tree.commit(node.id)
        reply = await tree.stub.GetConfig(
            tree_pb2.GetConfigRequest(space_id=tree.space.sid, session_id=node.id)
        )
        assert reply.HasField("config")
        assert reply.config.HasField("skills") and list(reply.config.skills.names) == []
        assert not reply.config.HasField("system_prompt")

    async def test_no_config_reads_unset(self, tree: TreeClient) -> None:
        """Without a config at creation GetConfig answers `config` unset."""
        node = await tree.create()
        reply = await tree.stub.GetConfig(
            tree_pb2.GetConfigRequest(space_id=tree.space.sid, session_id=node.id)
        )
        assert not reply.HasField("config")


class TestIdempotency:
    async def test_same_request_answers_the_first_response(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A retry with the same request_id creates nothing and answers the first node."""
        root = await tree.create()
        first = await tree.child(root.id, label="fork", request_id="r-1")
        await tree.child(first.id)  # the first node changes; the replay does not
        again = await tree.child(root.id, label="fork", request_id="r-1")
        assert again == first
        assert await session_count(pool, tree.space.id) == 3

    async def test_concurrent_retries_make_one_session(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Ten concurrent identical requests with one request_id create exactly one session."""
        replies = await asyncio.gather(
            *(tree.create(label="once", request_id="r-2", provisional=True) for _ in range(10))
        )
        assert len({r.id for r in replies}) == 1
        assert await session_count(pool, tree.space.id) == 1

    async def test_concurrent_visible_children_make_one_node(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Ten concurrent identical keyed creates of a visible child answer one node; the
        rolled-back attempts leave no row and no index gap (the next child is index 1)."""
        root = await tree.create()
        replies = await asyncio.gather(
            *(tree.child(root.id, label="once", request_id="r-v") for _ in range(10))
        )
        assert len({r.id for r in replies}) == 1
        assert (await tree.child(root.id)).index == 1
        assert await session_count(pool, tree.space.id) == 3

    async def test_retry_after_its_source_went_answers_the_first_node(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A retry whose work would now fail (its source was deleted) still answers the
        first node: the key is looked up before the error is answered."""
        source = await tree.create(label="source")
        first = await tree.create(source_session_id=source.id, request_id="r-s")
        await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=source.id)
        )
        again = await tree.create(source_session_id=source.id, request_id="r-s")
        await erased(pool)
        assert again == first
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.create(source_session_id=source.id, request_id="r-new")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, tree.space.id) == 1

    async def test_different_request_is_already_exists(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The same request_id on a different request is ALREADY_EXISTS REQUEST_ID_REUSED."""
        await tree.create(label="a", request_id="r-3")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.create(label="b", request_id="r-3")
        assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(caught.value) == "REQUEST_ID_REUSED"
        assert await session_count(pool, tree.space.id) == 1

    async def test_request_ids_are_per_space(
        self, tree: TreeClient, other_tree: TreeClient
    ) -> None:
        """The same request_id in two spaces creates two sessions."""
        mine = await tree.create(request_id="shared")
        theirs = await other_tree.create(request_id="shared")
        assert mine.id != theirs.id


class TestCommitSession:
    async def test_provisional_then_commit(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A provisional child has no index until commit, which appends it and bumps the parent."""
        root = await tree.create()
        await tree.child(root.id)
        hidden = await tree.child(root.id, provisional=True)
        assert hidden.index == 0
        assert (
            list((await tree.node(root.id)).children) != []
            and hidden.id not in (await tree.node(root.id)).children
        )
        before = await updated_at(pool, tree.space, root.id)
        committed = await tree.commit(hidden.id)
        assert committed.index == 1
        assert list((await tree.node(root.id)).children)[-1] == hidden.id
        assert await updated_at(pool, tree.space, root.id) > before

    async def test_commit_is_idempotent(self, tree: TreeClient) -> None:
        """Committing twice answers the same node and changes nothing."""
        root = await tree.create()
        hidden = await tree.child(root.id, provisional=True)
        first = await tree.commit(hidden.id)
        assert await tree.commit(hidden.id) == first
        assert list((await tree.node(root.id)).children) == [hidden.id]

    async def test_provisional_root_keeps_index_zero(self, tree: TreeClient) -> None:
        """A committed provisional root has index 0 and is listed as a root."""
        hidden = await tree.create(provisional=True)
        assert (await tree.commit(hidden.id)).index == 0
        roots = await tree.stub.ListRoots(tree_pb2.ListRootsRequest(space_id=tree.space.sid))
        assert [n.id for n in roots.nodes] == [hidden.id]

    async def test_unknown_session_is_not_found(self, tree: TreeClient) -> None:
        """Committing an id that does not exist answers NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.commit(str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_deleted_gaps_are_not_reused(self, tree: TreeClient) -> None:
        """After a sibling is deleted, the next index is max + 1: gaps stay, no duplicates."""
        root = await tree.create()
        a, b = await tree.child(root.id), await tree.child(root.id)
        await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=a.id)
        )
        c = await tree.commit((await tree.child(root.id, provisional=True)).id)
        d = await tree.child(root.id)
        assert (b.index, c.index, d.index) == (1, 2, 3)


class TestConcurrency:
    async def test_fifty_concurrent_create_and_commit(self, tree: TreeClient) -> None:
        """50 concurrent CreateSession + CommitSession under one parent get indexes 0..49."""
        root = await tree.create()

        async def fork(n: int) -> common_pb2.TopologyNode:
            hidden = await tree.child(root.id, label=f"c{n}", provisional=True)
            return await tree.commit(hidden.id)

        nodes = await asyncio.gather(*(fork(n) for n in range(50)))
        assert sorted(n.index for n in nodes) == list(range(50))
        children = list((await tree.node(root.id)).children)
        assert children == [n.id for n in sorted(nodes, key=lambda n: n.index)]

    async def test_fifty_concurrent_visible_creates(self, tree: TreeClient) -> None:
        """50 concurrent non-provisional creates under one parent get indexes exactly 0..49."""
        root = await tree.create()
        nodes = await asyncio.gather(*(tree.child(root.id) for _ in range(50)))
        assert sorted(n.index for n in nodes) == list(range(50))
        assert len((await tree.node(root.id)).children) == 50
