"""How the `anthropic` provider reads an answer: a Message, or a stream's
events (`anthropic_provider` builds the requests and calls the API).

The provider reads a stream's bytes itself (`read_events`, through `answers.EventReading`),
not through the SDK. A stream's events of a type this reading does not know are
skipped, as Anthropic's versioning policy asks of clients (new event types may be
added), and so are its pings. A ``usage`` of null (in a message_start or a
message_delta, as some Anthropic-compatible servers send it) leaves the usage as it
was.

A tool_use block's ``input`` sent whole in its content_block_start (as some
Anthropic-compatible servers send it, with no input_json_delta) counts toward the
answer's bound (`answers.AnswerBound`) as its deltas would.

Some Anthropic-compatible servers send a stream's events without their ``event:``
line, the event's type in its data's ``type`` only: such an event is named by that
``type``, its data parsed once (`_unnamed`); unnamed data that is not a JSON object with a
type is skipped.

An ``error`` event is handed on as a `StreamError`, which the provider raises. A
streamed call answered with no event at all (a proxy's answer) ends with the error
object it is, as a `StreamError`, or with a `NoEvent` whose ``detail`` is its start
(`answers.StreamHead`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from anthropic import BaseModel as AnthropicModel
from anthropic.types import (
    InputJSONDelta,
    Message,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    TextBlock,
    ToolUseBlock,
)
from anthropic.types import TextDelta as AnthropicTextDelta
from anthropic.types import Usage as AnthropicUsage

from agent_gateway.llm.base import (
    Completion,
    JsonObject,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
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
    unique,
    unique_ids,
)
from agent_gateway.llm.tool_arguments import parse_tool_arguments


@dataclass(frozen=True, slots=True)
class StreamError:
    """An ``error`` event of a stream (or the error object a stream with no event is): its
    data, read as JSON when it is JSON."""

    body: object


@dataclass(frozen=True, slots=True)
class NoEvent:
    """The end of a stream with no event that is not an error object (see the module
    docstring): `detail`, what it began with."""

    detail: str
    type: str = NO_EVENT


async def read_events(pieces: AsyncIterator[bytes], bound: AnswerBound) -> AsyncIterator[object]:
    """The events of a stream's bytes (`pieces`): each of a type `StreamedMessage` reads
    built as its event type (`answers.built`), an error event as a `StreamError`, and a
    stream with no event ended as the module docstring says; pings, events of another type
    and unnamed data that is not an event are skipped.

    Raises:
        ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, one event passed `bound`'s limit
            (`answers.EventReading`).
        json.JSONDecodeError, RecursionError: a named event's data is not JSON.
    """
    reading = EventReading(bound)
    async for event in reading.events(pieces):
        read = _unnamed(event.data) if event.name is None else _named(event.name, event.data)
        if read is not None:
            yield read
    ending = reading.without_event()
    if ending is not None:
        detail, error = ending
        yield NoEvent(detail) if error is None else StreamError(json.loads(error))


def _named(name: str, data: str) -> object | None:
    """The event `name` whose data is `data`, as `read_events` yields it (None: skipped).

    Raises:
        json.JSONDecodeError, RecursionError: `data` is not JSON.
    """
    if name == "error":
        return StreamError(_json_or_text(data))
    return None if name == "ping" else _event(json.loads(data))


def _unnamed(data: str) -> object | None:
    """The event sent without its ``event:`` line whose data is `data`, named by the
    ``type`` in it, as `read_events` yields it; None when `data` is not a JSON object with
    a type (skipped), or it names a ping."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str) or kind == "ping":
        return None
    return StreamError(value) if kind == "error" else _event(value)


def _event(data: object) -> object | None:
    """`data` built as the event type its ``type`` says (`answers.built`); None for a type
    `StreamedMessage` does not read."""
    kind = _EVENT_TYPES.get(data.get("type")) if isinstance(data, dict) else None
    return None if kind is None else built(kind, data)


def _json_or_text(data: str) -> object:
    """`data` read as JSON, or as it is when it is not JSON."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return data


def read_message(response: Message) -> Completion:
    """The completion a Message holds.

    Raises:
        AttributeError, TypeError: a part of it is not of the protocol's type.
    """
    text: list[str] = []
    calls: list[ToolCallSpec] = []
    for block in response.content:
        if isinstance(block, TextBlock):
            text.append(text_of(block.text))
        elif isinstance(block, ToolUseBlock):
            name = block.name or "unknown_tool"
            calls.append(ToolCallSpec(block.id, name, _arguments(block.input, name)))
    finish = finish_of(text_of(response.stop_reason) or None)
    return Completion("".join(text), unique_ids(calls), _usage(response.usage), finish)


def _arguments(value: object, tool: str) -> JsonObject:
    """A tool_use block's input: the object, else what it holds kept raw. An object is read
    again as text: one holding what the SDK's json took and JSON has not (NaN, Infinity,
    1e999) is kept raw, as `parse_tool_arguments` keeps such text."""
    text = _input_text(value)
    return parse_tool_arguments(text, tool=tool) if text.strip() else {}


def _input_text(value: object) -> str:
    """A tool_use block's input as JSON text (as sent when it is text)."""
    return value if isinstance(value, str) else json.dumps(value)


def _usage(usage: AnthropicUsage) -> Usage:
    prompt = (
        (usage.input_tokens or 0)
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    completion = usage.output_tokens or 0
    return Usage(prompt, completion, prompt + completion)


_EVENT_TYPES: dict[object, type[AnthropicModel]] = {
    "message_start": RawMessageStartEvent,
    "content_block_start": RawContentBlockStartEvent,
    "content_block_delta": RawContentBlockDeltaEvent,
    "content_block_stop": RawContentBlockStopEvent,
    "message_delta": RawMessageDeltaEvent,
    "message_stop": RawMessageStopEvent,
}
"""The types of the stream events an answer is read from (any other is skipped)."""


@dataclass(slots=True)
class _StreamUsage:
    """Usage as a stream reports it: at message_start, then running totals in message_delta."""

    input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0

    def start(self, usage: AnthropicUsage | None) -> None:
        if usage is None:
            return
        self.input = usage.input_tokens or 0
        self.cache_creation = usage.cache_creation_input_tokens or 0
        self.cache_read = usage.cache_read_input_tokens or 0
        self.output = usage.output_tokens or 0

    def delta(self, usage: MessageDeltaUsage | None) -> None:
        if usage is None:
            return
        if usage.input_tokens is not None:
            self.input = usage.input_tokens
        if usage.cache_creation_input_tokens is not None:
            self.cache_creation = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens
        if usage.output_tokens is not None:
            self.output = usage.output_tokens

    def total(self) -> Usage:
        prompt = self.input + self.cache_creation + self.cache_read
        return Usage(prompt, self.output, prompt + self.output)


@dataclass(slots=True)
class StreamedMessage:
    """What a stream has said so far: text, tool calls (whole and open), usage, its end; its
    text and arguments counted by `bound` (`add` raises its RESOURCE_EXHAUSTED
    LLM_ANSWER_TOO_LARGE past the limit)."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCallSpec] = field(default_factory=list)
    open_calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: _StreamUsage = field(default_factory=_StreamUsage)
    taken: set[str] = field(default_factory=set)
    stop_reason: str | None = None
    stopped: bool = False
    bound: AnswerBound = field(default_factory=lambda: AnswerBound("anthropic", RECORD_BYTES))

    def add(self, event: object) -> StreamEvent | None:
        """Fold `event` in; the text delta or the tool call it completes, if any.

        Raises:
            AttributeError, TypeError: a part of it is not of the protocol's type.
        """
        if getattr(event, "type", None) not in _EVENT_TYPES:
            return None  # an event type added after this was written (module docstring)
        if isinstance(event, RawMessageStartEvent):
            self.usage.start(event.message.usage)
        elif isinstance(event, RawContentBlockStartEvent):
            return self._start(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            return self._delta(event)
        elif isinstance(event, RawContentBlockStopEvent):
            partial = self.open_calls.pop(event.index, None)
            if partial is not None:
                return ToolCallEvent(self._close(partial))
        elif isinstance(event, RawMessageDeltaEvent):
            self.usage.delta(event.usage)
            if event.delta.stop_reason:
                self.stop_reason = text_of(event.delta.stop_reason)
                self.stopped = True
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True
        return None

    def unclosed(self) -> list[ToolCallSpec]:
        """The tool calls whose blocks never closed, finished as they are."""
        calls = [self._close(self.open_calls[index]) for index in sorted(self.open_calls)]
        self.open_calls.clear()
        return calls

    def _start(self, event: RawContentBlockStartEvent) -> StreamEvent | None:
        block = event.content_block
        if isinstance(block, ToolUseBlock):
            name = block.name or "unknown_tool"
            text = _input_text(block.input)
            self.bound.add(text)  # an input sent whole at the start counts as its deltas do
            self.open_calls[event.index] = _PartialCall(block.id, name, _arguments(text, name))
        elif isinstance(block, TextBlock) and block.text:
            return self._said(text_of(block.text))
        return None

    def _delta(self, event: RawContentBlockDeltaEvent) -> StreamEvent | None:
        delta = event.delta
        if isinstance(delta, AnthropicTextDelta) and delta.text:
            return self._said(text_of(delta.text))
        if isinstance(delta, InputJSONDelta) and event.index in self.open_calls:
            piece = text_of(delta.partial_json)
            self.bound.add(piece)
            self.open_calls[event.index].json.append(piece)
        return None

    def _said(self, text: str) -> TextDelta:
        self.bound.add(text)
        self.text.append(text)
        return TextDelta(text)

    def _close(self, partial: _PartialCall) -> ToolCallSpec:
        call = unique(partial.finish(len(self.calls)), self.taken)
        self.calls.append(call)
        return call


@dataclass(slots=True)
class _PartialCall:
    """A tool_use block being streamed: its start, then its input JSON in pieces."""

    id: str
    name: str
    start_input: JsonObject
    json: list[str] = field(default_factory=list)

    def finish(self, position: int) -> ToolCallSpec:
        """The whole call; `position` (its place among the answer's calls) names an id-less one."""
        name = self.name or "unknown_tool"
        text = "".join(self.json)
        arguments = parse_tool_arguments(text, tool=name) if text else self.start_input
        return ToolCallSpec(self.id or f"tool_{position}", name, arguments)
