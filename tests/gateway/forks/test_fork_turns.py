"""Session.fork restated for gRPC, and turns in the forked session (STELLO-SPEC §6.2 items 68-81).

The session layer's fork is the gateway's Fork RPC. Items about in-process
options have gRPC counterparts: ids are born in the tree (item 70), a context
function is `inherit_until_seq` (DESIGN §5.9, items 74-75), and the llm, tools
and consolidateFn a child inherits are the gateway's provider and the tools
of each request (items 78-80).
"""

from __future__ import annotations

import uuid

import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.gateway.conftest import Stack, StackMaker
from tests.gateway.llm.support import identity
from tests.gateway.turns_support import SpyProvider, answer, send, tool_definition

pytestmark = pytest.mark.sql


async def parent_with_exchange(stack: Stack, **fields: object) -> str:
    """A root that has had one turn: user 'hello', assistant 'reply'."""
    root = await stack.root(**fields)
    await send(stack, root.id, "hello")
    return str(root.id)


async def contents(stack: Stack, session_id: str) -> list[tuple[str, str]]:
    """(role, content) of every record of a session."""
    names = {common_pb2.RECORD_ROLE_USER: "user", common_pb2.RECORD_ROLE_ASSISTANT: "assistant"}
    return [(names.get(r.role, "?"), r.content) for r in await stack.records(session_id)]


class TestForkedSession:
    """What a fork starts with, and how its turns run."""

    async def test_label_status_and_id(self, make_stack: StackMaker) -> None:
        """The child has its label, is active, and has a tree-born UUID (items 68, 70)."""
        stack = await make_stack(SpyProvider())
        parent = await parent_with_exchange(stack)
        child = await stack.fork(parent, "Child")
        assert (child.label, child.status) == ("Child", common_pb2.SESSION_STATUS_ACTIVE)
        uuid.UUID(child.id)
        assert (await stack.view(child.id)).node.label == "Child"

    async def test_no_memory_copied(self, make_stack: StackMaker) -> None:
        """A parent's memory is not the child's (item 69)."""
        stack = await make_stack(SpyProvider())
        parent = await parent_with_exchange(stack)
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=parent, content="m")
        )
        child = await stack.fork(parent, "c")
        assert not (await stack.view(child.id)).HasField("memory")

    async def test_system_prompt(self, make_stack: StackMaker) -> None:
        """Inherited, overridden, or absent when neither has one (item 71)."""
        stack = await make_stack(SpyProvider())
        parent = await parent_with_exchange(stack, system_prompt="你是一个助手")
        inherited = await stack.fork(parent, "a")
        overridden = await stack.fork(parent, "b", system_prompt="子提示词")
        bare_parent = await stack.root()
        bare = await stack.fork(bare_parent.id, "c")
        assert (await stack.view(inherited.id)).system_prompt == "你是一个助手"
        assert (await stack.view(overridden.id)).system_prompt == "子提示词"
        assert not (await stack.view(bare.id)).HasField("system_prompt")

    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            pytest.param({}, [], id="item72-default-none"),
            pytest.param(
                {"context": common_pb2.FORK_CONTEXT_INHERIT},
                [("user", "hello"), ("assistant", "echo: hello")],
                id="item73-inherit",
            ),
            pytest.param(
                {"context": common_pb2.FORK_CONTEXT_INHERIT, "inherit_until_seq": 1},
                [("user", "hello")],
                id="item74-choose-what-to-inherit",
            ),
            pytest.param({"prompt": "开始调研"}, [("assistant", "开始调研")], id="item76-prompt"),
            pytest.param(
                {"context": common_pb2.FORK_CONTEXT_INHERIT, "prompt": "继续"},
                [("user", "hello"), ("assistant", "echo: hello"), ("assistant", "继续")],
                id="item77-inherit-then-prompt",
            ),
        ],
    )
    async def test_starting_records(
        self, make_stack: StackMaker, fields: dict[str, object], expected: list[tuple[str, str]]
    ) -> None:
        """The child's records follow its context and opening prompt (items 72-77)."""
        stack = await make_stack(SpyProvider())
        parent = await parent_with_exchange(stack)
        child = await stack.fork(parent, "c", **fields)
        assert await contents(stack, child.id) == expected

    async def test_child_turns_use_the_gateway_provider(self, make_stack: StackMaker) -> None:
        """A child's turn is answered by the gateway's provider, sees its own identity and
        inherited history, and gets the tools of its own request (items 79, 80)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        parent = await parent_with_exchange(stack)
        child = await stack.fork(parent, "research", context=common_pb2.FORK_CONTEXT_INHERIT)
        spy.then(answer("child answer"))
        reply = await send(stack, child.id, "go on", tools=[tool_definition("child_tool")])
        assert reply.assistant.content == "child answer"
        call = spy.turns[-1]
        assert call.pairs() == [
            ("system", identity("research")),
            ("user", "hello"),
            ("assistant", "echo: hello"),
            ("user", "go on"),
        ]
        assert call.tools is not None and call.tools[-1].name == "child_tool"

    async def test_child_consolidates(self, make_stack: StackMaker) -> None:
        """A child consolidates with the gateway's provider, into its own memory (item 78)."""
        spy = SpyProvider().then_helper(answer("child memory"))
        stack = await make_stack(spy)
        parent = await parent_with_exchange(stack)
        child = await stack.fork(parent, "c", context=common_pb2.FORK_CONTEXT_INHERIT)
        reply = await stack.gw.Consolidate(
            agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=child.id)
        )
        assert reply.memory == "child memory"
        assert not (await stack.view(parent)).HasField("memory")

    async def test_archived_parent_can_fork(self, make_stack: StackMaker) -> None:
        """Forking from an archived parent succeeds and the child takes turns (item 81, §5.4)."""
        stack = await make_stack(SpyProvider())
        parent = await parent_with_exchange(stack)
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=parent)
        )
        child = await stack.fork(parent, "c")
        assert (await send(stack, child.id, "hi")).assistant.content == "echo: hi"
