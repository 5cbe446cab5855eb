"""Turns through the gateway with the Anthropic provider, against a loopback Messages server.

The provider is the real `anthropic` SDK provider; only the HTTP endpoint is a
fake (tests/support/fake_anthropic.py). The bodies the fake received show the
exact context of a turn: every system message in `system`, in the order of
STELLO-SPEC §4.5.1, then the history and the user message; memory never.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest

from agent_gateway.llm import RAW_ARGUMENTS_KEY
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from stello.agent.v1 import agent_pb2
from stello.errors import error_info_reason
from stello.formats import json_text
from tests.gateway.conftest import Stack, StackMaker, row_counts, rpc_error
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
from tests.support.fake_http import FakeToolCall, Reply
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object

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


def _deep_tool_use(streamed: bool) -> Reply:
    """An answer whose tool_use input (an object in the body, not text) nests 3000 deep."""
    block = f'{{"type":"tool_use","id":"toolu_1","name":"clock","input":{deep_json_object(3000)}}}'
    if streamed:
        start = f'{{"type":"content_block_start","index":0,"content_block":{block}}}'
        return Reply.sse([("content_block_start", start)])
    body = (
        f'{{"id":"msg_1","type":"message","role":"assistant","model":"{MODEL}",'
        f'"content":[{block}],"stop_reason":"tool_use","stop_sequence":null,'
        '"usage":{"input_tokens":1,"output_tokens":1}}'
    )
    return Reply.text(body, content_type="application/json")


class TestArgumentsNotStrictJson:
    """Tool-call arguments Python's json did not read as JSON: nested past its stack (the
    SDK's json raised RecursionError: INTERNAL), or holding NaN or an infinite number (it
    read them, and storage refuses them)."""

    @pytest.mark.parametrize("streamed", [False, True], ids=["Send", "SendStream"])
    async def test_nested_too_deep_is_an_unreadable_answer(
        self, anthropic_stack: Stack, fake: FakeAnthropic, pool: asyncpg.Pool, streamed: bool
    ) -> None:
        """A tool_use input nested 3000 deep is an answer that could not be read:
        UNAVAILABLE LLM_UNAVAILABLE, and nothing is stored."""
        stack = anthropic_stack
        root = await stack.root()
        fake.push(_deep_tool_use(streamed))
        before = await row_counts(pool, stack.space)
        clock = tool_definition("clock", "Time", type="object")
        if streamed:
            error = await rpc_error(stream_events(stack, root.id, "time?", tools=[clock]))
        else:
            error = await rpc_error(send(stack, root.id, "time?", tools=[clock]))
        assert error.code() is grpc.StatusCode.UNAVAILABLE, error.details()
        assert error_info_reason(error) == "LLM_UNAVAILABLE"
        assert await row_counts(pool, stack.space) == before
        assert await stack.records(root.id) == []

    @pytest.mark.parametrize("streamed", [False, True], ids=["Send", "SendStream"])
    @pytest.mark.parametrize("arguments", [pytest.param(t, id=t) for t in NOT_STRICT_JSON])
    async def test_nan_or_infinite_numbers_kept_raw(
        self, anthropic_stack: Stack, fake: FakeAnthropic, arguments: str, streamed: bool
    ) -> None:
        """An input holding NaN or an infinite number (an object in the body, or streamed
        text) is answered and stored as the model's text kept raw, as arguments that are
        not JSON are (agent_gateway.llm.tool_arguments)."""
        stack = anthropic_stack
        root = await stack.root()
        clock = tool_definition("clock", "Time", type="object")
        if streamed:
            fake.reply(tool_calls=[FakeToolCall("clock", arguments, id="toolu_1")])
            events = await stream_events(stack, root.id, "time?", tools=[clock])
            calls = list(events[-1].done.pending_tool_calls)
        else:
            fake.push(Reply.text(_message_with_input(arguments), content_type="application/json"))
            calls = list((await send(stack, root.id, "time?", tools=[clock])).pending_tool_calls)
        assert len(calls) == 1
        kept = json.loads(calls[0].arguments_json)
        assert list(kept) == [RAW_ARGUMENTS_KEY]
        with pytest.raises(ValueError, match=r"is not JSON|larger than a double holds"):
            json_text.loads(kept[RAW_ARGUMENTS_KEY])  # the SDK's NaN or inf, written back
        stored = await stack.records(root.id)
        assert [c.arguments_json for c in stored[-1].tool_calls] == [calls[0].arguments_json]


def _message_with_input(arguments: str) -> str:
    """A Message body whose one tool_use input is `arguments` as it stands (not re-encoded)."""
    return (
        f'{{"id":"msg_1","type":"message","role":"assistant","model":"{MODEL}",'
        f'"content":[{{"type":"tool_use","id":"toolu_1","name":"clock","input":{arguments}}}],'
        '"stop_reason":"tool_use","stop_sequence":null,'
        '"usage":{"input_tokens":1,"output_tokens":1}}'
    )
