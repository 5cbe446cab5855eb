"""A fake OpenAI-compatible server: chat completions, plain JSON or server-sent events.

Point the `openai` SDK (or ``STELLO_OPENAI_BASE_URL``) at `FakeOpenAI.base_url`
and script what the model answers; each scripted answer is rendered as JSON or
as an SSE stream, whichever the request asks for (``"stream": true``), with a
usage chunk when ``stream_options.include_usage`` is set::

    async with FakeOpenAI() as fake:
        fake.reply("hello")                                   # the next call's answer
        fake.reply(tool_calls=[FakeToolCall("search", {"q": "x"}, id="call_1")])
        fake.fail(429, "slow down")                           # one HTTP error answer
        fake.fail(500, times=3)                               # three of them (retries)
        fake.stall(5.0)                                       # a reply 5 s late
        fake.drop_mid_answer("hello there")                   # connection reset mid-stream
        fake.hang_mid_answer("hello there")                   # nothing more after 2 events
        fake.reply_after_empty_events("hi")  # after `retry:`, `id:`, empty `data:` events
        fake.fail_in_answer({"message": "m", "code": 400})    # an error object in a 200 answer
        fake.reply_with_object_arguments(calls)  # arguments as a JSON object, not text (TGI)
        fake.cut_short("half an ans", FakeToolCall("f", {"a": 1}))  # no finish_reason, no [DONE]
        fake.reply_unfinished("hello")  # no finish_reason, but [DONE] (some vLLM, llama.cpp)
        fake.reply_at_one_index(calls)  # each call whole, all at index 0 (Ollama, LiteLLM)
        fake.answer(FakeAnswer(stop="content_filter"))  # nothing, stopped by a content filter
        fake.set_default(lambda body: FakeAnswer("always"))   # when nothing is scripted
        ...
        fake.chat_bodies()  # the JSON bodies received, in order

Unscripted requests (with no default set) get a 501 that says so. Raw replies
(`Reply.sse`, `Reply.json`) can be pushed with `push` for wire-level cases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
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

__all__ = ["FakeAnswer", "FakeOpenAI", "FakeToolCall", "Reply", "chunk"]

CREATED = 1_700_000_000
RETRY_FAST = (("retry-after-ms", "1"),)
"""Sent with every scripted error so that the providers' retries (`retries.Retries`, which
honour ``retry-after-ms``) wait 1 ms, not their backoff, and do not slow tests down."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def chunk(
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    model: str = "fake-model",
    index: int = 0,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` carrying `delta` (to build raw streams by hand)."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish_reason}],
    }


class FakeOpenAI(FakeHTTPServer):
    """A loopback server speaking the chat completions protocol, scripted per call."""

    def __init__(self) -> None:
        super().__init__()
        self._calls = 0

    @property
    def base_url(self) -> str:
        """The API root to give the SDK (``.../v1``)."""
        return f"{self.url}/v1"

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
        """Queue `times` HTTP error answers in OpenAI's error shape."""
        body = {
            "error": {
                "message": message,
                "type": error_type or _ERROR_TYPES.get(status, "server_error"),
                "param": None,
                "code": None,
            }
        }
        for _ in range(times):
            self.push(Reply.json(body, status=status, headers=RETRY_FAST))

    def drop_mid_answer(self, text: str, *, events: int = 2) -> None:
        """Queue a streamed answer of `text` whose connection is reset (RST) after its first
        `events` events (a crashed server, a proxy dropping the stream)."""
        answer = FakeAnswer(text)
        self.push(lambda request: self.render(answer, request).dropped_after(events))

    def reply_with_object_arguments(self, tool_calls: Iterable[FakeToolCall]) -> None:
        """Queue an answer whose tool calls carry their arguments as a JSON object, not as
        JSON text (Hugging Face TGI; llama.cpp's server with ``--tool-args-object``); a
        stream sends each call whole in one chunk."""
        answer = FakeAnswer("", tuple(tool_calls))
        self.push(lambda request: self.render(answer, request, object_arguments=True))

    def fail_in_answer(self, error: dict[str, Any], *, flat: bool = False) -> None:
        """Queue an answer of HTTP 200 that holds an error object instead of the answer: as the
        body of a call, or as an event after a first chunk of a streamed one (as some proxies,
        vLLM and SGLang send one); under ``"error"``, or `flat` as the body itself with
        ``"object": "error"`` (older vLLM)."""
        body = {"object": "error", **error} if flat else {"error": error}

        def failing(request: RecordedRequest) -> Reply:
            if not request.json().get("stream"):
                return Reply.json(body)
            model = str(request.json().get("model", "fake-model"))
            return Reply.sse([(None, chunk({"content": "par"}, model=model)), (None, body)])

        self.push(failing)

    def reply_after_empty_events(self, text: str) -> None:
        """Queue a streamed answer of `text` after events with no data, which the SSE
        standard says are not dispatched: a ``retry:`` alone, an ``id:`` alone, an empty
        ``data:`` (a keep-alive some proxies send)."""
        answer = FakeAnswer(text)
        empty = (b"retry: 3000\n\n", b"id: 7\n\n", b"data:\n\n", b": keep-alive\n\n")

        def with_empty(request: RecordedRequest) -> Reply:
            reply = self.render(answer, request)
            return replace(reply, chunks=(*empty, *(reply.chunks or ())))

        self.push(with_empty)

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

    def reply_unfinished(self, text: str = "", *, tool_calls: Iterable[FakeToolCall] = ()) -> None:
        """Queue an answer streamed as some compatible servers (vLLM, llama.cpp, proxies) do:
        no chunk carries a finish_reason, and ``[DONE]`` ends the stream."""
        answer = FakeAnswer(text, tuple(tool_calls))
        self.push(lambda request: self.render(answer, request, finish_reason=False))

    def reply_at_one_index(self, tool_calls: Iterable[FakeToolCall]) -> None:
        """Queue an answer whose parallel tool calls are streamed as Ollama (and LiteLLM in
        front of it) streams them: each call whole in one chunk, every one at index 0, told
        apart by its id only."""
        answer = FakeAnswer("", tuple(tool_calls))
        self.push(lambda request: self.render(answer, request, one_index=True))

    def cut_short(self, text: str, call: FakeToolCall | None = None, *, done: bool = False) -> None:
        """Queue a stream that ends cleanly in the middle of the answer: `text`, then the first
        half of `call`'s arguments (if any), and no finish_reason; ``[DONE]`` only when
        `done`."""

        def cut(request: RecordedRequest) -> Reply:
            model = str(request.json().get("model", "fake-model"))
            events: list[tuple[str | None, JsonValue]] = [
                (None, chunk({"content": piece}, model=model)) for piece in split_in_two(text)
            ]
            if call is not None:
                opening = {
                    "index": 0,
                    "id": call.id or "call_cut",
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                half = split_in_two(call.arguments_text())[0]
                fragment = {"index": 0, "function": {"arguments": half}}
                events.append((None, chunk({"tool_calls": [opening]}, model=model)))
                events.append((None, chunk({"tool_calls": [fragment]}, model=model)))
            if done:
                events.append((None, "[DONE]"))
            return Reply.sse(events)

        self.push(cut)

    def chat_bodies(self) -> list[JsonValue]:
        """The JSON bodies of the chat completion requests received, in order."""
        return [r.json() for r in self.requests if r.path.endswith("/chat/completions")]

    def render(
        self,
        answer: FakeAnswer,
        request: RecordedRequest,
        *,
        finish_reason: bool = True,
        one_index: bool = False,
        object_arguments: bool = False,
    ) -> Reply:
        """`answer` as the reply to `request`: an SSE stream if it asked for one, else JSON;
        a stream's chunks carry no finish_reason unless `finish_reason`; with `one_index`,
        each tool call comes whole in one chunk at index 0 (`reply_at_one_index`); with
        `object_arguments`, arguments go as the JSON object itself, streamed whole
        (`reply_with_object_arguments`)."""
        self._calls += 1
        body = request.json()
        model = str(body.get("model", "fake-model"))
        calls = [
            (call.id or f"call_{self._calls}_{i}", call) for i, call in enumerate(answer.tool_calls)
        ]
        finish = answer.stop or ("tool_calls" if calls else "stop")
        usage = {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": call.arguments
                            if object_arguments
                            else call.arguments_text(),
                        },
                    }
                    for call_id, call in calls
                ]
            return Reply.json(
                {
                    "id": f"chatcmpl-fake-{self._calls}",
                    "object": "chat.completion",
                    "created": CREATED,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        events: list[tuple[str | None, JsonValue]] = [
            (None, chunk({"role": "assistant", "content": ""}, model=model))
        ]
        events += [(None, chunk({"content": piece}, model=model)) for piece in answer.text_pieces()]
        whole = one_index or object_arguments
        for i, (call_id, call) in enumerate(calls):
            arguments = call.arguments if object_arguments else call.arguments_text()
            opening = {
                "index": 0 if one_index else i,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments if whole else ""},
            }
            events.append((None, chunk({"tool_calls": [opening]}, model=model)))
            if whole:
                continue
            for piece in split_in_two(call.arguments_text()):
                fragment = {"index": i, "function": {"arguments": piece}}
                events.append((None, chunk({"tool_calls": [fragment]}, model=model)))
        if finish_reason:
            events.append((None, chunk({}, finish_reason=finish, model=model)))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = chunk({}, model=model)
            usage_chunk["choices"] = []
            usage_chunk["usage"] = usage
            events.append((None, usage_chunk))
        events.append((None, "[DONE]"))
        return Reply.sse(events)
