"""Send and SendStream: the turn, its context and its records (STELLO-SPEC §6.2 items 25-53).

Restated for gRPC with DESIGN §5's overrides: an abort is the client
cancelling the call; tool results arrive through SubmitToolResults (§5.6);
memory is never in the context (§5.5). Where an item is about in-process
internals, the test restates what the item protects and says so.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

import asyncpg
import grpc
import pytest

from agent_gateway.app import create_app
from agent_gateway.clients import Caller
from agent_gateway.llm import EchoProvider, LLMMessage, build_provider
from agent_gateway.llm.lazy import LazyProvider
from agent_gateway.tools.base import CREATE_SESSION
from agent_gateway.turns.queue import TurnLine
from agent_gateway.turns.state import Plan
from stello.agent.v1 import agent_pb2
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.serving.server import ServiceApp
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import (
    Backends,
    Stack,
    StackMaker,
    record,
    row_counts,
    rpc_error,
)
from tests.gateway.llm.support import identity
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    calls_ended,
    put_insight,
    roles,
    send,
    send_stream,
    send_when_free,
    stream_events,
    tool_call,
    tool_definition,
)
from tests.support.fixtures import ServerStarter
from tests.support.hostile import NOT_STRICT_JSON

pytestmark = pytest.mark.sql
LAZY_LOGGER = "agent_gateway.llm.lazy"


class TestTurnResult:
    """What a turn answers and stores."""

    async def test_content_and_usage(self, make_stack: StackMaker) -> None:
        """The model's content and usage are answered as they came (item 25)."""
        spy = SpyProvider().then(answer("你好！", prompt=10, completion=5))
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "hello")
        assert reply.assistant.content == "你好！"
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (10, 5)
        assert reply.usage.total_tokens == 15
        assert not reply.pending_tool_calls

    async def test_two_records_user_then_assistant(self, make_stack: StackMaker) -> None:
        """A turn stores user 'hello' then the assistant's text, as answered (item 26)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        reply = await send(stack, root.id, "hello")
        stored = await stack.records(root.id)
        assert [(r.role, r.content) for r in stored] == [
            (common_pb2.RECORD_ROLE_USER, "hello"),
            (common_pb2.RECORD_ROLE_ASSISTANT, "echo: hello"),
        ]
        assert list(reply.records) == stored
        assert reply.assistant == stored[1]

    async def test_turn_count_and_last_active(self, make_stack: StackMaker) -> None:
        """Each committed user turn adds one to turn_count and moves last_active_at (§5.7)."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        before = await stack.view(root.id)
        await send(stack, root.id, "one")
        await send(stack, root.id, "two")
        after = await stack.view(root.id)
        assert (before.turn_count, after.turn_count) == (0, 2)
        assert after.last_active_at.ToDatetime() > before.last_active_at.ToDatetime()

    async def test_provider_is_deployment_config(self, make_stack: StackMaker) -> None:
        """Two gateways with different providers each answer with their own (item 35).

        Item 35 hot-swaps an in-process adapter; here the provider belongs to
        the gateway's configuration, so what it protects is that the provider
        that serves a turn is the serving gateway's, not state of the session.
        """
        first = await make_stack(SpyProvider().then(answer("from first")))
        second = await make_stack(SpyProvider().then(answer("from second")))
        root = await first.root()
        assert (await send(first, root.id, "a")).assistant.content == "from first"
        assert (await send(second, root.id, "b")).assistant.content == "from second"

    async def test_no_provider_configured(
        self,
        make_stack: StackMaker,
        settings: StelloSettings,
        pool: asyncpg.Pool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A provider that cannot be built fails the turn clearly and writes nothing (item 33).

        The spec's "no LLM adapter" is, for a gateway, a configured provider
        that lacks its key: FAILED_PRECONDITION, LLM_API_KEY_MISSING and a plain
        sentence naming no provider or setting (agent.proto); the variable to set
        is in the log under the error id the message ends with.
        """
        broken = settings.model_copy(update={"llm_provider": "openai", "openai_api_key": None})
        stack = await make_stack(LazyProvider(lambda: build_provider(broken)))
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        error = await rpc_error(send(stack, root.id, "hello"))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "LLM_API_KEY_MISSING"
        details = error.details() or ""
        found = re.fullmatch(
            r"the gateway has no API key for its LLM provider: its operator must configure "
            r"one \(error id ([0-9a-f]{16})\)",
            details,
        )
        assert found is not None, details
        logged = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
        assert logged == [
            f"LLM provider error (id {found.group(1)}): STELLO_OPENAI_API_KEY is not set: the "
            "openai provider needs an API key (or set STELLO_OPENAI_BASE_URL to a compatible "
            "server that needs none)"
        ]
        assert await row_counts(pool, stack.space) == before
        await send_after_lease_released(stack, root.id)


class TestMissingKeyAtStart:
    async def test_gateway_warns_once_naming_the_variable(
        self,
        start_server: ServerStarter,
        backends: Backends,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A gateway whose provider has no API key starts (it serves everything without the
        model) and says at once, in one log line, which variable is missing."""

        def keyless(settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore) -> ServiceApp:
            update = {"llm_provider": "anthropic", "anthropic_api_key": None}
            return create_app(
                settings.model_copy(update=update), pool, keys, backends.gateway_config()
            )

        with caplog.at_level(logging.WARNING, logger=LAZY_LOGGER):
            await start_server(keyless)
        assert [r.getMessage() for r in caplog.records if r.name == LAZY_LOGGER] == [
            "the LLM provider cannot answer any turn: STELLO_ANTHROPIC_API_KEY is not set: "
            "the anthropic provider needs an API key"
        ]


async def send_after_lease_released(stack: Stack, session_id: str) -> None:
    """A failed turn released its lease: the next Send is not TURN_IN_PROGRESS."""
    error = await rpc_error(send(stack, session_id, "again"))
    assert error_info_reason(error) != "TURN_IN_PROGRESS"


class TestContextOrder:
    """The context of spec §4.5.1: prompt, identity, insight, history, user; never memory."""

    async def test_prompt_identity_insight(self, make_stack: StackMaker) -> None:
        """With a prompt and an insight: [0] prompt, [1] identity, [2] insight (item 27)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(system_prompt="你是助手")
        await put_insight(stack, root.id, "an insight")
        await send(stack, root.id, "问题1")
        assert spy.turns[0].pairs() == [
            ("system", "你是助手"),
            ("system", identity("Root")),
            ("system", "an insight"),
            ("user", "问题1"),
        ]

    async def test_insight_consumed_history_included(self, make_stack: StackMaker) -> None:
        """The second turn has no insight and includes the first turn (item 28)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(system_prompt="你是助手")
        await put_insight(stack, root.id, "an insight")
        await send(stack, root.id, "问题1")
        await send(stack, root.id, "问题2")
        assert spy.turns[1].pairs() == [
            ("system", "你是助手"),
            ("system", identity("Root")),
            ("user", "问题1"),
            ("assistant", "echo: 问题1"),
            ("user", "问题2"),
        ]
        assert (await stack.view(root.id)).HasField("insight") is False

    async def test_identity_text_exact(self, make_stack: StackMaker) -> None:
        """Under zh the identity is exactly the spec's text, after the prompt (item 39)."""
        spy = SpyProvider()
        stack = await make_stack(spy, prompts="zh")
        root = await stack.root(label="战略规划", system_prompt="你是助手")
        await send(stack, root.id, "hi")
        assert spy.turns[0].messages[1] == LLMMessage(
            "system", "<session_identity>\n你当前在「战略规划」子会话中。\n</session_identity>"
        )

    async def test_identity_first_without_prompt(self, make_stack: StackMaker) -> None:
        """Without a system prompt the identity is [0] (item 40)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(label="调研分支")
        await send(stack, root.id, "hi")
        assert spy.turns[0].messages[0].content == identity("调研分支")

    async def test_order_with_label_prompt_insight(self, make_stack: StackMaker) -> None:
        """Prompt, identity naming the label, insight — in that order (item 41)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(label="文书", system_prompt="你是顾问")
        await put_insight(stack, root.id, "note")
        await send(stack, root.id, "hi")
        first, named, note = spy.turns[0].messages[:3]
        assert first.content == "你是顾问"
        assert "文书" in named.content and "<session_identity>" in named.content
        assert note.content == "note"

    async def test_empty_label_no_identity(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A session whose label is empty gets no identity message (item 42).

        The API refuses empty labels; the row is set by SQL to stand for data
        that predates that rule.
        """
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await pool.execute(
            "UPDATE sessions SET label = '' WHERE space_id = $1 AND id = $2::uuid",
            stack.space.id,
            root.id,
        )
        await send(stack, root.id, "hi")
        assert not any("<session_identity>" in m.content for m in spy.turns[0].messages)

    async def test_no_shared_memory_index(self, make_stack: StackMaker) -> None:
        """No message ever carries a shared memory index (items 43-44; DESIGN §5.13: not in v1)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(system_prompt="p")
        await send(stack, root.id, "hi")
        assert not any("<shared_memory_index>" in m.content for m in spy.turns[0].messages)

    async def test_memory_never_in_context(self, make_stack: StackMaker) -> None:
        """Memory is never put into the context, on a send or a continuation (DESIGN §5.5)."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=stack.space.sid, session_id=root.id, content="secret memory"
            )
        )
        await send(stack, root.id, "hi", tools=[tool_definition("lookup")])
        await stack.gw.SubmitToolResults(
            agent_pb2.SubmitToolResultsRequest(
                space_id=stack.space.sid,
                session_id=root.id,
                results=[agent_pb2.ToolResult(tool_call_id="c1", content="found")],
            )
        )
        assert len(spy.turns) == 2
        for call in spy.turns:
            assert not any("secret memory" in m.content for m in call.messages)


class TestToolsOffered:
    """What the model is offered (items 32, 37, 38)."""

    async def test_builtin_offered(self, make_stack: StackMaker) -> None:
        """The model is offered stello_create_session (item 32)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hi")
        assert spy.turns[0].tools is not None
        assert CREATE_SESSION in [tool.name for tool in spy.turns[0].tools]

    async def test_request_tools_exactly(self, make_stack: StackMaker) -> None:
        """The built-in tool, then exactly the request's tools as declared (item 37; §6.6 42)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        declared = tool_definition(
            "search", "Search the web", type="object", properties={"q": {"type": "string"}}
        )
        await send(stack, root.id, "hi", tools=[declared])
        tools = spy.turns[0].tools
        assert tools is not None
        assert [t.name for t in tools] == [CREATE_SESSION, "search"]
        assert tools[1].description == "Search the web"
        assert tools[1].parameters == {"type": "object", "properties": {"q": {"type": "string"}}}

    async def test_no_tools_at_all(self, make_stack: StackMaker) -> None:
        """Without built-ins and client tools the model gets no tools (item 38)."""
        spy = SpyProvider()
        stack = await make_stack(spy, builtin_tools=False)
        root = await stack.root()
        await send(stack, root.id, "hi")
        assert spy.turns[0].tools is None


class TestStream:
    """SendStream (items 36, 48-50; §6.6 items 2-3)."""

    async def test_deltas_then_done(self, make_stack: StackMaker) -> None:
        """Deltas come as produced, then done with the whole text; two records stored (item 36)."""
        spy = SpyProvider(stream_chunks=2).then(answer("你好，世界"))
        stack = await make_stack(spy)
        root = await stack.root()
        events = await stream_events(stack, root.id, "hello")
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds == ["text_delta", "text_delta", "done"]
        assert [e.text_delta.text for e in events[:-1]] == ["你好，", "世界"]
        done = events[-1].done
        assert done.assistant.content == "你好，世界"
        stored = await stack.records(root.id)
        assert [r.content for r in stored] == ["hello", "你好，世界"]
        assert list(done.records) == stored
        assert spy.turns[0].streamed

    async def test_tool_call_events(self, make_stack: StackMaker) -> None:
        """A client tool call streams as a tool_call event, then done with it pending."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1", q="x")))
        stack = await make_stack(spy)
        root = await stack.root()
        events = await stream_events(stack, root.id, "go", tools=[tool_definition("lookup")])
        assert [e.WhichOneof("event") for e in events] == ["tool_call", "done"]
        assert events[0].tool_call.name == "lookup"
        assert events[0].tool_call.arguments_json == '{"q":"x"}'
        assert [c.id for c in events[1].done.pending_tool_calls] == ["c1"]

    async def test_cancel_after_first_delta_writes_nothing(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Cancelling after the first delta stores nothing and stops the model (items 48, 50)."""
        spy = SpyProvider(delay_s=0.2)
        stack = await make_stack(spy)
        root = await stack.root()
        await put_insight(stack, root.id, "keep me")
        before = await row_counts(pool, stack.space)
        call = send_stream(stack, root.id, "a long enough message")
        first = await call.read()
        assert first.WhichOneof("event") == "text_delta"
        call.cancel()
        await calls_ended(stack)
        assert spy.cancelled == 1
        assert await row_counts(pool, stack.space) == before
        assert await stack.records(root.id) == []
        assert (await stack.view(root.id)).insight == "keep me"
        spy.delay_s = 0
        assert (await send(stack, root.id, "next")).assistant.content == "echo: next"

    async def test_refusals_end_stream_before_events(self, make_stack: StackMaker) -> None:
        """An archived session ends the stream with its status and no event."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        call = send_stream(stack, root.id, "hi")
        error = await rpc_error(call.read())
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"


class TestCancellation:
    """A cancelled or expired call writes nothing (items 45-47, 49)."""

    async def test_cancel_during_llm(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """Cancelling while the model answers stores nothing and cancels the model call (45, 47)."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        call = stack.gw.Send(
            agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="hi")
        )
        await spy.started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await calls_ended(stack)
        assert spy.cancelled == 1
        assert await row_counts(pool, stack.space) == before
        spy.gate = None
        assert (await send(stack, root.id, "next")).records[0].seq == 1

    async def test_a_deadline_that_passes_during_begin_calls_no_model(
        self, make_stack: StackMaker, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """BeginTurn is not bound by the caller's deadline: when it passes while the turn
        begins (here a gateway too busy to run its loop meanwhile, as under load: ci1 of
        stop 48), the model is still not called and nothing is written."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        begin = TurnLine.begin

        async def slow_begin(
            line: TurnLine, caller: Caller, plan: Plan, request: storage_pb2.BeginTurnRequest
        ) -> storage_pb2.BeginTurnResponse:
            reply = await begin(line, caller, plan, request)
            time.sleep(0.5)  # noqa: ASYNC251 (the loop stalls past the deadline, as under load)
            return reply

        monkeypatch.setattr(TurnLine, "begin", slow_begin)
        request = agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="x")
        error = await rpc_error(stack.gw.Send(request, timeout=0.3))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        monkeypatch.undo()
        reply = await send_when_free(stack, root.id, "next")  # once the lease is given back
        assert [c.messages[-1].content for c in spy.calls] == ["next"]
        assert [r.content for r in reply.records] == ["next", "echo: next"]
        assert reply.records[0].seq == 1

    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_expired_deadline_no_llm_call(
        self, make_stack: StackMaker, pool: asyncpg.Pool, streamed: bool
    ) -> None:
        """A call whose deadline has passed never reaches the model and writes nothing (46, 49).

        The spec's "already aborted signal" has no gRPC form; its closest is a
        call that is already out of time when it arrives.
        """
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        request = agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="x")
        if streamed:
            stream = stack.gw.SendStream(
                agent_pb2.SendStreamRequest.FromString(request.SerializeToString()),
                metadata=stack.space.metadata,
                timeout=0.000001,
            )
            error = await rpc_error(stream.read())
        else:
            error = await rpc_error(stack.gw.Send(request, timeout=0.000001))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        # Every storage read of the expired call is bound by its deadline, so it
        # cannot get as far as the model, even while the server still runs it.
        assert spy.calls == []
        assert await row_counts(pool, stack.space) == before
        reply = await send_when_free(stack, root.id, "next")
        assert reply.assistant.content == "echo: next"
        assert len(spy.calls) == 1


class TestSanitisation:
    """Incomplete tool-call groups never reach the model (items 51-53, spec §4.5.4)."""

    async def test_trailing_orphan_dropped(self, make_stack: StackMaker) -> None:
        """An unanswered trailing tool call is dropped; the follow-up is last (item 51)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(
            root.id,
            record("user", "q"),
            record(
                "assistant",
                "",
                tool_calls=[common_pb2.ToolCall(id="tc-tail", name="s", arguments_json="{}")],
            ),
        )
        await send(stack, root.id, "follow-up")
        messages = spy.turns[0].messages
        assert not any(any(c.id == "tc-tail" for c in m.tool_calls) for m in messages)
        assert messages[-1] == LLMMessage("user", "follow-up")

    async def test_mid_history_orphan_dropped(self, make_stack: StackMaker) -> None:
        """A mid-history orphan group goes; clean messages stay (item 52)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        orphan = common_pb2.ToolCall(id="tc-orphan", name="s", arguments_json="{}")
        await stack.append(
            root.id,
            record("user", "q1"),
            record("assistant", "", tool_calls=[orphan]),
            record("user", "q2"),
            record("assistant", "clean response"),
        )
        await send(stack, root.id, "next")
        contents = [m.content for m in spy.turns[0].messages]
        assert "clean response" in contents
        assert not any(m.tool_calls for m in spy.turns[0].messages)

    async def test_complete_group_kept(self, make_stack: StackMaker) -> None:
        """A complete group keeps its assistant call and tool message (item 53)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        call = common_pb2.ToolCall(id="tc-ok", name="s", arguments_json='{"q":1}')
        await stack.append(
            root.id,
            record("user", "q"),
            record("assistant", "", tool_calls=[call]),
            record("tool", "result", tool_call_id="tc-ok"),
            record("assistant", "done"),
        )
        await send(stack, root.id, "next")
        messages = spy.turns[0].messages
        assert any(c.id == "tc-ok" for m in messages for c in m.tool_calls)
        assert LLMMessage("tool", "result", tool_call_id="tc-ok") in messages

    async def test_send_while_calls_pending(self, make_stack: StackMaker) -> None:
        """A Send while client calls are pending drops that unanswered group (DESIGN §4.2)."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "first", tools=[tool_definition("lookup")])
        await send(stack, root.id, "second")
        assert [m.role for m in spy.turns[1].messages[1:]] == ["user", "user"]
        assert roles(await stack.records(root.id)) == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]


class TestEchoToolCommands:
    """The echo model's `/tool NAME {json}` with JSON Python's json did not read as JSON."""

    @pytest.mark.parametrize("streamed", [False, True], ids=["Send", "SendStream"])
    @pytest.mark.parametrize(
        "arguments",
        [
            pytest.param('{"x":' + "[" * 999 + "]" * 999 + "}", id="nested-999-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_not_a_command_as_malformed_json_is_not(
        self, make_stack: StackMaker, arguments: str, streamed: bool
    ) -> None:
        """JSON nested past what Python's json reads (it raised RecursionError: INTERNAL)
        or holding NaN or an infinite number makes the text no command, as malformed JSON
        does: the echo answers it as text and calls no tool."""
        stack = await make_stack(EchoProvider())
        root = await stack.root()
        command = f"/tool t {arguments}"
        if streamed:
            done = (await stream_events(stack, root.id, command))[-1].done
            assistant, pending = done.assistant, done.pending_tool_calls
        else:
            reply = await send(stack, root.id, command)
            assistant, pending = reply.assistant, reply.pending_tool_calls
        assert assistant.content.startswith("echo: /tool t ")
        assert (list(assistant.tool_calls), list(pending)) == ([], [])
        assert [r.content for r in await stack.records(root.id)] == [command, assistant.content]
