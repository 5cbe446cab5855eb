"""The `openai` provider against a real loopback server speaking chat completions (DESIGN §6)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Literal

import pytest

from agent_gateway.llm import (
    RAW_ARGUMENTS_KEY,
    Completion,
    Done,
    LLMMessage,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    Usage,
    collect,
)
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
    StelloError,
    Unavailable,
)
from tests.gateway.llm.network.support import (
    KEY,
    MODEL,
    MODES,
    SEARCH,
    Mode,
    call,
    logged,
    turn_context,
)
from tests.gateway.llm.support import identity
from tests.support.fake_openai import FakeOpenAI, FakeToolCall, Reply, chunk
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object

HI = [LLMMessage("user", "hi")]


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(name="provider")
async def _provider(fake: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(
        model=MODEL, api_key=KEY, base_url=fake.base_url, timeout_s=5.0, max_retries=1
    ) as provider:
        yield provider


class TestOpenAIProviderTurns:
    async def test_complete_plain(self, fake: FakeOpenAI, provider: OpenAIProvider) -> None:
        """A plain turn sends exactly the model and messages and returns text and usage."""
        fake.reply("hello there", prompt_tokens=12, completion_tokens=3)
        completion = await provider.complete(HI)
        assert completion.content == "hello there"
        assert completion.tool_calls == ()
        assert completion.usage == Usage(12, 3, 15)
        assert fake.chat_bodies() == [
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        ]
        request = fake.requests[0]
        assert (request.method, request.path) == ("POST", "/v1/chat/completions")
        assert request.headers["authorization"] == f"Bearer {KEY}"

    async def test_stream_plain(self, fake: FakeOpenAI, provider: OpenAIProvider) -> None:
        """A streamed turn yields the text in deltas, then one Done with the usage chunk's usage."""
        fake.reply("hello there", prompt_tokens=7, completion_tokens=2, chunks=3)
        events = [event async for event in provider.stream(HI)]
        assert events[:-1] == [TextDelta("hell"), TextDelta("o th"), TextDelta("ere")]
        assert events[-1] == Done(
            Completion("hello there", usage=Usage(7, 2, 9), finish_reason="stop")
        )
        assert fake.chat_bodies() == [
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ]

    async def test_stream_skips_events_without_data(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """Events with no data (a ``retry:`` or ``id:`` alone, an empty ``data:`` keep-alive),
        which the SSE standard does not dispatch, are skipped; the turn failed UNAVAILABLE,
        the SDK having handed them on as events whose data is not JSON."""
        fake.reply_after_empty_events("hello there")
        completion = await collect(provider.stream(HI))
        assert completion.content == "hello there"

    async def test_stream_without_usage(self, fake: FakeOpenAI, provider: OpenAIProvider) -> None:
        """A server that sends no usage chunk gives zero usage rather than failing."""
        fake.push(
            Reply.sse([(None, chunk({"content": "ok"})), (None, chunk({}, finish_reason="stop"))])
        )
        completion = await collect(provider.stream(HI))
        assert completion == Completion("ok", usage=Usage(), finish_reason="stop")

    @pytest.mark.parametrize("mode", MODES)
    async def test_refusal_is_text(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """A refusal (content null, refusal set) comes back as the answer's text."""
        if mode == "complete":
            message = {"role": "assistant", "content": None, "refusal": "I can't help."}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            fake.push(
                Reply.json(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 1,
                        "model": MODEL,
                        "choices": [choice],
                    }
                )
            )
        else:
            refusal = chunk({"refusal": "I can't help."}, finish_reason="stop")
            fake.push(Reply.sse([(None, refusal), (None, "[DONE]")]))
        assert (await call(provider, mode, HI)).content == "I can't help."

    async def test_stream_assembles_tool_calls_by_index(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """Tool-call deltas are assembled per index and emitted after the text, before Done."""
        fake.reply(
            "Let me look.",
            tool_calls=[
                FakeToolCall("search", {"q": "tea", "limit": 3}, id="call_1"),
                FakeToolCall("fetch", {"url": "http://x"}, id="call_2"),
            ],
        )
        events = [event async for event in provider.stream(HI, tools=[SEARCH])]
        calls = (
            ToolCallSpec("call_1", "search", {"q": "tea", "limit": 3}),
            ToolCallSpec("call_2", "fetch", {"url": "http://x"}),
        )
        assert [e for e in events if isinstance(e, ToolCallEvent)] == [
            ToolCallEvent(c) for c in calls
        ]
        assert isinstance(events[-1], Done)
        assert events[-1].completion.content == "Let me look."
        assert events[-1].completion.tool_calls == calls
        assert sum(isinstance(e, Done) for e in events) == 1

    async def test_stream_interleaved_deltas_and_fallbacks(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """Interleaved deltas land on their index; a call with no id or name gets the fallbacks."""
        deltas = [
            {"index": 1, "function": {"arguments": "{}"}},
            {"index": 0, "id": "c0", "function": {"name": "a"}},
            {"index": 0, "function": {"arguments": '{"n"'}},
            {"index": 0, "function": {"arguments": ":1}"}},
        ]
        fake.push(
            Reply.sse(
                [
                    *((None, chunk({"tool_calls": [delta]})) for delta in deltas),
                    (None, chunk({}, finish_reason="tool_calls")),
                    (None, "[DONE]"),
                ]
            )
        )
        completion = await collect(provider.stream(HI))
        assert completion.tool_calls == (
            ToolCallSpec("c0", "a", {"n": 1}),
            ToolCallSpec("tool_1", "unknown_tool", {}),
        )

    async def test_parallel_calls_at_one_index_kept_apart(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """Parallel calls streamed whole, each at index 0 with an id of its own (Ollama, LiteLLM
        in front of it) are as many calls, in the order they came; they were one call whose
        arguments ran together (`{"q":"tea"}{"q":"milk"}`, kept raw) and the others lost."""
        fake.reply_at_one_index(
            [
                FakeToolCall("search", {"q": "tea"}, id="call_a"),
                FakeToolCall("search", {"q": "milk"}, id="call_b"),
                FakeToolCall("fetch", id="call_c"),
            ]
        )
        completion = await collect(provider.stream(HI, tools=[SEARCH]))
        assert completion.tool_calls == (
            ToolCallSpec("call_a", "search", {"q": "tea"}),
            ToolCallSpec("call_b", "search", {"q": "milk"}),
            ToolCallSpec("call_c", "fetch", {}),
        )

    @pytest.mark.parametrize("mode", MODES)
    async def test_arguments_as_a_json_object(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """Arguments sent as a JSON object rather than JSON text (Hugging Face TGI, llama.cpp's
        server with --tool-args-object) are that object; the turn failed UNAVAILABLE, the
        answer unreadable ("text expected, got dict")."""
        fake.reply_with_object_arguments(
            [
                FakeToolCall("search", {"q": "tea", "limit": 3}, id="call_1"),
                FakeToolCall("fetch", id="call_2"),
            ]
        )
        completion = await call(provider, mode, HI, [SEARCH])
        assert completion.tool_calls == (
            ToolCallSpec("call_1", "search", {"q": "tea", "limit": 3}),
            ToolCallSpec("call_2", "fetch", {}),
        )

    async def test_new_id_inside_unfinished_arguments_is_the_same_call(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """A delta at the same index with another id, while the call's arguments are not yet
        whole, continues that call (a server that sends a fresh id with every delta)."""
        deltas = [
            {"index": 0, "id": "c1", "function": {"name": "search", "arguments": '{"q"'}},
            {"index": 0, "id": "c2", "function": {"name": "search", "arguments": ': "tea"}'}},
        ]
        fake.push(
            Reply.sse(
                [
                    *((None, chunk({"tool_calls": [delta]})) for delta in deltas),
                    (None, chunk({}, finish_reason="tool_calls")),
                    (None, "[DONE]"),
                ]
            )
        )
        completion = await collect(provider.stream(HI, tools=[SEARCH]))
        assert completion.tool_calls == (ToolCallSpec("c1", "search", {"q": "tea"}),)

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        "arguments",
        [
            '{"q": "unterminated',
            pytest.param(deep_json_object(3000), id="nested-3000-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_invalid_arguments_kept_raw(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode, arguments: str
    ) -> None:
        """Arguments that are not a JSON object are kept as raw text, not turned into {}: ones
        nested past what json reads (it raised RecursionError) or holding NaN or an infinite
        number (it read them, and storage refuses them) too."""
        fake.reply(tool_calls=[FakeToolCall("search", arguments, id="call_1")])
        completion = await call(provider, mode, HI, [SEARCH])
        assert completion.tool_calls == (
            ToolCallSpec("call_1", "search", {RAW_ARGUMENTS_KEY: arguments}),
        )

    @pytest.mark.parametrize(
        "arguments",
        [
            pytest.param(deep_json_object(3000), id="nested-3000-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_done_after_arguments_not_json_unavailable(
        self, fake: FakeOpenAI, provider: OpenAIProvider, arguments: str
    ) -> None:
        """``[DONE]`` with no finish_reason after a call whose arguments json does not read
        as JSON (nested past its stack: it raised RecursionError) is not a whole answer, as
        after arguments cut short: UNAVAILABLE."""
        fake.reply_unfinished(tool_calls=[FakeToolCall("search", arguments, id="call_1")])
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await collect(provider.stream(HI, tools=[SEARCH]))
        assert caught.value.reason == "LLM_UNAVAILABLE"

    @pytest.mark.parametrize("mode", MODES)
    async def test_tool_round_trip(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """The model asks for a tool; the next call carries its call and result, exactly."""
        fake.reply("Searching.", tool_calls=[FakeToolCall("search", {"q": "tea"}, id="call_9")])
        fake.reply("Tea is a drink.")
        messages = [LLMMessage("system", "Be brief."), LLMMessage("user", "What is tea?")]
        first = await call(provider, mode, messages, [SEARCH])
        assert first.tool_calls == (ToolCallSpec("call_9", "search", {"q": "tea"}),)
        follow_up = [
            *messages,
            LLMMessage("assistant", first.content, first.tool_calls),
            LLMMessage("tool", "tea: a drink", tool_call_id="call_9"),
        ]
        second = await call(provider, mode, follow_up, [SEARCH])
        assert second.content == "Tea is a drink."
        body = fake.chat_bodies()[1]
        assert body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is tea?"},
            {
                "role": "assistant",
                "content": "Searching.",
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q":"tea"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "tea: a drink"},
        ]
        assert body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "description": "Search the notes.",
                    "parameters": SEARCH.parameters,
                },
            }
        ]

    async def test_tool_without_schema(self, fake: FakeOpenAI, provider: OpenAIProvider) -> None:
        """A tool with no parameter schema is offered with the empty object schema."""
        fake.reply("ok")
        await provider.complete(HI, tools=[ToolSpec("ping", "Ping.")])
        assert fake.chat_bodies()[0]["tools"][0]["function"]["parameters"] == {
            "type": "object",
            "properties": {},
        }

    async def test_turn_context_sent_exactly(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """A turn's context reaches the server in spec §4.5.1 order, message for message."""
        fake.reply("Done.")
        await provider.complete(turn_context())
        assert fake.chat_bodies()[0]["messages"] == [
            {"role": "system", "content": "You are Stello."},
            {"role": "system", "content": identity("Research")},
            {"role": "system", "content": "The user prefers short answers."},
            {"role": "user", "content": "What is in my notes?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q":"notes"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "Error: index unavailable"},
            {"role": "assistant", "content": "I could not search them."},
            {"role": "user", "content": "Try again."},
        ]

    async def test_abandoned_stream_stops(self, fake: FakeOpenAI, provider: OpenAIProvider) -> None:
        """Closing a stream after its first delta releases it; the next call works."""
        fake.push(
            Reply.sse([(None, chunk({"content": f"{i} "})) for i in range(50)], chunk_delay_s=0.05)
        )
        fake.reply("next")
        stream = provider.stream(HI)
        first = await anext(stream)
        assert first == TextDelta("0 ")
        await asyncio.wait_for(stream.aclose(), 1.0)
        assert (await provider.complete(HI)).content == "next"


class TestOpenAIProviderKeys:
    async def test_no_key_sends_placeholder(self, fake: FakeOpenAI) -> None:
        """A local server that needs no key gets a placeholder bearer key."""
        fake.reply("ok")
        async with OpenAIProvider(model=MODEL, base_url=fake.base_url) as provider:
            assert (await provider.complete(HI)).content == "ok"
        assert fake.requests[0].headers["authorization"] == "Bearer no-key"


class TestOpenAIProviderErrors:
    @pytest.mark.parametrize("mode", MODES)
    async def test_500_unavailable_after_retries(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 500 is retried (max_retries=1) and then raised as UNAVAILABLE; the provider's
        text is logged, not answered."""
        fake.fail(500, "upstream exploded", times=2)
        with pytest.raises(Unavailable, match="unavailable; retry later") as caught:
            await call(provider, mode, HI)
        assert "upstream exploded" not in caught.value.message
        line = logged(caplog, caught.value)
        assert "HTTP 500: upstream exploded after 1 retry" in line
        assert len(fake.requests) == 2

    @pytest.mark.parametrize("mode", MODES)
    async def test_500_then_success(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """A single 500 is hidden by the SDK's retry."""
        fake.fail(503)
        fake.reply("recovered")
        assert (await call(provider, mode, HI)).content == "recovered"

    @pytest.mark.parametrize("mode", MODES)
    async def test_429_resource_exhausted(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """A 429 that persists through the retries is RESOURCE_EXHAUSTED, with the provider's
        Retry-After for the client (its retry-after-ms: 1)."""
        fake.fail(429, "Rate limit reached", times=2)
        with pytest.raises(ResourceExhausted, match="rate limiting or out of quota") as caught:
            await call(provider, mode, HI)
        assert caught.value.retry_after_s == pytest.approx(0.001)

    @pytest.mark.parametrize("status", [401, 403])
    async def test_bad_key_failed_precondition(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        status: int,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 401/403 is FAILED_PRECONDITION; the log names the key setting, the key masked."""
        fake.fail(status, f"Incorrect API key provided: {KEY}")
        with pytest.raises(FailedPrecondition, match="rejected the gateway's API key") as caught:
            await provider.complete(HI)
        line = logged(caplog, caught.value)
        assert "STELLO_OPENAI_API_KEY" in line and "provided: ***" in line
        assert KEY not in caught.value.message and KEY not in line
        assert caught.value.reason == "LLM_API_KEY_REJECTED"
        assert len(fake.requests) == 1

    async def test_400_logs_provider_message(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 400 is FAILED_PRECONDITION; the provider's own message goes to the log."""
        fake.fail(400, "This model's maximum context length is 8192 tokens.")
        with pytest.raises(FailedPrecondition, match="rejected the request") as caught:
            await provider.complete(HI)
        assert "maximum context length is 8192" in logged(caplog, caught.value)
        assert caught.value.reason == "LLM_REQUEST_REJECTED"

    async def test_404_logs_model(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 404 is FAILED_PRECONDITION; the log points at the model and base URL settings."""
        fake.fail(404, "The model `test-model` does not exist")
        with pytest.raises(
            FailedPrecondition, match="does not know the configured model"
        ) as caught:
            await provider.complete(HI)
        assert "test-model" not in caught.value.message
        line = logged(caplog, caught.value)
        assert "STELLO_OPENAI_MODEL" in line and "STELLO_OPENAI_BASE_URL" in line

    @pytest.mark.parametrize("mode", MODES)
    async def test_slow_server_deadline_exceeded(
        self, fake: FakeOpenAI, mode: Mode, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A server that answers after the timeout is DEADLINE_EXCEEDED."""
        fake.stall(5.0)
        async with OpenAIProvider(
            model=MODEL, api_key=KEY, base_url=fake.base_url, timeout_s=0.2, max_retries=0
        ) as provider:
            with pytest.raises(DeadlineExceeded, match="did not answer in time") as caught:
                await call(provider, mode, HI)
        assert "no answer within 0.2s" in logged(caplog, caught.value)

    async def test_connection_reset_mid_answer(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A connection reset after the stream began is UNAVAILABLE as an answer that broke
        off, not retried; it was told as a server that "cannot be reached", logged as
        "after 1 retry" (none was made) with no cause, and the base URL to check."""
        fake.drop_mid_answer("hello there", events=2)
        shown: list[object] = []
        with pytest.raises(Unavailable, match="answer broke off") as caught:
            async for event in provider.stream(HI):
                shown.append(event)
        assert shown == [TextDelta("hell")]
        assert caught.value.reason == "LLM_UNAVAILABLE"
        line = logged(caplog, caught.value)
        assert "mid-answer" in line
        assert "retry" not in line
        assert "STELLO_OPENAI_BASE_URL" not in line
        assert len(fake.requests) == 1

    async def test_server_hung_mid_answer(
        self, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A stream that stops sending mid-answer is DEADLINE_EXCEEDED, logged as the wait for
        the answer's next piece, not retried; it was logged as "no answer within 0.2s after 1
        retry" (none was made)."""
        fake.hang_mid_answer("hello there", events=2)
        async with OpenAIProvider(
            model=MODEL, api_key=KEY, base_url=fake.base_url, timeout_s=0.2, max_retries=1
        ) as provider:
            with pytest.raises(DeadlineExceeded, match="did not answer in time") as caught:
                await collect(provider.stream(HI))
        line = logged(caplog, caught.value)
        assert "no next piece of the answer within 0.2s" in line
        assert "retry" not in line
        assert len(fake.requests) == 1

    @pytest.mark.parametrize("mode", MODES)
    async def test_answer_that_cannot_be_decompressed(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
    ) -> None:
        """An answer said to be gzip that is not (a proxy's mistake) is an unreadable answer,
        logged as one; it was told as a server that "cannot be reached" (a stream: one that
        "broke off"), and logged so."""
        broken = Reply(
            headers=(("content-type", "application/json"), ("content-encoding", "gzip")),
            body=b"this is not gzip",
        )
        fake.push(broken, broken)
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await call(provider, mode, HI)
        line = logged(caplog, caught.value)
        assert "could not be decompressed" in line
        assert "cannot reach" not in line
        assert "broke off" not in line

    @pytest.mark.parametrize("mode", MODES)
    async def test_unreachable_unavailable(
        self, mode: Mode, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A base URL nobody listens on is UNAVAILABLE; the log names the base URL setting."""
        async with FakeOpenAI() as gone:
            base_url = gone.base_url
        async with OpenAIProvider(
            model=MODEL, api_key=KEY, base_url=base_url, timeout_s=2.0, max_retries=0
        ) as provider:
            with pytest.raises(Unavailable, match="cannot be reached") as caught:
                await call(provider, mode, HI)
        assert "STELLO_OPENAI_BASE_URL" in logged(caplog, caught.value)

    async def test_error_event_in_stream(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An error object inside a stream that began is UNAVAILABLE, without retry."""
        fake.push(
            Reply.sse(
                [
                    (None, chunk({"content": "par"})),
                    (None, {"error": {"message": "model crashed", "type": "server_error"}}),
                ]
            )
        )
        with pytest.raises(Unavailable) as caught:
            await collect(provider.stream(HI))
        assert "model crashed" in logged(caplog, caught.value)
        assert len(fake.requests) == 1

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("flat", [False, True], ids=["under-error", "flat"])
    @pytest.mark.parametrize(
        ("error", "expected", "reason"),
        [
            (
                {"message": "context too long", "type": "BadRequestError", "code": 400},
                FailedPrecondition,
                "LLM_REQUEST_REJECTED",
            ),
            (
                {"message": "quota spent", "type": "insufficient_quota", "code": None},
                ResourceExhausted,
                "LLM_RATE_LIMITED",
            ),
            (
                {"message": "upstream gone", "type": "upstream_error", "code": 502},
                Unavailable,
                "LLM_UNAVAILABLE",
            ),
        ],
        ids=["code-400", "quota", "code-502"],
    )
    async def test_error_object_in_a_200_answer(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
        flat: bool,
        error: dict[str, object],
        expected: type[Exception],
        reason: str,
    ) -> None:
        """An error object where the answer should be (a proxy's 200 body, vLLM's error event
        mid-stream, under "error" or flat) is the error its type or HTTP status code says,
        its message logged, not retried. It was an empty answer (a call: the turn then told
        "the model answered nothing"), or UNAVAILABLE whatever its code said (a stream:
        "retry later" for a request that fails again), or, flat, an unreadable answer whose
        message was not logged."""
        fake.fail_in_answer(error, flat=flat)
        with pytest.raises(expected) as caught:
            await call(provider, mode, HI)
        assert isinstance(caught.value, StelloError)
        assert caught.value.reason == reason
        assert str(error["message"]) in logged(caplog, caught.value)
        assert len(fake.requests) == 1


class TestOpenAIProviderMaxTokens:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
    async def test_cap_sent_under_the_configured_name(
        self, fake: FakeOpenAI, mode: Mode, param: Literal["max_tokens", "max_completion_tokens"]
    ) -> None:
        """The caller's max_tokens is capped at the configured one and sent under the configured
        parameter name only; a lower one is sent as it is."""
        fake.reply("a")
        fake.reply("b")
        async with OpenAIProvider(
            model=MODEL, api_key=KEY, base_url=fake.base_url, max_tokens=300, max_tokens_param=param
        ) as provider:
            for max_tokens in (32_000, 200):
                if mode == "complete":
                    await provider.complete(HI, max_tokens=max_tokens)
                else:
                    await collect(provider.stream(HI, max_tokens=max_tokens))
        other = "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"
        bodies = fake.chat_bodies()
        assert [body[param] for body in bodies] == [300, 200]
        assert not [body for body in bodies if other in body]

    async def test_default_cap_fits_gpt_4o_mini(self, fake: FakeOpenAI) -> None:
        """By default a quarter of a 128k window (32,000) goes out as max_tokens 16,384."""
        fake.reply("ok")
        async with OpenAIProvider(model=MODEL, api_key=KEY, base_url=fake.base_url) as provider:
            await provider.complete(HI, max_tokens=32_000)
        assert fake.chat_bodies()[0]["max_tokens"] == 16_384

    def test_cap_must_be_positive(self) -> None:
        """A cap below 1 is refused at construction."""
        with pytest.raises(ValueError, match="max_tokens must be at least 1"):
            OpenAIProvider(model=MODEL, api_key=KEY, max_tokens=0)


def _cut_tool_call() -> FakeToolCall:
    return FakeToolCall("clock", {"tz": "Europe/Paris"}, id="tr1")


UNREADABLE = [
    pytest.param(Reply.text("<html><h1>502 Bad Gateway</h1></html>"), id="html"),
    pytest.param(
        Reply.text('{"id": "chatcmpl-1", "choi', content_type="application/json"), id="json"
    ),
    pytest.param(Reply.json("a string, not an object"), id="not-an-object"),
    pytest.param(Reply.json({"choices": [{"index": 0, "message": "hi"}]}), id="wrong-shape"),
    # The SDK's json raised RecursionError (INTERNAL): JSON that no json reader here reads.
    pytest.param(
        Reply.text(
            f'{{"id": "chatcmpl-1", "choices": {deep_json_object(3000)}}}',
            content_type="application/json",
        ),
        id="nested-3000-deep",
    ),
]


class TestOpenAIProviderProtocol:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("reply", UNREADABLE)
    async def test_unreadable_answer_unavailable(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        mode: Mode,
        reply: Reply,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 200 whose body is not a chat completion is UNAVAILABLE with an error id, never a
        crash nor an empty answer; the log line says what could not be read."""
        fake.push(reply)
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await call(provider, mode, HI)
        assert caught.value.reason == "LLM_UNAVAILABLE"
        assert "unreadable answer" in logged(caplog, caught.value)
        assert len(fake.requests) == 1  # not retried: the server did answer

    @pytest.mark.parametrize(
        "data",
        [
            pytest.param('{"choices": [', id="cut"),
            pytest.param(  # the SDK's json raised RecursionError (INTERNAL)
                f'{{"choices": {deep_json_object(3000)}}}', id="nested-3000-deep"
            ),
        ],
    )
    async def test_event_that_is_not_json(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        caplog: pytest.LogCaptureFixture,
        data: str,
    ) -> None:
        """A `data:` line that is not JSON (or nests past what json reads), after a first
        delta, fails the stream UNAVAILABLE."""
        fake.push(Reply.sse([(None, chunk({"content": "par"})), (None, data)]))
        stream = provider.stream(HI)
        assert await anext(stream) == TextDelta("par")
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await anext(stream)
        assert "not JSON" in logged(caplog, caught.value)

    @pytest.mark.parametrize(
        "events",
        [
            pytest.param([], id="no-event"),
            pytest.param([(None, "[DONE]")], id="only-done"),
        ],
    )
    async def test_stream_without_an_answer(
        self, fake: FakeOpenAI, provider: OpenAIProvider, events: list[tuple[None, str]]
    ) -> None:
        """A stream with no chunk at all is UNAVAILABLE, not an empty answer."""
        fake.push(Reply.sse(events))
        with pytest.raises(Unavailable, match="answer could not be read"):
            await collect(provider.stream(HI))

    @pytest.mark.parametrize(
        ("reply", "expected", "said"),
        [
            pytest.param(
                Reply.text("<html><body>Sign in to the proxy</body></html>"),
                Unavailable,
                "Sign in to the proxy",
                id="html-page",
            ),
            pytest.param(
                Reply.json({"error": {"message": "quota spent", "type": "insufficient_quota"}}),
                ResourceExhausted,
                "quota spent",
                id="json-error",
            ),
            pytest.param(
                Reply.json({"object": "error", "message": "bad tools", "code": 400}),
                FailedPrecondition,
                "bad tools",
                id="flat-json-error",
            ),
        ],
    )
    async def test_stream_answered_without_events(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        caplog: pytest.LogCaptureFixture,
        reply: Reply,
        expected: type[Exception],
        said: str,
    ) -> None:
        """A streamed call answered (HTTP 200) with no server-sent event, by a proxy's page or an
        error object, is the error that object says, or UNAVAILABLE with the start of what came
        logged; it was logged as a stream "closed mid-answer", the error's message lost."""
        fake.push(reply)
        with pytest.raises(expected) as caught:
            await collect(provider.stream(HI))
        line = logged(caplog, caught.value)
        assert said in line
        assert "closed mid-answer" not in line

    @pytest.mark.parametrize("with_call", [False, True], ids=["text", "tool-call"])
    async def test_stream_cut_short_unavailable(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        with_call: bool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A stream that ends cleanly without a finish_reason (half a text, a tool call cut
        mid-arguments) is UNAVAILABLE after the text it showed, with no Done and no call."""
        fake.cut_short("this reply ends early", _cut_tool_call() if with_call else None)
        events: list[object] = []
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            async for event in provider.stream(HI):
                events.append(event)
        assert events == [TextDelta("this reply"), TextDelta(" ends early")]
        assert "without the answer's finish_reason" in logged(caplog, caught.value)

    async def test_done_without_finish_reason_ends_the_answer(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A stream whose chunks carry no finish_reason and that ends with ``[DONE]`` (some
        vLLM, llama.cpp and proxy builds) is a whole answer, as one that stopped; no
        warning."""
        fake.reply_unfinished("hello there")
        events = [event async for event in provider.stream(HI)]
        assert events[-1] == Done(
            Completion("hello there", usage=Usage(10, 5, 15), finish_reason="stop")
        )
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    async def test_done_without_finish_reason_after_tool_calls(
        self, fake: FakeOpenAI, provider: OpenAIProvider
    ) -> None:
        """Whole tool calls then ``[DONE]``, with no finish_reason, are the answer's calls."""
        fake.reply_unfinished(tool_calls=[FakeToolCall("search", {"q": "tea"}, id="call_1")])
        events = [event async for event in provider.stream(HI, tools=[SEARCH])]
        calls = (ToolCallSpec("call_1", "search", {"q": "tea"}),)
        assert [e for e in events if isinstance(e, ToolCallEvent)] == [ToolCallEvent(calls[0])]
        assert isinstance(events[-1], Done)
        assert events[-1].completion.tool_calls == calls

    async def test_done_after_a_cut_tool_call_unavailable(
        self, fake: FakeOpenAI, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """``[DONE]`` with no finish_reason after a tool call whose arguments stop half-way
        is not a whole answer: UNAVAILABLE, no Done and no call."""
        fake.cut_short("this reply ends early", _cut_tool_call(), done=True)
        events: list[object] = []
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            async for event in provider.stream(HI):
                events.append(event)
        assert events == [TextDelta("this reply"), TextDelta(" ends early")]
        assert "[DONE] came without a finish_reason" in logged(caplog, caught.value)

    @pytest.mark.parametrize("mode", MODES)
    async def test_answer_cut_at_max_tokens_kept_and_logged(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An answer with finish_reason length is kept as it is, and the cut is logged."""
        if mode == "complete":
            message = {"role": "assistant", "content": "long answ"}
            choice = {"index": 0, "message": message, "finish_reason": "length"}
            fake.push(Reply.json({"id": "c", "object": "chat.completion", "choices": [choice]}))
        else:
            fake.push(Reply.sse([(None, chunk({"content": "long answ"}, finish_reason="length"))]))
        if mode == "complete":
            completion = await provider.complete(HI, max_tokens=7)
        else:
            completion = await collect(provider.stream(HI, max_tokens=7))
        assert completion.content == "long answ"
        assert any("cut at max_tokens (7)" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize("mode", MODES)
    async def test_answer_stopped_by_a_content_filter_logged(
        self,
        fake: FakeOpenAI,
        provider: OpenAIProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An answer with finish_reason content_filter (Azure OpenAI's filter stopped it) is
        kept as it is, and the stop is logged; nothing said it was not whole."""
        if mode == "complete":
            message = {"role": "assistant", "content": "half an ans"}
            choice = {"index": 0, "message": message, "finish_reason": "content_filter"}
            fake.push(Reply.json({"id": "c", "object": "chat.completion", "choices": [choice]}))
        else:
            last = chunk({"content": "half an ans"}, finish_reason="content_filter")
            fake.push(Reply.sse([(None, last), (None, "[DONE]")]))
        completion = await call(provider, mode, HI)
        assert completion.content == "half an ans"
        assert any("content filter" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize("mode", MODES)
    async def test_repeated_call_ids_made_unique(
        self, fake: FakeOpenAI, provider: OpenAIProvider, mode: Mode
    ) -> None:
        """Two calls sharing an id (and a missing id that lands on a taken one) get distinct
        ids, in order, so each can be answered."""
        fake.reply(
            tool_calls=[
                FakeToolCall("clock", {"tz": "UTC"}, id="same"),
                FakeToolCall("clock", {"tz": "CET"}, id="same"),
                FakeToolCall("clock", {"tz": "JST"}, id="same_2"),
            ]
        )
        completion = await call(provider, mode, HI)
        assert completion.tool_calls == (
            ToolCallSpec("same", "clock", {"tz": "UTC"}),
            ToolCallSpec("same_2", "clock", {"tz": "CET"}),
            ToolCallSpec("same_2_2", "clock", {"tz": "JST"}),
        )
