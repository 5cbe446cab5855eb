"""Turns through the gateway with the OpenAI-compatible provider, against a loopback fake server.

The provider is the real `openai` SDK provider; only the HTTP endpoint is a
fake (tests/support/fake_openai.py). The bodies the fake received show the
exact context of a turn (STELLO-SPEC §4.5.1 order; memory never).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agent_gateway.llm import RAW_ARGUMENTS_KEY
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from agent_gateway.tools.base import CREATE_SESSION
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
from tests.support.fake_openai import FakeOpenAI, FakeToolCall
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object

pytestmark = pytest.mark.sql

MODEL = "fake-chat"


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(name="openai_stack")
async def _openai_stack(make_stack: StackMaker, fake: FakeOpenAI) -> AsyncIterator[Stack]:
    async with OpenAIProvider(
        model=MODEL, api_key="sk-test", base_url=fake.base_url, timeout_s=5.0, max_retries=0
    ) as provider:
        yield await make_stack(provider)


class TestOpenAITurns:
    """Plain, streamed and tool turns over the chat completions protocol."""

    async def test_exact_context(self, openai_stack: Stack, fake: FakeOpenAI) -> None:
        """The second turn sends prompt, identity, insight, history, user — and no memory."""
        stack = openai_stack
        root = await stack.root(label="Research", system_prompt="You are Stello.")
        fake.reply("first answer")
        await send(stack, root.id, "first question")
        await put_insight(stack, root.id, "The user prefers short answers.")
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=root.id, content="never sent"
            )
        )
        fake.reply("second answer", prompt_tokens=40, completion_tokens=2)
        reply = await send(stack, root.id, "second question")
        body = fake.chat_bodies()[1]
        assert body["model"] == MODEL
        assert body["messages"] == [
            {"role": "system", "content": "You are Stello."},
            {"role": "system", "content": identity("Research")},
            {"role": "system", "content": "The user prefers short answers."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second question"},
        ]
        assert [t["function"]["name"] for t in body["tools"]] == [CREATE_SESSION]
        assert "stream" not in body
        assert reply.assistant.content == "second answer"
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (40, 2)

    async def test_streamed(self, openai_stack: Stack, fake: FakeOpenAI) -> None:
        """SendStream relays the server's deltas, then done with the stored turn."""
        stack = openai_stack
        root = await stack.root()
        fake.reply("streamed over the wire", chunks=3)
        events = await stream_events(stack, root.id, "hi")
        deltas = [e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta"]
        assert "".join(deltas) == "streamed over the wire" and len(deltas) == 3
        done = events[-1].done
        assert done.assistant.content == "streamed over the wire"
        assert list(done.records) == await stack.records(root.id)
        body = fake.chat_bodies()[0]
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}

    async def test_calls_sharing_an_id_answered_apart(
        self, openai_stack: Stack, fake: FakeOpenAI
    ) -> None:
        """Two calls the server gave one id become two pending calls with distinct ids, each
        answered by its own result; the next request pairs each call with its result."""
        stack = openai_stack
        root = await stack.root()
        fake.reply(
            tool_calls=[
                FakeToolCall("clock", {"tz": "UTC"}, id="same"),
                FakeToolCall("clock", {"tz": "CET"}, id="same"),
            ]
        )
        clock = tool_definition("clock", "Time", type="object")
        first = await send(stack, root.id, "what time is it?", tools=[clock])
        assert [(c.id, c.arguments_json) for c in first.pending_tool_calls] == [
            ("same", '{"tz":"UTC"}'),
            ("same_2", '{"tz":"CET"}'),
        ]
        fake.reply("12:00 UTC, 13:00 CET")
        final = await submit(stack, root.id, ("same", "12:00"), ("same_2", "13:00"), tools=[clock])
        assert final.assistant.content == "12:00 UTC, 13:00 CET"
        messages = fake.chat_bodies()[1]["messages"]
        assert [c["id"] for c in messages[-3]["tool_calls"]] == ["same", "same_2"]
        assert messages[-2:] == [
            {"role": "tool", "tool_call_id": "same", "content": "12:00"},
            {"role": "tool", "tool_call_id": "same_2", "content": "13:00"},
        ]

    async def test_tool_round_trip(self, openai_stack: Stack, fake: FakeOpenAI) -> None:
        """A client tool call, its result through SubmitToolResults, then the final answer."""
        stack = openai_stack
        root = await stack.root()
        fake.reply(tool_calls=[FakeToolCall("search", {"q": "tides"}, id="call_1")])
        search = tool_definition(
            "search", "Search", type="object", properties={"q": {"type": "string"}}
        )
        first = await send(stack, root.id, "look it up", tools=[search])
        assert [(c.id, c.name, c.arguments_json) for c in first.pending_tool_calls] == [
            ("call_1", "search", '{"q":"tides"}')
        ]
        fake.reply("high tide at noon")
        final = await submit(stack, root.id, ("call_1", "noon"), tools=[search])
        assert final.assistant.content == "high tide at noon"
        messages = fake.chat_bodies()[1]["messages"]
        assert messages[-2:] == [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q":"tides"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "noon"},
        ]
        assert [t["function"]["name"] for t in fake.chat_bodies()[1]["tools"]] == [
            CREATE_SESSION,
            "search",
        ]
        assert roles(await stack.records(root.id)) == ["user", "assistant", "tool", "assistant"]

    async def test_builtin_round_trip(self, openai_stack: Stack, fake: FakeOpenAI) -> None:
        """The model's stello_create_session call runs in the gateway; its result goes back."""
        stack = openai_stack
        root = await stack.root()
        fake.reply(tool_calls=[FakeToolCall(CREATE_SESSION, {"label": "kid"}, id="call_b")])
        fake.reply("made it")
        reply = await send(stack, root.id, "make a child")
        assert reply.assistant.content == "made it"
        tool_message = fake.chat_bodies()[1]["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_b"
        assert '"label":"kid"' in tool_message["content"]
        assert len((await stack.view(root.id)).node.children) == 1

    async def test_server_error(self, openai_stack: Stack, fake: FakeOpenAI) -> None:
        """A 5xx from the endpoint is UNAVAILABLE and stores nothing."""
        stack = openai_stack
        root = await stack.root()
        fake.fail(503, "overloaded")
        error = await rpc_error(send(stack, root.id, "hi"))
        assert error.code().name == "UNAVAILABLE"
        assert await stack.records(root.id) == []


class TestArgumentsNotStrictJson:
    """Tool-call arguments Python's json did not read as JSON: nested past its stack (it
    raised RecursionError: INTERNAL), or holding NaN or an infinite number (it read them,
    and storage refuses them)."""

    @pytest.mark.parametrize("streamed", [False, True], ids=["Send", "SendStream"])
    @pytest.mark.parametrize(
        "arguments",
        [
            pytest.param(deep_json_object(3000), id="nested-3000-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_kept_raw_as_malformed_arguments_are(
        self, openai_stack: Stack, fake: FakeOpenAI, arguments: str, streamed: bool
    ) -> None:
        """The call is answered and stored with the model's text kept raw, as arguments
        that are not JSON are (agent_gateway.llm.tool_arguments)."""
        stack = openai_stack
        root = await stack.root()
        fake.reply(tool_calls=[FakeToolCall("clock", arguments, id="call_1")])
        clock = tool_definition("clock", "Time", type="object")
        if streamed:
            events = await stream_events(stack, root.id, "time?", tools=[clock])
            calls = list(events[-1].done.pending_tool_calls)
        else:
            calls = list((await send(stack, root.id, "time?", tools=[clock])).pending_tool_calls)
        raw = json.dumps({RAW_ARGUMENTS_KEY: arguments}, separators=(",", ":"))
        assert [(c.id, c.arguments_json) for c in calls] == [("call_1", raw)]
        stored = await stack.records(root.id)
        assert [c.arguments_json for c in stored[-1].tool_calls] == [raw]
