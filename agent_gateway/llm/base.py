"""The provider interface every LLM provider implements (DESIGN §6).

A provider turns a list of `LLMMessage` into a `Completion`, either at once
(`complete`) or as a stream of events that ends with exactly one `Done`
(`stream`). Tool definitions go out as `ToolSpec`; tool calls come back as
`ToolCallSpec`.

Errors are the kernel's domain errors, raised by the provider at its boundary:

- `stello.errors.Unavailable`: the endpoint is down or answered 5xx;
- `stello.errors.ResourceExhausted`: rate limit or quota;
- `stello.errors.FailedPrecondition`: the provider rejected the key or model;
- `stello.errors.DeadlineExceeded`: the provider timed out.

Cancellation is plain asyncio cancellation: a cancelled `complete` or an
abandoned `stream` must not leave work running.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
"""The role of a message or a stored record."""

JsonObject: TypeAlias = dict[str, Any]
"""A decoded JSON object (tool arguments, tool parameter schemas)."""


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """One tool call made by the model: its provider-given id, the tool and its arguments."""

    id: str
    name: str
    arguments: JsonObject = field(default_factory=dict)

    def arguments_json(self) -> str:
        """The arguments as compact JSON text (the wire form of `ToolCall.arguments_json`)."""
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LLMMessage:
    """One message sent to the model.

    `tool_calls` is set on assistant messages only, `tool_call_id` and
    `is_error` on tool messages only (`is_error`: the tool failed and
    `content` describes the error).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCallSpec, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one call (zero when the provider does not report it)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        """The usage of two calls together (a turn sums its LLM calls)."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter"]
"""Why the model's answer ended, in the provider's own terms made one: it was done
(``stop``), it reached max_tokens (``length``), it called tools (``tool_calls``), the
provider's content filter stopped it (``content_filter``: OpenAI's and Azure's
``content_filter``, Anthropic's ``refusal``)."""


@dataclass(frozen=True, slots=True)
class Completion:
    """The model's answer: its text ('' when it only calls tools), tool calls and usage,
    and why it ended (None: the provider did not say, or said something not known here)."""

    content: str
    tool_calls: tuple[ToolCallSpec, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: FinishReason | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, as the provider produces it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A tool call, emitted once it is complete."""

    call: ToolCallSpec


@dataclass(frozen=True, slots=True)
class Done:
    """The last event of a stream: the whole completion (text = the deltas joined)."""

    completion: Completion


StreamEvent: TypeAlias = TextDelta | ToolCallEvent | Done
"""What `LLMProvider.stream` yields."""


class LLMProvider(Protocol):
    """An LLM behind one interface (echo, OpenAI-compatible, Anthropic)."""

    @property
    def max_context_tokens(self) -> int:
        """The model's context window, in tokens; compression starts at 80% of it."""
        ...

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer `messages` in one piece, offering `tools` (None or empty: no tools), in at
        most `max_tokens` tokens (None: the provider's own limit)."""
        ...

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Answer `messages` as text deltas and tool calls, ending with exactly one `Done`
        (`tools` and `max_tokens` as for `complete`)."""
        ...


async def collect(events: AsyncIterator[StreamEvent]) -> Completion:
    """Consume a stream and return its final completion.

    Raises:
        RuntimeError: the stream ended without a `Done` event (a provider bug).
    """
    async for event in events:
        if isinstance(event, Done):
            return event.completion
    raise RuntimeError("LLM stream ended without a Done event")


def estimate_tokens(text: str) -> int:
    """The token estimate of spec §4.7: ceil(len(text) / 4)."""
    return (len(text) + 3) // 4
