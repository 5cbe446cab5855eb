"""The `anthropic` provider against a real loopback server speaking the Messages API (DESIGN §6)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence

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
from agent_gateway.llm.network.anthropic_provider import AnthropicProvider
from stello.errors import DeadlineExceeded, FailedPrecondition, ResourceExhausted, Unavailable
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
from tests.support.fake_anthropic import FakeAnthropic, FakeToolCall, Reply
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object

HI = [LLMMessage("user", "hi")]
MAX_TOKENS = 1000


def text(value: str) -> dict[str, str]:
    """A text block."""
    return {"type": "text", "text": value}


def result(tool_use_id: str, content: str, *, is_error: bool = False) -> dict[str, object]:
    """A tool_result block."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "is_error": is_error,
        "content": content,
    }


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(name="provider")
async def _provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    async with AnthropicProvider(
        model=MODEL,
        api_key=KEY,
        base_url=fake.base_url,
        max_tokens=MAX_TOKENS,
        timeout_s=5.0,
        max_retries=1,
    ) as provider:
        yield provider


class TestAnthropicProviderTurns:
    async def test_complete_plain(self, fake: FakeAnthropic, provider: AnthropicProvider) -> None:
        """A plain turn sends exactly model, max_tokens and messages, and returns text and usage."""
        fake.reply("hello there", prompt_tokens=12, completion_tokens=3)
        completion = await provider.complete(HI)
        assert completion == Completion("hello there", usage=Usage(12, 3, 15), finish_reason="stop")
        assert fake.message_bodies() == [
            {
                "model": MODEL,
                "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": [text("hi")]}],
            }
        ]
        request = fake.requests[0]
        assert (request.method, request.path) == ("POST", "/v1/messages")
        assert "anthropic-version" in request.headers
        assert KEY in request.headers.get("x-api-key", request.headers.get("authorization", ""))

    async def test_stream_plain(self, fake: FakeAnthropic, provider: AnthropicProvider) -> None:
        """A streamed turn yields text_delta pieces, then one Done with message_delta's usage."""
        fake.reply("hello there", prompt_tokens=7, completion_tokens=2, chunks=3)
        events = [event async for event in provider.stream(HI)]
        assert events == [
            TextDelta("hell"),
            TextDelta("o th"),
            TextDelta("ere"),
            Done(Completion("hello there", usage=Usage(7, 2, 9), finish_reason="stop")),
        ]
        assert fake.message_bodies()[0]["stream"] is True

    async def test_stream_ignores_event_types_it_does_not_know(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """An event of a type added to the API later (Anthropic's versioning policy: clients
        ignore those) is skipped and the answer kept; the turn failed UNAVAILABLE, the SDK
        having read it as a message_start without its message."""
        future = [
            ("future_event", {"type": "future_event", "detail": {"n": 1}}),
            ("future_event", {"type": "future_event", "message": None}),
        ]
        fake.reply_with_events("hello there", future)
        events = [event async for event in provider.stream(HI)]
        assert events[-1] == Done(
            Completion("hello there", usage=Usage(10, 5, 15), finish_reason="stop")
        )

    async def test_stream_message_delta_without_usage(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """A message_delta with ``usage: null`` (some Anthropic-compatible servers) ends the
        answer with the usage message_start gave; it was an unreadable answer."""
        fake.reply_with_events("hello there", [], usage_in_delta=False)
        events = [event async for event in provider.stream(HI)]
        assert events[-1] == Done(
            Completion("hello there", usage=Usage(10, 1, 11), finish_reason="stop")
        )

    async def test_cache_tokens_count_as_prompt(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """Cache reads and writes count as prompt tokens."""
        fake.push(
            Reply.json(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [text("ok")],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 5,
                        "cache_creation_input_tokens": 100,
                        "cache_read_input_tokens": 1000,
                        "output_tokens": 2,
                    },
                }
            )
        )
        assert (await provider.complete(HI)).usage == Usage(1105, 2, 1107)

    async def test_stream_tool_use(self, fake: FakeAnthropic, provider: AnthropicProvider) -> None:
        """input_json_delta pieces become one tool call, emitted when its block stops."""
        fake.reply(
            "Let me look.",
            tool_calls=[
                FakeToolCall("search", {"q": "tea", "limit": 3}, id="toolu_1"),
                FakeToolCall("fetch", {"url": "http://x"}, id="toolu_2"),
            ],
        )
        events = [event async for event in provider.stream(HI, tools=[SEARCH])]
        calls = (
            ToolCallSpec("toolu_1", "search", {"q": "tea", "limit": 3}),
            ToolCallSpec("toolu_2", "fetch", {"url": "http://x"}),
        )
        assert events[-3:] == [
            ToolCallEvent(calls[0]),
            ToolCallEvent(calls[1]),
            Done(Completion("Let me look.", calls, Usage(10, 5, 15), "tool_calls")),
        ]

    @pytest.mark.parametrize(
        "arguments",
        [
            '{"q": "unterminated',
            pytest.param(deep_json_object(3000), id="nested-3000-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_stream_invalid_input_json_kept_raw(
        self, fake: FakeAnthropic, provider: AnthropicProvider, arguments: str
    ) -> None:
        """Streamed tool input that is not a JSON object is kept as raw text: one nested past
        what json reads (it raised RecursionError) or holding NaN or an infinite number
        (it read them) too."""
        fake.reply(tool_calls=[FakeToolCall("search", arguments, id="toolu_1")])
        completion = await collect(provider.stream(HI, tools=[SEARCH]))
        assert completion.tool_calls == (
            ToolCallSpec("toolu_1", "search", {RAW_ARGUMENTS_KEY: arguments}),
        )

    @pytest.mark.parametrize("mode", MODES)
    async def test_tool_round_trip(
        self, fake: FakeAnthropic, provider: AnthropicProvider, mode: Mode
    ) -> None:
        """The model asks for a tool; the next call carries tool_use and tool_result, exactly."""
        fake.reply("Searching.", tool_calls=[FakeToolCall("search", {"q": "tea"}, id="toolu_9")])
        fake.reply("Tea is a drink.")
        messages = [LLMMessage("system", "Be brief."), LLMMessage("user", "What is tea?")]
        first = await call(provider, mode, messages, [SEARCH])
        assert first.tool_calls == (ToolCallSpec("toolu_9", "search", {"q": "tea"}),)
        follow_up = [
            *messages,
            LLMMessage("assistant", first.content, first.tool_calls),
            LLMMessage("tool", "tea: a drink", tool_call_id="toolu_9"),
        ]
        second = await call(provider, mode, follow_up, [SEARCH])
        assert second.content == "Tea is a drink."
        body = fake.message_bodies()[1]
        assert body["system"] == "Be brief."
        assert body["messages"] == [
            {"role": "user", "content": [text("What is tea?")]},
            {
                "role": "assistant",
                "content": [
                    text("Searching."),
                    {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"q": "tea"}},
                ],
            },
            {
                "role": "user",
                "content": [result("toolu_9", "tea: a drink")],
            },
        ]
        assert body["tools"] == [
            {
                "name": "search",
                "description": "Search the notes.",
                "input_schema": SEARCH.parameters,
            }
        ]

    async def test_tool_without_schema(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """A tool with no parameter schema is offered with the empty object schema."""
        fake.reply("ok")
        await provider.complete(HI, tools=[ToolSpec("ping", "Ping.")])
        assert fake.message_bodies()[0]["tools"][0]["input_schema"] == {
            "type": "object",
            "properties": {},
        }

    async def test_turn_context_sent_exactly(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """System prompt, identity and insight join `system`; the rest alternates roles exactly."""
        fake.reply("Done.")
        await provider.complete(turn_context())
        body = fake.message_bodies()[0]
        assert body["system"] == "\n\n".join(
            ["You are Stello.", identity("Research"), "The user prefers short answers."]
        )
        assert body["messages"] == [
            {"role": "user", "content": [text("What is in my notes?")]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_a", "name": "search", "input": {"q": "notes"}}
                ],
            },
            {
                "role": "user",
                "content": [result("call_a", "index unavailable", is_error=True)],
            },
            {"role": "assistant", "content": [text("I could not search them.")]},
            {"role": "user", "content": [text("Try again.")]},
        ]

    async def test_same_role_messages_merged(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """Consecutive same-role messages merge; tool results of a round share one user message."""
        fake.reply("ok")
        calls = (ToolCallSpec("t1", "a", {}), ToolCallSpec("t2", "b", {"x": 1}))
        await provider.complete(
            [
                LLMMessage("user", "one"),
                LLMMessage("user", "two"),
                LLMMessage("assistant", "", calls),
                LLMMessage("tool", "r1", tool_call_id="t1"),
                LLMMessage("tool", "", tool_call_id="t2", is_error=True),
                LLMMessage("system", "late note"),
                LLMMessage("user", "three"),
            ]
        )
        body = fake.message_bodies()[0]
        assert body["system"] == "late note"
        assert body["messages"] == [
            {"role": "user", "content": [text("one"), text("two")]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                    {"type": "tool_use", "id": "t2", "name": "b", "input": {"x": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    result("t1", "r1"),
                    {"type": "tool_result", "tool_use_id": "t2", "is_error": True},
                    text("three"),
                ],
            },
        ]

    async def test_abandoned_stream_stops(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """Closing a stream after its first delta releases it; the next call works."""
        deltas = [
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
            for d in ({"type": "text_delta", "text": f"{i} "} for i in range(50))
        ]
        start = {"type": "content_block_start", "index": 0, "content_block": text("")}
        fake.push(Reply.sse([("content_block_start", start), *deltas], chunk_delay_s=0.05))
        fake.reply("next")
        stream = provider.stream(HI)
        assert await anext(stream) == TextDelta("0 ")
        await asyncio.wait_for(stream.aclose(), 1.0)
        assert (await provider.complete(HI)).content == "next"


class TestAnthropicProviderErrors:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("status", [500, 529])
    async def test_5xx_unavailable_after_retries(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        mode: Mode,
        status: int,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 500 or 529 (overloaded) is retried (max_retries=1), then raised as UNAVAILABLE;
        the provider's text is logged, not answered."""
        fake.fail(status, "upstream exploded", times=2)
        with pytest.raises(Unavailable, match="unavailable; retry later") as caught:
            await call(provider, mode, HI)
        assert "upstream exploded" not in caught.value.message
        assert re.search(rf"HTTP {status}: upstream exploded", logged(caplog, caught.value))
        assert len(fake.requests) == 2

    @pytest.mark.parametrize("mode", MODES)
    async def test_429_resource_exhausted(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 429 that persists through the retries is RESOURCE_EXHAUSTED (the provider's
        text in the log)."""
        fake.fail(429, "Number of request tokens has exceeded your rate limit", times=2)
        with pytest.raises(ResourceExhausted, match="rate limiting or out of quota") as caught:
            await call(provider, mode, HI)
        assert caught.value.reason == "LLM_RATE_LIMITED"
        assert "exceeded your rate limit" in logged(caplog, caught.value)
        assert caught.value.retry_after_s == pytest.approx(0.001)  # its retry-after-ms: 1

    @pytest.mark.parametrize("status", [401, 403])
    async def test_bad_key_failed_precondition(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        status: int,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 401/403 is FAILED_PRECONDITION; the log names the key setting, the key masked."""
        fake.fail(status, f"invalid x-api-key {KEY}")
        with pytest.raises(FailedPrecondition, match="rejected the gateway's API key") as caught:
            await provider.complete(HI)
        line = logged(caplog, caught.value)
        assert "STELLO_ANTHROPIC_API_KEY" in line and "invalid x-api-key ***" in line
        assert KEY not in caught.value.message and KEY not in line
        assert len(fake.requests) == 1

    async def test_400_logs_provider_message(
        self, fake: FakeAnthropic, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 400 is FAILED_PRECONDITION; the provider's own message goes to the log."""
        fake.fail(400, "prompt is too long: 210000 tokens > 200000 maximum")
        with pytest.raises(FailedPrecondition, match="rejected the request") as caught:
            await provider.complete(HI)
        assert "prompt is too long" in logged(caplog, caught.value)

    @pytest.mark.parametrize("mode", MODES)
    async def test_slow_server_deadline_exceeded(
        self, fake: FakeAnthropic, mode: Mode, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A server that answers after the timeout is DEADLINE_EXCEEDED."""
        fake.stall(5.0)
        async with AnthropicProvider(
            model=MODEL, api_key=KEY, base_url=fake.base_url, timeout_s=0.2, max_retries=0
        ) as provider:
            with pytest.raises(DeadlineExceeded, match="did not answer in time") as caught:
                await call(provider, mode, HI)
        assert "no answer within 0.2s" in logged(caplog, caught.value)

    async def test_connection_reset_mid_answer(
        self, fake: FakeAnthropic, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A connection reset after the stream began is UNAVAILABLE as an answer that broke
        off, not retried; it was told as a server that "cannot be reached", logged as
        "after 1 retry" (none was made) with no cause, and the base URL to check."""
        fake.drop_mid_answer("hello there", events=4)
        shown: list[object] = []
        with pytest.raises(Unavailable, match="answer broke off") as caught:
            async for event in provider.stream(HI):
                shown.append(event)
        assert shown == [TextDelta("hell")]
        assert caught.value.reason == "LLM_UNAVAILABLE"
        line = logged(caplog, caught.value)
        assert "mid-answer" in line
        assert "retry" not in line
        assert "STELLO_ANTHROPIC_BASE_URL" not in line
        assert len(fake.requests) == 1

    async def test_server_hung_mid_answer(
        self, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A stream that stops sending mid-answer is DEADLINE_EXCEEDED, logged as the wait for
        the answer's next piece, not retried; it was logged as "no answer within 0.2s after 1
        retry" (none was made)."""
        fake.hang_mid_answer("hello there", events=4)
        async with AnthropicProvider(
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
        fake: FakeAnthropic,
        provider: AnthropicProvider,
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
        async with FakeAnthropic() as gone:
            base_url = gone.base_url
        async with AnthropicProvider(
            model=MODEL, api_key=KEY, base_url=base_url, timeout_s=2.0, max_retries=0
        ) as provider:
            with pytest.raises(Unavailable, match="cannot be reached") as caught:
                await call(provider, mode, HI)
        assert "STELLO_ANTHROPIC_BASE_URL" in logged(caplog, caught.value)

    @pytest.mark.parametrize(
        ("error_type", "error"),
        [
            pytest.param("overloaded_error", Unavailable, id="overloaded"),
            pytest.param("api_error", Unavailable, id="api-error"),
            pytest.param("rate_limit_error", ResourceExhausted, id="rate-limit"),
        ],
    )
    async def test_error_event_in_stream(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        error_type: str,
        error: type[Exception],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An error event inside a stream that began maps by its type, without retry."""
        fake.stream_error(error_type, "busy right now", text="par")
        with pytest.raises(error) as caught:
            await collect(provider.stream(HI))
        assert "busy right now" in logged(caplog, caught.value)
        assert len(fake.requests) == 1


UNREADABLE = [
    pytest.param(Reply.text("<html><h1>502 Bad Gateway</h1></html>"), id="html"),
    pytest.param(Reply.text('{"id": "msg_1", "conte', content_type="application/json"), id="json"),
    pytest.param(Reply.json("a string, not an object"), id="not-an-object"),
    pytest.param(Reply.json({"type": "message", "content": 5, "usage": {}}), id="wrong-shape"),
    # The SDK's json raised RecursionError (INTERNAL): JSON that no json reader here reads.
    pytest.param(
        Reply.text(
            '{"type": "message", "content": [{"type": "tool_use", "id": "toolu_1", "name": '
            f'"search", "input": {deep_json_object(3000)}}}]}}',
            content_type="application/json",
        ),
        id="nested-3000-deep",
    ),
]


def message(content: Sequence[Mapping[str, object]], stop_reason: str = "end_turn") -> Reply:
    """A whole Message answer holding `content`."""
    return Reply.json(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
    )


class TestAnthropicProviderProtocol:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("reply", UNREADABLE)
    async def test_unreadable_answer_unavailable(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        mode: Mode,
        reply: Reply,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A 200 whose body is not a Message is UNAVAILABLE with an error id, never a crash nor
        an empty answer; the log line says what could not be read."""
        fake.push(reply)
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await call(provider, mode, HI)
        assert caught.value.reason == "LLM_UNAVAILABLE"
        assert "unreadable answer" in logged(caplog, caught.value)
        assert len(fake.requests) == 1  # not retried: the server did answer

    @pytest.mark.parametrize(
        "data",
        [
            pytest.param('{"type": "content_block_delta", "ind', id="cut"),
            pytest.param(  # the SDK's json raised RecursionError (INTERNAL)
                '{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_'
                f'delta", "partial_json": "", "x": {deep_json_object(3000)}}}}}',
                id="nested-3000-deep",
            ),
        ],
    )
    async def test_event_that_is_not_json(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        caplog: pytest.LogCaptureFixture,
        data: str,
    ) -> None:
        """An event whose data is not JSON (or nests past what json reads), after a first
        delta, fails the stream UNAVAILABLE."""
        start = {"type": "content_block_start", "index": 0, "content_block": text("")}
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "par"},
        }
        fake.push(
            Reply.sse(
                [
                    ("content_block_start", start),
                    ("content_block_delta", delta),
                    ("content_block_delta", data),
                ]
            )
        )
        stream = provider.stream(HI)
        assert await anext(stream) == TextDelta("par")
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            await anext(stream)
        assert "not JSON" in logged(caplog, caught.value)

    async def test_stream_without_an_event(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """A stream with no event at all is UNAVAILABLE, not an empty answer."""
        fake.push(Reply.sse([]))
        with pytest.raises(Unavailable, match="answer could not be read"):
            await collect(provider.stream(HI))

    @pytest.mark.parametrize("mode", MODES)
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
                Reply.json(
                    {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
                ),
                ResourceExhausted,
                "slow",
                id="json-error",
            ),
            pytest.param(
                Reply.json(
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "bad tools"},
                    }
                ),
                FailedPrecondition,
                "bad tools",
                id="json-refusal",
            ),
        ],
    )
    async def test_answered_by_something_else(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        caplog: pytest.LogCaptureFixture,
        mode: Mode,
        reply: Reply,
        expected: type[Exception],
        said: str,
    ) -> None:
        """A call answered (HTTP 200) with an error object (a proxy's) or, streamed, with no
        server-sent event (a proxy's page) is the error that object's type says, or
        UNAVAILABLE with the start of what came logged; the error's message was lost (a
        Message "of unexpected shape"; a stream "closed mid-answer")."""
        fake.push(reply)
        with pytest.raises(expected) as caught:
            await call(provider, mode, HI)
        line = logged(caplog, caught.value)
        assert said in line
        assert "closed mid-answer" not in line
        assert len(fake.requests) == 1

    @pytest.mark.parametrize("with_call", [False, True], ids=["text", "tool-call"])
    async def test_stream_cut_short_unavailable(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        with_call: bool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A stream that ends cleanly without message_delta or message_stop (half a text, a
        tool call cut mid-input) is UNAVAILABLE after the text it showed, with no Done."""
        tool_call = FakeToolCall("clock", {"tz": "Europe/Paris"}, id="toolu_1")
        fake.cut_short("this reply ends early", tool_call if with_call else None)
        events: list[object] = []
        with pytest.raises(Unavailable, match="answer could not be read") as caught:
            async for event in provider.stream(HI):
                events.append(event)
        assert events == [TextDelta("this reply"), TextDelta(" ends early")]
        assert "without message_delta or message_stop" in logged(caplog, caught.value)

    @pytest.mark.parametrize("mode", MODES)
    async def test_answer_cut_at_max_tokens_kept_and_logged(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An answer with stop_reason max_tokens is kept as it is, and the cut is logged."""
        if mode == "complete":
            fake.push(message([text("long answ")], stop_reason="max_tokens"))
        else:
            start = {"type": "content_block_start", "index": 0, "content_block": text("")}
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "long answ"},
            }
            stop = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}}
            fake.push(
                Reply.sse(
                    [
                        ("content_block_start", start),
                        ("content_block_delta", delta),
                        ("message_delta", stop),
                    ]
                )
            )
        completion = await call(provider, mode, HI)
        assert completion.content == "long answ"
        assert any(f"cut at max_tokens ({MAX_TOKENS})" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize("mode", MODES)
    async def test_answer_stopped_by_a_refusal_logged(
        self,
        fake: FakeAnthropic,
        provider: AnthropicProvider,
        mode: Mode,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An answer with stop_reason refusal (Anthropic's safety classifier stopped it) is
        kept as it is, and the stop is logged; nothing said it was not whole."""
        if mode == "complete":
            fake.push(message([text("half an ans")], stop_reason="refusal"))
        else:
            start = {"type": "content_block_start", "index": 0, "content_block": text("")}
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "half an ans"},
            }
            stop = {"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {}}
            fake.push(
                Reply.sse(
                    [
                        ("content_block_start", start),
                        ("content_block_delta", delta),
                        ("message_delta", stop),
                    ]
                )
            )
        completion = await call(provider, mode, HI)
        assert completion.content == "half an ans"
        assert any("content filter" in r.getMessage() for r in caplog.records)

    async def test_tool_input_that_is_not_an_object_kept_raw(
        self, fake: FakeAnthropic, provider: AnthropicProvider
    ) -> None:
        """A tool_use input that is not an object is kept raw, as streamed input is."""
        use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": '{"q": "te'}
        fake.push(message([use], stop_reason="tool_use"))
        completion = await provider.complete(HI, tools=[SEARCH])
        assert completion.tool_calls == (
            ToolCallSpec("toolu_1", "search", {RAW_ARGUMENTS_KEY: '{"q": "te'}),
        )

    @pytest.mark.parametrize(
        ("body_input", "kept"),
        [
            pytest.param('{"q": NaN}', '{"q": NaN}', id="nan"),
            pytest.param('{"q": -Infinity}', '{"q": -Infinity}', id="infinity"),
            pytest.param('{"q": 1e999}', '{"q": Infinity}', id="beyond-a-double"),
        ],
    )
    async def test_tool_input_holding_nan_kept_raw(
        self, fake: FakeAnthropic, provider: AnthropicProvider, body_input: str, kept: str
    ) -> None:
        """A tool_use input object holding NaN or an infinite number (the SDK's json reads
        them; JSON and storage do not) is kept raw, as the SDK read it."""
        body = (
            '{"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": '
            f'[{{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {body_input}}}],'
            ' "stop_reason": "tool_use", "stop_sequence": null,'
            ' "usage": {"input_tokens": 1, "output_tokens": 1}}'
        )
        fake.push(Reply.text(body, content_type="application/json"))
        completion = await provider.complete(HI, tools=[SEARCH])
        assert completion.tool_calls == (
            ToolCallSpec("toolu_1", "search", {RAW_ARGUMENTS_KEY: kept}),
        )

    @pytest.mark.parametrize("mode", MODES)
    async def test_repeated_call_ids_made_unique(
        self, fake: FakeAnthropic, provider: AnthropicProvider, mode: Mode
    ) -> None:
        """Two tool_use blocks sharing an id get distinct ids, in order, so each can be
        answered."""
        fake.reply(
            tool_calls=[
                FakeToolCall("clock", {"tz": "UTC"}, id="toolu_same"),
                FakeToolCall("clock", {"tz": "CET"}, id="toolu_same"),
            ]
        )
        completion = await call(provider, mode, HI)
        assert completion.tool_calls == (
            ToolCallSpec("toolu_same", "clock", {"tz": "UTC"}),
            ToolCallSpec("toolu_same_2", "clock", {"tz": "CET"}),
        )
