"""Turns through the gateway with the Anthropic provider, against a loopback Messages server.

The provider is the real `anthropic` SDK provider; only the HTTP endpoint is a
fake (tests/support/fake_anthropic.py). The bodies the fake received show the
exact context of a turn: every system message in `system`, in the order of
STELLO-SPEC §4.5.1, then the history and the user message; memory never.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_gateway.llm.anthropic_provider import AnthropicProvider
from stello.agent.v1 import agent_pb2
from tests.gateway.conftest import Stack, StackMaker, rpc_error
from tests.gateway.llm.support import identity
from tests.gateway.turns_support import (
    put_insight,
    roles,
    send,
    stream_events,
    submit,
    tool_definition,
)
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_http import FakeToolCall

pytestmark = pytest.mark.sql

MODEL = "fake-claude"


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(name="anthropic_stack")
async def _anthropic_stack(make_stack: StackMaker, fake: FakeAnthropic) -> AsyncIterator[Stack]:
    async with AnthropicProvider(
        model=MODEL, api_key="sk-ant-test", base_url=fake.base_url, timeout_s=5.0, max_retries=0
    ) as provider:
        yield await make_stack(provider)


def _texts(message: dict[str, object]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))


class TestAnthropicTurns:
    """Plain, streamed and tool turns over the Messages protocol."""

    async def test_exact_context(self, anthropic_stack: Stack, fake: FakeAnthropic) -> None:
        """The second turn sends prompt, identity and insight as `system`, then history and user."""
        stack = anthropic_stack
        root = await stack.root(label="Research", system_prompt="You are Stello.")
        fake.reply("first answer")
        await send(stack, root.id, "first question")
        await put_insight(stack, root.id, "The user prefers short answers.")
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=root.id, content="never sent"
            )
        )
        fake.reply("second answer")
        reply = await send(stack, root.id, "second question")
        body = fake.message_bodies()[1]
        assert isinstance(body, dict)
        assert body["model"] == MODEL
        system = body["system"]
        system_text = (
            system if isinstance(system, str) else "\n\n".join(block["text"] for block in system)
        )
        assert system_text == "\n\n".join(
            ["You are Stello.", identity("Research"), "The user prefers short answers."]
        )
        messages = body["messages"]
        assert [(m["role"], _texts(m)) for m in messages] == [
            ("user", "first question"),
            ("assistant", "first answer"),
            ("user", "second question"),
        ]
        assert "never sent" not in str(body)
        assert reply.assistant.content == "second answer"

    async def test_streamed(self, anthropic_stack: Stack, fake: FakeAnthropic) -> None:
        """SendStream relays the server's text deltas, then done with the stored turn."""
        stack = anthropic_stack
        root = await stack.root()
        fake.reply("streamed over the wire", chunks=3)
        events = await stream_events(stack, root.id, "hi")
        deltas = [e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta"]
        assert "".join(deltas) == "streamed over the wire"
        done = events[-1].done
        assert done.assistant.content == "streamed over the wire"
        assert list(done.records) == await stack.records(root.id)
        assert fake.message_bodies()[0]["stream"] is True

    async def test_tool_round_trip(self, anthropic_stack: Stack, fake: FakeAnthropic) -> None:
        """A tool_use, its result through SubmitToolResults as a tool_result, then the answer."""
        stack = anthropic_stack
        root = await stack.root()
        fake.reply(tool_calls=[FakeToolCall("search", {"q": "tides"}, id="toolu_1")])
        search = tool_definition(
            "search", "Search", type="object", properties={"q": {"type": "string"}}
        )
        first = await send(stack, root.id, "look it up", tools=[search])
        assert [(c.id, c.name) for c in first.pending_tool_calls] == [("toolu_1", "search")]
        fake.reply("high tide at noon")
        final = await submit(stack, root.id, ("toolu_1", "noon"), tools=[search])
        assert final.assistant.content == "high tide at noon"
        body = fake.message_bodies()[1]
        assert isinstance(body, dict)
        assistant, result = body["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert [b["type"] for b in assistant["content"]] == ["tool_use"]
        assert assistant["content"][0]["id"] == "toolu_1"
        assert assistant["content"][0]["input"] == {"q": "tides"}
        assert result["role"] == "user"
        assert result["content"][0]["type"] == "tool_result"
        assert result["content"][0]["tool_use_id"] == "toolu_1"
        assert roles(await stack.records(root.id)) == ["user", "assistant", "tool", "assistant"]

    async def test_calls_sharing_an_id_answered_apart(
        self, anthropic_stack: Stack, fake: FakeAnthropic
    ) -> None:
        """Two tool_use blocks with one id become two pending calls with distinct ids, each
        answered by its own result; the next request pairs each tool_use with its result."""
        stack = anthropic_stack
        root = await stack.root()
        fake.reply(
            tool_calls=[
                FakeToolCall("clock", {"tz": "UTC"}, id="toolu_same"),
                FakeToolCall("clock", {"tz": "CET"}, id="toolu_same"),
            ]
        )
        clock = tool_definition("clock", "Time", type="object")
        events = await stream_events(stack, root.id, "what time is it?", tools=[clock])
        pending = events[-1].done.pending_tool_calls
        assert [(c.id, c.arguments_json) for c in pending] == [
            ("toolu_same", '{"tz":"UTC"}'),
            ("toolu_same_2", '{"tz":"CET"}'),
        ]
        fake.reply("12:00 UTC, 13:00 CET")
        results = (("toolu_same", "12:00"), ("toolu_same_2", "13:00"))
        final = await submit(stack, root.id, *results, tools=[clock])
        assert final.assistant.content == "12:00 UTC, 13:00 CET"
        assistant, answered = fake.message_bodies()[1]["messages"][-2:]
        assert [b["id"] for b in assistant["content"]] == ["toolu_same", "toolu_same_2"]
        assert [(b["tool_use_id"], b["content"]) for b in answered["content"]] == list(results)

    async def test_rate_limited(self, anthropic_stack: Stack, fake: FakeAnthropic) -> None:
        """A 429 from the endpoint is RESOURCE_EXHAUSTED and stores nothing."""
        stack = anthropic_stack
        root = await stack.root()
        fake.fail(429, "slow down")
        error = await rpc_error(send(stack, root.id, "hi"))
        assert error.code().name == "RESOURCE_EXHAUSTED"
        assert await stack.records(root.id) == []
