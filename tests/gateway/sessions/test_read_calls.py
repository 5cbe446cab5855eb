"""The gateway's reads make at most one call per service (DESIGN §9: a joined read <= 2
internal calls): GetSession is storage GetSession (meta and slots) in parallel with tree
GetNode (node and config); GetTree, ListRecords and GetLineage pages are one call per service
they need. Counted on the gateway's own clients (attempts included), over real servers."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.tree.v1 import tree_pb2
from tests.gateway.conftest import (
    Counted,
    close_stack,
    new_id,
    open_stack,
    record,
    rpc_error,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


class TestGetSession:
    """GetSession: one storage call and one tree call, the view unchanged."""

    async def test_one_call_per_service(self, counted: Counted) -> None:
        """The joined view (node, meta, config, the three slots) takes exactly storage
        GetSession and tree GetNode."""
        stack = counted.stack
        root = await stack.root(system_prompt="sys", skills=common_pb2.SkillList())
        child = await stack.fork(root.id, "c")
        target = {"space_id": stack.space.sid, "session_id": root.id}
        await stack.gw.PutInsight(agent_pb2.PutInsightRequest(**target, content="i"))
        await stack.gw.PutMemory(agent_pb2.PutMemoryRequest(**target, content="m"))
        await stack.append(root.id, record("user", "hello"))
        counted.clear()
        view = await stack.view(root.id)
        assert counted.calls() == ({"GetSession": 1}, {"GetNode": 1})
        assert (view.node.id, list(view.node.children)) == (root.id, [child.id])
        assert (view.config.system_prompt, view.config.HasField("skills")) == ("sys", True)
        assert (view.system_prompt, view.memory, view.insight) == ("sys", "m", "i")
        assert view.created_at == root.created_at

    async def test_a_session_without_config_or_slots(
        self, counted: Counted, pool: asyncpg.Pool
    ) -> None:
        """A session whose config and slots are all unset answers them unset, in the same two
        calls."""
        stack = counted.stack
        root = await stack.root()
        async with pool.acquire() as con:
            await con.execute(
                "DELETE FROM session_configs WHERE space_id = $1 AND session_id = $2",
                stack.space.id,
                uuid.UUID(root.id),
            )
            await con.execute(
                "DELETE FROM session_slots WHERE space_id = $1 AND session_id = $2",
                stack.space.id,
                uuid.UUID(root.id),
            )
        counted.clear()
        view = await stack.view(root.id)
        assert counted.calls() == ({"GetSession": 1}, {"GetNode": 1})
        assert not view.HasField("config")
        assert not any(view.HasField(n) for n in ("system_prompt", "memory", "insight"))

    @pytest.mark.parametrize("whose", ["unknown", "foreign"])
    async def test_not_found_in_at_most_one_call_per_service(
        self, counted: Counted, other_space: TestSpace, whose: str
    ) -> None:
        """An unknown session, or another space's, is NOT_FOUND, still one call per service at
        most."""
        stack = counted.stack
        session_id = new_id()
        if whose == "foreign":
            other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
            try:
                session_id = (await other.root(system_prompt="theirs")).id
            finally:
                await close_stack(other)
        counted.clear()
        error = await rpc_error(stack.view(session_id))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert "theirs" not in (error.details() or "")
        storage, tree = counted.calls()
        assert set(storage) <= {"GetSession"} and set(tree) <= {"GetNode"}
        assert sum(storage.values()) <= 1 and sum(tree.values()) <= 1


class TestOtherReads:
    """GetTree, ListRecords and GetLineage pages: one call to each service they read."""

    async def test_get_tree_is_one_tree_call(self, counted: Counted) -> None:
        """GetTree is the tree's GetTree alone."""
        stack = counted.stack
        root = await stack.root()
        await stack.fork(root.id, "c")
        counted.clear()
        reply = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
        assert len(reply.nodes) == 2
        assert counted.calls() == ({}, {"GetTree": 1})

    def test_tree_replies_share_the_gateways_wire_shape(self) -> None:
        """tree.proto's GetTreeResponse has the gateway's fields (the gateway passes its bytes
        on unparsed): same numbers, names, kinds and node message."""

        def shape(message: Any) -> list[tuple[int, str, int, str | None]]:
            return [
                (f.number, f.name, f.type, f.message_type and f.message_type.full_name)
                for f in message.DESCRIPTOR.fields
            ]

        assert shape(tree_pb2.GetTreeResponse) == shape(agent_pb2.GetTreeResponse)
        assert shape(tree_pb2.GetTreeResponse) == [
            (1, "nodes", FieldDescriptor.TYPE_MESSAGE, "stello.common.v1.TreeNode")
        ]

    async def test_list_records_is_one_storage_call(self, counted: Counted) -> None:
        """A ListRecords page is storage's ListRecords alone."""
        stack = counted.stack
        root = await stack.root()
        await stack.append(root.id, record("user", "a"), record("assistant", "b"))
        counted.clear()
        reply = await stack.gw.ListRecords(
            agent_pb2.ListRecordsRequest(space_id=stack.space.sid, session_id=root.id, limit=1)
        )
        assert [r.content for r in reply.records] == ["a"]
        assert counted.calls() == ({"ListRecords": 1}, {})

    async def test_lineage_page_is_one_call_per_service(self, counted: Counted) -> None:
        """A GetLineage page is tree ListAncestors and storage BatchGetSlots, once each."""
        stack = counted.stack
        root = await stack.root()
        middle = await stack.fork(root.id, "m")
        leaf = await stack.fork(middle.id, "l")
        counted.clear()
        reply = await stack.gw.GetLineage(
            agent_pb2.GetLineageRequest(space_id=stack.space.sid, session_id=leaf.id, page_size=1)
        )
        assert [a.id for a in reply.ancestors] == [middle.id]
        assert counted.calls() == ({"BatchGetSlots": 1}, {"ListAncestors": 1})
