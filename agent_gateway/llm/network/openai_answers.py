"""How the `openai` provider reads an answer: a chat completion, or a stream's
chunks (`openai_provider` builds the requests and calls the API).

A stream's end. An answer is whole when a chunk carries its ``finish_reason``.
Some compatible servers (vLLM, llama.cpp and proxy builds) send none and end
the stream with ``data: [DONE]`` alone: after at least one chunk, and with
every tool call whole (a name, and arguments that are blank or a JSON object),
that ``[DONE]`` ends the answer as ``stop`` (``tool_calls`` when calls came).
A stream that ends with neither (a connection closed mid-answer) is not whole.
`read_chunks` (the provider reads a stream's bytes with it, not through the SDK)
hands ``[DONE]`` on as a `DONE_MARK` chunk for `StreamedAnswer` to see, then reads
what is left of the stream for a short while (`DRAIN_S`), for its connection's sake.

An error in an answer of HTTP 200. Some proxies answer a call with a body that
is an error object, and vLLM and SGLang end a stream with an error event whose
``code`` is an HTTP status (``{"error": {"code": 400, "type": "BadRequestError"}}``;
older vLLM sends the object flat, ``{"object": "error", "message": ...}``).
`error_in` finds such an object and `status_of_error` says what HTTP status it
stands for: 429 for a rate limit or quota, its code when that is an error status,
500 otherwise (`remote` maps the status).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from openai import BaseModel
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
)
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from agent_gateway.llm.base import (
    Completion,
    ToolCallSpec,
    Usage,
)
from agent_gateway.llm.network.answers import (
    NO_EVENT,
    RECORD_BYTES,
    AnswerBound,
    EventReading,
    built,
    finish_of,
    text_of,
    unique_ids,
)
from agent_gateway.llm.tool_arguments import parse_tool_arguments
from stello.errors import ResourceExhausted
from stello.formats import json_text

DONE_MARK = "stello.done"
"""The `object` of the chunk `read_chunks` hands a stream's ``[DONE]`` on as."""
DONE_FINISH = "stop"
"""The finish a ``[DONE]`` without any finish_reason gives an answer with no tool call."""
DRAIN_S = 0.1
"""The longest a stream is read after its ``[DONE]`` (the SDK's drain timeout)."""
RATE_LIMITED = frozenset({"rate_limit_exceeded", "insufficient_quota"})
"""The error types (or codes) of a rate limit or of a spent quota."""


def error_in(answer: BaseModel) -> dict[str, Any] | None:
    """The error object an answer of HTTP 200 (a chat completion, a chunk) holds instead of
    the answer, under ``"error"`` or flat (see the module docstring); None when it holds
    none."""
    extra = answer.model_extra or {}
    inner = extra.get("error")
    if isinstance(inner, dict):
        return inner
    if isinstance(inner, str):
        return {"message": inner}
    if getattr(answer, "object", None) == "error":
        return extra
    return None


def status_of_error(kind: object, code: object) -> int:
    """The HTTP status an error object of `kind` (its type) and `code` stands for: 429 for a
    rate limit or a quota, its code when that is an HTTP error status, else 500."""
    if kind in RATE_LIMITED or code in RATE_LIMITED:
        return 429
    try:
        status = int(str(code))
    except ValueError:
        return 500
    return status if 400 <= status <= 599 else 500


async def read_chunks(pieces: AsyncIterator[bytes], bound: AnswerBound) -> AsyncIterator[object]:
    """The chunks of a stream's bytes (`pieces`): each event's JSON built as a
    `ChatCompletionChunk` (`answers.built`: any other JSON value as it is), and a `DONE_MARK`
    chunk for its ``[DONE]``, the last (what follows is read and dropped, `_drained`).

    An answer with no event at all (HTTP 200 from a proxy: a page, a JSON error object)
    ends with one chunk: the error object itself, when it is one (`error_in` reads it),
    else an `answers.NO_EVENT` chunk whose ``detail`` is its start.

    Raises:
        ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, one event passed `bound`'s limit
            (`answers.EventReading`).
        json.JSONDecodeError, RecursionError: an event's data is not JSON.
    """
    reading = EventReading(bound)
    events = reading.events(pieces)
    async for event in events:
        if event.data.startswith("[DONE]"):
            yield ChatCompletionChunk.model_construct(object=DONE_MARK, choices=[])
            await _drained(events)
            return
        yield built(ChatCompletionChunk, json.loads(event.data))
    ending = reading.without_event()
    if ending is not None:
        detail, error = ending
        mark = {"object": NO_EVENT, "choices": [], "detail": detail}
        yield built(ChatCompletionChunk, mark if error is None else json.loads(error))


async def _drained(events: AsyncIterator[object]) -> None:
    """`events` read to their end and dropped, for at most `DRAIN_S`: what is left of a
    stream after its ``[DONE]`` (its body's end, mostly), read as the SDK read it so that
    the connection takes the next call (HTTP/1.1 keeps only a connection whose answer was
    read to its end). A stream that sends more, or that stays open, is closed with its
    connection; the answer is whole whatever comes, or breaks, after its ``[DONE]``."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError, ResourceExhausted):
        async with asyncio.timeout(DRAIN_S):
            async for _ in events:
                pass


def read_completion(response: ChatCompletion) -> tuple[Completion, str | None]:
    """The completion a chat completion holds, and its finish_reason.

    Raises:
        AttributeError, TypeError: a part of it is not of the protocol's type.
    """
    usage = _usage(response.usage)
    if not response.choices:
        return Completion(content="", usage=usage), None
    choice = response.choices[0]
    message = choice.message
    calls: list[ToolCallSpec] = []
    for i, call in enumerate(message.tool_calls or ()):
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: never offered
            continue
        name = function.name or "unknown_tool"
        calls.append(
            ToolCallSpec(
                id=call.id or f"tool_{i}",
                name=name,
                arguments=parse_tool_arguments(_arguments_text(function.arguments), tool=name),
            )
        )
    content = text_of(message.content or message.refusal)
    finish = choice.finish_reason
    completion = Completion(
        content=content, tool_calls=unique_ids(calls), usage=usage, finish_reason=finish_of(finish)
    )
    return completion, finish


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    return Usage(prompt, completion, usage.total_tokens or prompt + completion)


@dataclass(slots=True)
class StreamedAnswer:
    """What a stream has said so far: text, tool-call deltas, usage, finish_reason, and
    whether its ``[DONE]`` came after a chunk; its text and arguments counted by `bound`
    (`add` raises its RESOURCE_EXHAUSTED LLM_ANSWER_TOO_LARGE past the limit)."""

    text: list[str] = field(default_factory=list)
    calls: _ToolCallAssembler = field(default_factory=lambda: _ToolCallAssembler())
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    chunks: int = 0
    done: bool = False
    bound: AnswerBound = field(default_factory=lambda: AnswerBound("openai", RECORD_BYTES))

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Fold `chunk` in; its text ('' for none).

        Raises:
            AttributeError, TypeError: a part of it is not of the protocol's type.
        """
        if chunk.object == DONE_MARK:
            self.done = self.chunks > 0
            return ""
        self.chunks += 1
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        pieces: list[str] = []
        for choice in chunk.choices:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = getattr(choice, "delta", None)
            if delta is not None:
                for call in delta.tool_calls or ():
                    self.calls.add(call)
                    if call.function is not None and call.function.arguments:
                        self.bound.add(_arguments_text(call.function.arguments))
                pieces.append(text_of(delta.content or delta.refusal))
            if choice.finish_reason:
                self.finish_reason = text_of(choice.finish_reason)
        piece = "".join(pieces)
        if piece:
            self.bound.add(piece)
            self.text.append(piece)
        return piece

    def finish(self) -> str | None:
        """How the answer ended: its finish_reason, else the one its ``[DONE]`` implies
        (see the module docstring); None when it is not whole."""
        if self.finish_reason is not None:
            return self.finish_reason
        if not self.done or not self.calls.whole():
            return None
        return "tool_calls" if self.calls else DONE_FINISH


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallAssembler:
    """Builds whole tool calls from streamed deltas, keyed by their index.

    A delta at an index whose call is whole (a name, arguments blank or a JSON object) that
    brings another id and a name starts another call: Ollama, and LiteLLM in front of it,
    stream parallel calls whole, every one at index 0, told apart by their ids only. Calls
    are kept by (index, how many came at that index before), so they finish in index order,
    then in the order they came.
    """

    def __init__(self) -> None:
        self._calls: dict[tuple[int, int], _PartialCall] = {}
        self._open: dict[int, tuple[int, int]] = {}
        """The call each index's deltas go to now."""

    def add(self, delta: ChoiceDeltaToolCall) -> None:
        """Fold one delta into the call at its index."""
        index = getattr(delta, "index", None)
        if not isinstance(index, int):
            # Some compatible servers omit the index: a new id opens a new call.
            known = [i for i, k in self._open.items() if delta.id and self._calls[k].id == delta.id]
            if known:
                index = known[0]
            elif delta.id or not self._open:
                index = len(self._open)
            else:
                index = max(self._open)
        function = delta.function
        key = self._open.get(index)
        if key is None or _starts_another(self._calls[key], delta):
            key = (index, 0 if key is None else key[1] + 1)
            self._open[index] = key
            self._calls[key] = _PartialCall()
        call = self._calls[key]
        if delta.id and not call.id:
            call.id = delta.id
        if function is not None:
            if function.name and not call.name:
                call.name = function.name
            if function.arguments:
                call.arguments.append(_arguments_text(function.arguments))

    def __len__(self) -> int:
        return len(self._calls)

    def whole(self) -> bool:
        """Whether every call has a name and arguments that are blank or a JSON object."""
        return all(call.name and _json_object(call.arguments) for call in self._calls.values())

    def finish(self) -> tuple[ToolCallSpec, ...]:
        """The assembled calls, in index order (then as they came), their ids unique."""
        specs = []
        for position, key in enumerate(sorted(self._calls)):
            call = self._calls[key]
            name = call.name or "unknown_tool"
            specs.append(
                ToolCallSpec(
                    id=call.id or f"tool_{position}",
                    name=name,
                    arguments=parse_tool_arguments("".join(call.arguments), tool=name),
                )
            )
        return unique_ids(specs)


def _arguments_text(value: object) -> str:
    """A tool call's arguments as JSON text: as sent, or, sent as a JSON object or array
    rather than as text (Hugging Face TGI, llama.cpp's server with --tool-args-object),
    that value written as JSON (`parse_tool_arguments` reads it back, strictly).

    Raises:
        TypeError: they are something else (an answer that does not follow the protocol).
    """
    if isinstance(value, dict | list):
        return json.dumps(value)
    return text_of(value)


def _starts_another(call: _PartialCall, delta: ChoiceDeltaToolCall) -> bool:
    """Whether `delta`, at the index of `call`, starts another call (see `_ToolCallAssembler`)."""
    function = delta.function
    return bool(
        delta.id
        and call.id
        and delta.id != call.id
        and function is not None
        and function.name
        and call.name
        and _json_object(call.arguments)
    )


def _json_object(pieces: list[str]) -> bool:
    """Whether the joined `pieces` are blank or a JSON object (arguments not cut short)."""
    text = "".join(pieces)
    if not text.strip():
        return True
    try:
        return isinstance(json_text.loads(text), dict)
    except ValueError:
        return False
