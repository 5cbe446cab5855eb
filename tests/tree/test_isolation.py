"""Tenancy: another space's sessions answer NOT_FOUND and nothing is written (spec §6.3.37)."""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from stello.db.maintenance import ACROSS_SPACES
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient, session_count

pytestmark = pytest.mark.sql


class TestIsolation:
    async def test_parent_in_another_space(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A parent or source from another space is NOT_FOUND, and no row is written anywhere."""
        theirs = await other_tree.create()
        for fields in ({"parent_id": theirs.id}, {"source_session_id": theirs.id}):
            for provisional in (False, True):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await tree.create(provisional=provisional, **fields)
                assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, tree.space.id) == 0
        assert await session_count(pool, other_tree.space.id) == 1

    async def test_ref_to_another_space(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A ref target from another space is NOT_FOUND and no ref is written."""
        mine, theirs = await tree.create(), await other_tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.AddRef(
                tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=mine.id, to_id=theirs.id)
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        async with pool.acquire() as con, con.transaction():
            await con.execute(ACROSS_SPACES)  # two spaces' refs: multi-shard on Citus
            refs = await con.fetchval(
                "SELECT count(*) FROM session_refs WHERE space_id = ANY($1::uuid[])",
                [tree.space.id, other_tree.space.id],
            )
        assert refs == 0

    async def test_sessions_of_another_space_are_absent(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Reads and writes in my space never see, change or erase another space's session."""
        theirs = await other_tree.create(label="theirs")
        sid = tree.space.sid
        calls = [
            tree.stub.GetNode(tree_pb2.GetNodeRequest(space_id=sid, session_id=theirs.id)),
            tree.stub.GetNode(
                tree_pb2.GetNodeRequest(space_id=sid, session_id=theirs.id, include_config=True)
            ),
            tree.stub.GetTree(tree_pb2.GetTreeRequest(space_id=sid, root_id=theirs.id)),
            tree.stub.UpdateLabel(
                tree_pb2.UpdateLabelRequest(space_id=sid, session_id=theirs.id, label="mine")
            ),
            tree.stub.CommitSession(
                tree_pb2.CommitSessionRequest(space_id=sid, session_id=theirs.id)
            ),
            tree.stub.DeleteSubtree(
                tree_pb2.DeleteSubtreeRequest(space_id=sid, session_id=theirs.id)
            ),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert list((await tree.stub.ListAll(tree_pb2.ListAllRequest(space_id=sid))).sessions) == []
        assert await tree.tree() == []
        assert (await other_tree.node(theirs.id)).label == "theirs"

    async def test_tenant_key_on_another_space_id(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """My key on another space's id answers NOT_FOUND, as if that space did not exist."""
        theirs = await other_tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.CreateSession(
                tree_pb2.CreateSessionRequest(space_id=other_tree.space.sid, parent_id=theirs.id)
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await session_count(pool, other_tree.space.id) == 1
