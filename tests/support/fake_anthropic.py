"""A fake Anthropic server: the Messages API, as JSON or as server-sent events.

Point the `anthropic` SDK (or ``STELLO_ANTHROPIC_BASE_URL``) at
`FakeAnthropic.base_url` and script what the model answers; each scripted
answer is rendered as a Message, or as the event stream of one (message_start,
content_block_start/delta/stop with text_delta and input_json_delta,
message_delta with usage, message_stop) when the request has
``"stream": true``::

    async with FakeAnthropic() as fake:
        fake.reply("hello")
        fake.reply(tool_calls=[FakeToolCall("search", {"q": "x"}, id="toolu_1")])
        fake.fail(529, "overloaded")                          # one HTTP error answer
        fake.fail(500, times=3)                               # three (retries)
        fake.stream_error("overloaded_error", "busy")         # an error event mid-stream
        fake.reply_with_events("hi", [("future_event", {...})])  # events the SDK does not know
        fake.stall(5.0)                                       # a reply 5 s late
        fake.drop_mid_answer("hello there")                   # connection reset mid-stream
        fake.hang_mid_answer("hello there")                   # nothing more after 2 events
        fake.cut_short("half an ans", FakeToolCall("f", {"a": 1}))  # no message_delta/_stop
        fake.set_default(lambda body: FakeAnswer("always"))   # when nothing is scripted
        ...
        fake.message_bodies()  # the JSON bodies received, in order

Unscripted requests (with no default set) get a 501 that says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from tests.support.fake_http import (
    FakeAnswer,
    FakeHTTPServer,
    FakeToolCall,
    JsonValue,
    RecordedRequest,
    Reply,
    split_in_two,
)

__all__ = ["FakeAnswer", "FakeAnthropic", "FakeToolCall", "Reply"]

RETRY_FAST = (("retry-after-ms", "1"),)
"""Sent with every scripted error so that the providers' retries (`retries.Retries`, which
honour ``retry-after-ms``) wait 1 ms, not their backoff, and do not slow tests down."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _input(call: FakeToolCall) -> dict[str, Any]:
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class FakeAnthropic(FakeHTTPServer):
    """A loopback server speaking the Messages protocol, scripted per call."""

    def __init__(self) -> None:
        super().__init__()
        self._calls = 0

    @property
    def base_url(self) -> str:
        """The API root to give the SDK (it appends ``/v1/messages``)."""
        return self.url

    def reply(
        self,
        text: str = "",
        *,
        tool_calls: Iterable[FakeToolCall] = (),
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        chunks: int = 3,
    ) -> None:
        """Queue the model's next answer (streamed as `chunks` text deltas when streamed)."""
        self.answer(FakeAnswer(text, tuple(tool_calls), prompt_tokens, completion_tokens, chunks))

    def answer(self, answer: FakeAnswer) -> None:
        """Queue a prepared answer."""
        self.push(lambda request: self.render(answer, request))

    def set_default(self, answer: Callable[[JsonValue], FakeAnswer]) -> None:
        """Answer every unscripted call with `answer(request body)`."""
        self.default = lambda request: self.render(answer(request.json()), request)

    def fail(
        self,
        status: int,
        message: str = "fake failure",
        *,
        times: int = 1,
        error_type: str | None = None,
    ) -> None:
        """Queue `times` HTTP error answers in Anthropic's error shape."""
        body = {
            "type": "error",
            "error": {
                "type": error_type or _ERROR_TYPES.get(status, "api_error"),
                "message": message,
            },
        }
        for _ in range(times):
            self.push(Reply.json(body, status=status, headers=RETRY_FAST))

    def stream_error(self, error_type: str, message: str, *, text: str = "") -> None:
        """Queue a stream that starts (with `text`, if any) and then carries an error event."""

        def broken(request: RecordedRequest) -> Reply:
            model = str(request.json().get("model", "fake-model"))
            events: list[tuple[str | None, JsonValue]] = [
                ("message_start", self._message_start(model, 10))
            ]
            if text:
                events += [
                    ("content_block_start", _block_start(0, {"type": "text", "text": ""})),
                    ("content_block_delta", _delta(0, {"type": "text_delta", "text": text})),
                ]
            error = {"type": "error", "error": {"type": error_type, "message": message}}
            events.append(("error", error))
            return Reply.sse(events)

        self.push(broken)

    def reply_with_events(
        self,
        text: str,
        events: Iterable[tuple[str, JsonValue]],
        *,
        usage_in_delta: bool = True,
    ) -> None:
        """Queue a streamed answer of `text` with `events` among its own, after its content
        blocks (event types added to the API after the SDK was written: Anthropic's
        versioning policy says clients ignore them); its message_delta has ``usage: null``
        unless `usage_in_delta` (as some Anthropic-compatible servers send it)."""
        answer = FakeAnswer(text)
        extra = tuple(events)
        self.push(
            lambda request: self.render(answer, request, extra=extra, usage_in_delta=usage_in_delta)
        )

    def reply_with_input_at_start(self, tool_calls: Iterable[FakeToolCall]) -> None:
        """Queue an answer whose tool calls, streamed, carry their whole input in their
        content_block_start, with no input_json_delta (as some Anthropic-compatible servers
        send them)."""
        answer = FakeAnswer("", tuple(tool_calls))
        self.push(lambda request: self.render(answer, request, input_at_start=True))

    def reply_unnamed(self, answer: FakeAnswer) -> None:
        """Queue an answer whose stream has no ``event:`` lines, each event's name in its
        data's ``type`` only (as some Anthropic-compatible servers send it)."""
        self.push(lambda request: self.render(answer, request, named=False))

    def drop_mid_answer(self, text: str, *, events: int = 2) -> None:
        """Queue a streamed answer of `text` whose connection is reset (RST) after its first
        `events` events (a crashed server, a proxy dropping the stream)."""
        answer = FakeAnswer(text)
        self.push(lambda request: self.render(answer, request).dropped_after(events))

    def hang_mid_answer(self, text: str, *, events: int = 2) -> None:
        """Queue a streamed answer of `text` that stops after its first `events` events and
        sends nothing more (the connection open) until the server closes."""
        answer = FakeAnswer(text)
        self.push(lambda request: self.render(answer, request).hung_after(events))

    def stall(self, seconds: float, text: str = "too late") -> None:
        """Queue an answer that starts only after `seconds` (a server past the deadline)."""
        answer = FakeAnswer(text)

        def late(request: RecordedRequest) -> Reply:
            reply = self.render(answer, request)
            return Reply(reply.status, reply.headers, reply.body, reply.chunks, delay_s=seconds)

        self.push(late)

    def cut_short(self, text: str, call: FakeToolCall | None = None) -> None:
        """Queue a stream that ends cleanly in the middle of the answer: `text`, then the first
        half of `call`'s input (if any), and neither message_delta nor message_stop."""

        def cut(request: RecordedRequest) -> Reply:
            model = str(request.json().get("model", "fake-model"))
            events: list[tuple[str | None, JsonValue]] = [
                ("message_start", self._message_start(model, 10)),
                ("content_block_start", _block_start(0, {"type": "text", "text": ""})),
            ]
            events += [
                ("content_block_delta", _delta(0, {"type": "text_delta", "text": piece}))
                for piece in split_in_two(text)
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
            if call is not None:
                block = {"type": "tool_use", "id": call.id or "toolu_cut", "name": call.name}
                half = split_in_two(call.arguments_text())[0]
                events.append(("content_block_start", _block_start(1, {**block, "input": {}})))
                delta = {"type": "input_json_delta", "partial_json": half}
                events.append(("content_block_delta", _delta(1, delta)))
            return Reply.sse(events)

        self.push(cut)

    def message_bodies(self) -> list[JsonValue]:
        """The JSON bodies of the Messages requests received, in order."""
        return [r.json() for r in self.requests if r.path.endswith("/v1/messages")]

    def _message_start(self, model: str, input_tokens: int) -> dict[str, Any]:
        return {
            "type": "message_start",
            "message": {
                "id": f"msg_fake_{self._calls}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }

    def render(
        self,
        answer: FakeAnswer,
        request: RecordedRequest,
        *,
        extra: Iterable[tuple[str, JsonValue]] = (),
        usage_in_delta: bool = True,
        input_at_start: bool = False,
        named: bool = True,
    ) -> Reply:
        """`answer` as the reply to `request`: an SSE stream if it asked for one, else JSON;
        a stream carries the `extra` events before its message_delta, whose usage is null
        unless `usage_in_delta` (`reply_with_events`), and its tool calls' input whole in
        their content_block_start when `input_at_start` (`reply_with_input_at_start`); its
        events without their ``event:`` line unless `named` (`reply_unnamed`)."""
        self._calls += 1
        body = request.json()
        model = str(body.get("model", "fake-model"))
        calls = [
            (call.id or f"toolu_fake_{self._calls}_{i}", call)
            for i, call in enumerate(answer.tool_calls)
        ]
        stop_reason = answer.stop or ("tool_use" if calls else "end_turn")
        if not body.get("stream"):
            content: list[dict[str, Any]] = []
            if answer.text:
                content.append({"type": "text", "text": answer.text})
            content += [
                {"type": "tool_use", "id": call_id, "name": call.name, "input": _input(call)}
                for call_id, call in calls
            ]
            return Reply.json(
                {
                    "id": f"msg_fake_{self._calls}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": answer.prompt_tokens,
                        "output_tokens": answer.completion_tokens,
                    },
                }
            )
        events: list[tuple[str | None, JsonValue]] = [
            ("message_start", self._message_start(model, answer.prompt_tokens)),
            ("ping", {"type": "ping"}),
        ]
        index = 0
        if answer.text:
            events.append(("content_block_start", _block_start(0, {"type": "text", "text": ""})))
            events += [
                ("content_block_delta", _delta(0, {"type": "text_delta", "text": piece}))
                for piece in answer.text_pieces()
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
            index = 1
        for call_id, call in calls:
            start = _input(call) if input_at_start else {}
            block = {"type": "tool_use", "id": call_id, "name": call.name, "input": start}
            events.append(("content_block_start", _block_start(index, block)))
            for piece in [] if input_at_start else split_in_two(call.arguments_text()):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(("content_block_delta", _delta(index, delta)))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        events += extra
        usage = {"output_tokens": answer.completion_tokens} if usage_in_delta else None
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": usage,
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return Reply.sse(events if named else [(None, data) for _, data in events])


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}
