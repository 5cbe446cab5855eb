"""The shared memory tools in turns (STELLO-SPEC §4.8 restated for gRPC; DESIGN §4.5).

The model is the real OpenAI-compatible provider against a loopback fake server
(tests/support/fake_openai.py): what the gateway offers and answers is read off
the wire, in the request bodies the fake received.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from agent_gateway.llm.network.openai_provider import OpenAIProvider
from agent_gateway.tools.base import (
    CREATE_SESSION,
    MEMORY_FORGET,
    MEMORY_RECALL,
    MEMORY_REMEMBER,
)
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from tests.gateway.conftest import Stack, StackMaker, rpc_error
from tests.gateway.turns_support import roles, send, submit, tool_definition
from tests.support.fake_openai import FakeOpenAI, FakeToolCall
from tests.support.fixtures import new_space

pytestmark = pytest.mark.sql

MEMORY_TOOLS = [MEMORY_RECALL, MEMORY_REMEMBER, MEMORY_FORGET]
OpenAIStack = Callable[..., Awaitable[Stack]]


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(name="openai_stack")
async def _openai_stack(make_stack: StackMaker, fake: FakeOpenAI) -> AsyncIterator[OpenAIStack]:
    """Make a stack whose gateway talks to the fake server (settings overrides given)."""
    providers: list[OpenAIProvider] = []

    async def make(**overrides: Any) -> Stack:
        provider = OpenAIProvider(
            model="fake", api_key="sk-test", base_url=fake.base_url, timeout_s=5.0, max_retries=0
        )
        providers.append(provider)
        return await make_stack(provider, **overrides)

    yield make
    for provider in providers:
        await provider.aclose()


def offered(body: Any) -> list[str]:
    """The tool names a request body offered."""
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def tool_turn(
    stack: Stack, fake: FakeOpenAI, session_id: str, name: str, **arguments: Any
) -> Any:
    """A turn in which the model calls one tool, then answers "done"; the tool record."""
    fake.reply(tool_calls=[FakeToolCall(name, arguments, id="call_1")])
    fake.reply("done")
    reply = await send(stack, session_id, "go", memory_tools=True)
    assert roles(reply.records) == ["user", "assistant", "tool", "assistant"]
    return reply.records[2]


def is_error(record: Any) -> bool:
    """Whether a tool record is an error result."""
    return bool(record.metadata.fields["is_error"].bool_value)


async def entry(stack: Stack, slug: str) -> Any:
    """The stored entry, through the gateway."""
    reply = await stack.gw.GetSharedMemoryEntry(
        agent_pb2.GetSharedMemoryEntryRequest(space_id=stack.space.sid, slug=slug)
    )
    return reply.entry


class TestOffered:
    async def test_off_by_default_and_on_per_request(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """Without the setting, only a request with memory_tools true offers the three tools."""
        stack = await openai_stack()
        root = await stack.root()
        for choice in (None, True, False):
            fake.reply("ok")
            fields = {} if choice is None else {"memory_tools": choice}
            await send(stack, root.id, "hi", **fields)
        bodies = fake.chat_bodies()
        assert [offered(b) for b in bodies] == [
            [CREATE_SESSION],
            [CREATE_SESSION, *MEMORY_TOOLS],
            [CREATE_SESSION],
        ]
        schema = bodies[1]["tools"][2]["function"]["parameters"]
        assert schema["required"] == ["slug", "summary", "body"]

    async def test_the_setting_offers_them_and_a_request_may_refuse(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """STELLO_GATEWAY_MEMORY_TOOLS offers them in every turn; memory_tools false does not."""
        stack = await openai_stack(memory_tools=True, builtin_tools=False)
        root = await stack.root()
        fake.reply("ok")
        fake.reply("ok")
        await send(stack, root.id, "hi")
        await send(stack, root.id, "hi", memory_tools=False)
        assert [offered(b) for b in fake.chat_bodies()] == [MEMORY_TOOLS, []]

    async def test_submit_tool_results_offers_them_too(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """A continuation with memory_tools true offers them beside the client tools."""
        stack = await openai_stack(builtin_tools=False)
        root = await stack.root()
        lookup = tool_definition("lookup")
        fake.reply(tool_calls=[FakeToolCall("lookup", {}, id="c1")])
        await send(stack, root.id, "look", tools=[lookup])
        fake.reply("ok")
        await submit(stack, root.id, ("c1", "found"), tools=[lookup], memory_tools=True)
        assert offered(fake.chat_bodies()[1]) == [*MEMORY_TOOLS, "lookup"]


class TestResults:
    async def test_remember_recall_forget(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """remember answers {slug}; recall {body}; forget {slug}, also for an unknown slug."""
        stack = await openai_stack()
        root = await stack.root()
        remembered = await tool_turn(
            stack, fake, root.id, MEMORY_REMEMBER, slug=" tides ", summary="tide times", body="6h"
        )
        assert (json.loads(remembered.content), is_error(remembered)) == ({"slug": "tides"}, False)
        stored = await entry(stack, "tides")
        assert (stored.summary, stored.body) == ("tide times", "6h")
        recalled = await tool_turn(stack, fake, root.id, MEMORY_RECALL, slug="tides")
        assert json.loads(recalled.content) == {"body": "6h"}
        forgot = await tool_turn(stack, fake, root.id, MEMORY_FORGET, slug="tides")
        assert json.loads(forgot.content) == {"slug": "tides"}
        unknown = await tool_turn(stack, fake, root.id, MEMORY_FORGET, slug="never")
        assert (json.loads(unknown.content), is_error(unknown)) == ({"slug": "never"}, False)
        error = await rpc_error(entry(stack, "tides"))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        # The model saw each result as the tool message of its next call.
        last = fake.chat_bodies()[-1]["messages"][-1]
        assert (last["role"], json.loads(last["content"])) == ("tool", {"slug": "never"})

    @pytest.mark.parametrize(
        ("name", "arguments", "message"),
        [
            pytest.param(MEMORY_RECALL, {"slug": "nothing"}, 'no entry "nothing"', id="unknown"),
            pytest.param(MEMORY_RECALL, {"slug": ""}, "slug is required", id="empty"),
            pytest.param(MEMORY_RECALL, {}, "slug is required", id="absent"),
            pytest.param(
                MEMORY_REMEMBER, {"slug": "  ", "summary": "s", "body": "b"}, "slug", id="blank"
            ),
            pytest.param(MEMORY_REMEMBER, {"slug": "a", "body": "b"}, "summary", id="no-summary"),
            pytest.param(MEMORY_REMEMBER, {"slug": "a", "summary": "s"}, "body", id="no-body"),
            pytest.param(
                MEMORY_REMEMBER,
                {"slug": "a", "summary": "two\nlines", "body": "b"},
                "summary must be one line",
                id="two-line-summary",
            ),
            pytest.param(MEMORY_FORGET, {"slug": 3}, "slug is required", id="not-text"),
        ],
    )
    async def test_errors_are_results_for_the_model(
        self,
        openai_stack: OpenAIStack,
        fake: FakeOpenAI,
        name: str,
        arguments: dict[str, Any],
        message: str,
    ) -> None:
        """A bad or unknown slug, a missing summary or body: an error result, the turn goes on."""
        stack = await openai_stack()
        root = await stack.root()
        record = await tool_turn(stack, fake, root.id, name, **arguments)
        assert is_error(record)
        assert message in record.content
        listed = await stack.gw.ListSharedMemory(
            agent_pb2.ListSharedMemoryRequest(space_id=stack.space.sid)
        )
        assert listed.total_count == 0

    async def test_a_tool_the_turn_did_not_offer_is_unknown(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """A memory tool called in a turn that did not offer it is 'Unknown tool', nothing done."""
        stack = await openai_stack()
        root = await stack.root()
        fake.reply(tool_calls=[FakeToolCall(MEMORY_REMEMBER, {"slug": "a"}, id="c1")])
        fake.reply("done")
        reply = await send(stack, root.id, "go")
        assert reply.records[2].content == f"Unknown tool: {MEMORY_REMEMBER}"
        listed = await stack.gw.ListSharedMemory(
            agent_pb2.ListSharedMemoryRequest(space_id=stack.space.sid)
        )
        assert listed.total_count == 0

    async def test_a_long_call_id_still_writes(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """A provider's 300-character call id still makes a write (its request id is hashed)."""
        stack = await openai_stack()
        root = await stack.root()
        call = FakeToolCall(
            MEMORY_REMEMBER, {"slug": "long", "summary": "s", "body": "b"}, id="c" * 300
        )
        fake.reply(tool_calls=[call])
        fake.reply("done")
        reply = await send(stack, root.id, "go", memory_tools=True)
        assert json.loads(reply.records[2].content) == {"slug": "long"}
        assert (await entry(stack, "long")).body == "b"


class TestSharing:
    async def test_writes_stay_when_the_turn_fails(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """The model's next call fails: the turn writes nothing, the remembered entry stays."""
        stack = await openai_stack()
        root = await stack.root()
        call = FakeToolCall(MEMORY_REMEMBER, {"slug": "kept", "summary": "s", "body": "b"})
        fake.reply(tool_calls=[call])
        fake.fail(500, "model down")
        error = await rpc_error(send(stack, root.id, "go", memory_tools=True))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await stack.records(root.id) == []
        assert (await entry(stack, "kept")).body == "b"

    async def test_sessions_of_a_space_share_entries_and_another_space_sees_none(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI, keys: Any
    ) -> None:
        """What one session remembers another recalls; a session of another space cannot."""
        stack = await openai_stack()
        first, second = await stack.root(label="one"), await stack.root(label="two")
        await tool_turn(stack, fake, first.id, MEMORY_REMEMBER, slug="s", summary="x", body="y")
        recalled = await tool_turn(stack, fake, second.id, MEMORY_RECALL, slug="s")
        assert json.loads(recalled.content) == {"body": "y"}
        other = await new_space(keys)
        channel = stack.gateway.channel(other.key)
        try:
            gw = agent_pb2_grpc.AgentGatewayStub(channel)
            elsewhere = await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=other.sid))
            fake.reply(tool_calls=[FakeToolCall(MEMORY_RECALL, {"slug": "s"}, id="c")])
            fake.reply("done")
            reply = await gw.Send(
                agent_pb2.SendRequest(
                    space_id=other.sid,
                    session_id=elsewhere.session.id,
                    content="go",
                    memory_tools=True,
                )
            )
            assert reply.records[2].content == 'Shared memory has no entry "s"'
        finally:
            await channel.close()
