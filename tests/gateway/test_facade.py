"""The orchestrator-facing surface, restated for gRPC (STELLO-SPEC §6.6 items 10, 12-21).

The spec's StelloAgent facade is the gateway here: createSession is
CreateRoot/Fork, the data SDK is GetSession, ListSessionDigests, GetTree,
ListRecords, PutMemory and PutInsight. Items about a missing storage have no
gRPC form (the gateway always has one); what they protect — a clear failure
when the data is out of reach — is restated as UNAVAILABLE.
"""

from __future__ import annotations

import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.gateway.conftest import Stack, StackMaker, record, rpc_error
from tests.gateway.turns_support import SpyProvider, answer, insight, put_insight, send

pytestmark = pytest.mark.sql


async def digests(
    stack: Stack, status: common_pb2.SessionStatus = common_pb2.SESSION_STATUS_UNSPECIFIED
) -> list[common_pb2.SessionDigest]:
    """Every digest of the space (one page)."""
    reply = await stack.gw.ListSessionDigests(
        agent_pb2.ListSessionDigestsRequest(space_id=stack.space.sid, status=status)
    )
    return list(reply.digests)


class TestFacade:
    """Creation, listings, the data reads and writes."""

    async def test_consolidate_calls_once(self, make_stack: StackMaker) -> None:
        """Consolidate runs one consolidation call and waits for it (item 10)."""
        spy = SpyProvider().then_helper(answer("memo"))
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(root.id, record("user", "remember this"))
        reply = await stack.gw.Consolidate(
            agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=root.id)
        )
        assert reply.memory == "memo" and len(spy.calls) == 1

    async def test_create_root_and_child(self, make_stack: StackMaker) -> None:
        """A root gets the given label (default "Root") and no parent; a fork names its parent
        (items 12-14, DESIGN §5.10)."""
        stack = await make_stack(SpyProvider())
        named = await stack.root(label="My Root")
        default = await stack.root()
        child = await stack.fork(named.id, "Child")
        assert (named.label, named.HasField("parent_id")) == ("My Root", False)
        assert default.label == "Root"
        assert (child.label, child.parent_id) == ("Child", named.id)

    async def test_listing_with_status_filter(self, make_stack: StackMaker) -> None:
        """All sessions without a filter; only the active ones with ACTIVE (items 15, 19)."""
        stack = await make_stack(SpyProvider())
        active = await stack.root(label="A")
        archived = await stack.root(label="B")
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=archived.id)
        )
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=active.id, content="mem-x"
            )
        )
        await put_insight(stack, active.id, "ins-x")
        assert len(await digests(stack)) == 2
        only = await digests(stack, common_pb2.SESSION_STATUS_ACTIVE)
        assert [(d.id, d.label, d.status, d.memory, d.insight) for d in only] == [
            (active.id, "A", common_pb2.SESSION_STATUS_ACTIVE, "mem-x", "ins-x")
        ]

    async def test_topology_reads(self, make_stack: StackMaker) -> None:
        """The forest and one node read through GetTree and GetSession (item 16)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        child = await stack.fork(root.id, "kid")
        tree = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
        assert [n.id for n in tree.nodes] == [root.id, child.id]
        assert list((await stack.view(root.id)).node.children) == [child.id]

    async def test_metadata_read(self, make_stack: StackMaker) -> None:
        """GetSession shows memory and insight, without consuming the insight (items 18, 21)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=root.id, content="M")
        )
        await put_insight(stack, root.id, "I")
        view = await stack.view(root.id)
        assert (view.memory, view.insight) == ("M", "I")
        assert await insight(stack, root.id) == "I"

    async def test_insight_cleared_by_turn(self, make_stack: StackMaker) -> None:
        """The turn that uses the insight clears it (item 21's clearInsight, DESIGN §4.2)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await put_insight(stack, root.id, "I")
        await send(stack, root.id, "hi")
        assert await insight(stack, root.id) is None

    async def test_list_messages_limit(self, make_stack: StackMaker) -> None:
        """ListRecords passes its options through: limit 10 of 12 records (item 20)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await stack.append(root.id, *(record("user", str(i)) for i in range(12)))
        reply = await stack.gw.ListRecords(
            agent_pb2.ListRecordsRequest(space_id=stack.space.sid, session_id=root.id, limit=10)
        )
        assert [r.content for r in reply.records] == [str(i) for i in range(10)]

    async def test_storage_unreachable(self, make_stack: StackMaker) -> None:
        """With storage out of reach, data reads and turns are UNAVAILABLE (item 17)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        cut_off = await make_stack(
            SpyProvider(), storage_address="127.0.0.1:1", max_retries=0, call_timeout_s=1.0
        )
        error = await rpc_error(cut_off.view(root.id))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        error = await rpc_error(send(cut_off, root.id, "hi"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
