"""What the network providers (openai, anthropic) make sure of in a model's answer.

Tool-call ids are unique within an answer. Each call is answered by its own tool
result, matched by id, so two calls sharing an id (some OpenAI-compatible servers
reuse them) could not be answered apart. A repeated id, and an id a missing one was
given (``tool_<i>``) that is already taken, gets the first free suffix ``_2``,
``_3``, ... (letters, digits, ``_`` and ``-`` only, as Anthropic requires of ids).
The renamed id is the one stored with the call and answered by its result, so the
model sees the same id on the call and on its result in the next round.

A truncated answer (the model reached max_tokens) is kept as it is, and logged:
`log_stop` says which call was cut and at how many tokens. So is an answer a
provider's safety filter stopped (OpenAI's and Azure's ``content_filter``,
Anthropic's ``refusal``): what came before the stop is kept, and the stop logged.

A streamed call answered (HTTP 200) with no server-sent event at all is a
proxy's answer: an error object in JSON, or a page. `StreamHead` keeps the
start of a stream's bytes so that the providers' stream readers can end such a
stream with the error object (the provider raises it) or with a `NO_EVENT` mark
whose detail, logged, is what came.

An answer's size is bounded (`AnswerBound`): the gateway stores an answer
in one record, of at most STELLO_MAX_RECORD_BYTES (`record_bytes`), so a stream
whose text and tool-call arguments pass `answer_limit` (twice that, plus
`ANSWER_MARGIN_BYTES`: streamed arguments may carry whitespace and escapes their
stored form does not) cannot be stored, whatever follows. Its reading stops
there, the connection is closed, and the call is RESOURCE_EXHAUSTED
LLM_ANSWER_TOO_LARGE, as an answer found too large once whole is
(`turns.answer_size`). The providers read a stream's events themselves
(`EventReading`, through `sse.Parser`, not the SDKs' decoders, which keep a line and
an event's ``data:`` lines with no bound): an event that grows past the same limit (one
endless line) is stopped. The SDKs
read the body of a call that is not streamed whole, with no bound either: the
providers read it themselves (`AnswerBound.whole`, its bytes as decompressed) and
stop it past the same limit, JSON and all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import TypeVar

import pydantic

from agent_gateway.llm.base import FinishReason, ToolCallSpec
from agent_gateway.llm.network import sse
from stello.errors import ResourceExhausted, new_error_id
from stello.reasons import LLM_ANSWER_TOO_LARGE
from stello.settings import MIB

logger = logging.getLogger(__name__)

TRUNCATED = frozenset({"length", "max_tokens"})
"""The stop reasons of an answer cut at max_tokens (OpenAI's, Anthropic's)."""
FILTERED = frozenset({"content_filter", "refusal"})
"""The stop reasons of an answer a safety filter stopped (OpenAI's and Azure's, Anthropic's)."""


_FINISHES: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}


def finish_of(reason: str | None) -> FinishReason | None:
    """The `FinishReason` a provider's finish_reason (OpenAI) or stop_reason (Anthropic)
    stands for; None for none, or for one not known here."""
    return None if reason is None else _FINISHES.get(reason)


def unique(call: ToolCallSpec, taken: set[str]) -> ToolCallSpec:
    """`call`, its id given the first ``_<n>`` suffix (n >= 2) not in `taken` when it is taken;
    the id it ends with is added to `taken`."""
    call_id = call.id
    n = 2
    while call_id in taken:
        call_id = f"{call.id}_{n}"
        n += 1
    taken.add(call_id)
    if call_id == call.id:
        return call
    logger.warning(
        "the model's answer has two tool calls with the id %r; the second is now %r",
        call.id,
        call_id,
    )
    return replace(call, id=call_id)


def unique_ids(calls: Iterable[ToolCallSpec]) -> tuple[ToolCallSpec, ...]:
    """`calls` in order, each id made unique among them (see the module docstring)."""
    taken: set[str] = set()
    return tuple(unique(call, taken) for call in calls)


Model = TypeVar("Model", bound=pydantic.BaseModel)


def built(kind: type[Model], value: object) -> Model | object:
    """`value` (JSON, read) built as `kind` when it is an object, leniently as the SDKs build
    an answer (their models' ``model_construct``: a part of another type is kept as it came);
    any other value as it is."""
    return kind.model_construct(**value) if isinstance(value, dict) else value


def text_of(value: object) -> str:
    """`value` when it is text ('' for none): an answer's text field as the protocol types it.

    Raises:
        TypeError: it is something else (an answer that does not follow the protocol).
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"text expected, got {type(value).__name__}")
    return value


def log_stop(provider: str, reason: str | None, max_tokens: int | None) -> None:
    """Log an answer the model stopped for `reason` when that means it was cut short (at
    max_tokens, or by a content filter)."""
    if reason in TRUNCATED:
        logger.warning(
            "the %s model's answer was cut at max_tokens (%s): it is kept as it is",
            provider,
            "the provider's own limit" if max_tokens is None else max_tokens,
        )
    elif reason in FILTERED:
        logger.warning(
            "the %s provider's content filter stopped the model's answer (%s): what came "
            "before the stop is kept",
            provider,
            reason,
        )


NO_EVENT = "stello.no_event"
"""The type (`object`) of the mark a provider's stream reader ends a stream with no event with."""
HEAD_BYTES = 4096
"""How much of a stream's start `StreamHead` keeps."""


class StreamHead:
    """The start of a stream's bytes, kept as they pass (see the module docstring)."""

    def __init__(self) -> None:
        self._head = bytearray()

    async def kept(self, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`pieces`, their first `HEAD_BYTES` kept."""
        async for piece in pieces:
            if len(self._head) < HEAD_BYTES:
                self._head.extend(piece[: HEAD_BYTES - len(self._head)])
            yield piece

    def error_object(self) -> str | None:
        """The stream's text when it is a JSON object holding an error (``"error"``, or
        ``"type"`` or ``"object"`` ``"error"``); None otherwise."""
        text = self._head.decode("utf-8", "replace")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if isinstance(value, dict) and (
            value.get("error") or "error" in (value.get("type"), value.get("object"))
        ):
            return text
        return None

    def detail(self) -> str | None:
        """What a stream with no event began with, for the log; None when it was empty."""
        if not self._head.strip():
            return None
        text = self._head.decode("utf-8", "replace")
        return f"no server-sent event in the answer to a streamed call, which began {text[:300]!r}"


RECORD_BYTES = MIB
"""STELLO_MAX_RECORD_BYTES by default: the record limit a provider is built with unless told."""
ANSWER_MARGIN_BYTES = 64 * 1024
"""What `answer_limit` adds to twice the record limit (a small record limit still lets an
answer's events through)."""


def answer_limit(record_bytes: int) -> int:
    """The most bytes of text and tool-call arguments a streamed answer may bring when a
    record holds at most `record_bytes` (see the module docstring)."""
    return 2 * record_bytes + ANSWER_MARGIN_BYTES


class AnswerBound:
    """What one streamed model call has brought so far, against `answer_limit` (see the
    module docstring)."""

    def __init__(self, provider: str, record_bytes: int) -> None:
        self.provider = provider
        self.record_bytes = record_bytes
        self.limit = answer_limit(record_bytes)
        self.received = 0
        """Bytes of the answer's text and tool-call arguments so far."""

    def add(self, text: str) -> None:
        """Count `text` (a piece of the answer's text or of a call's arguments).

        Raises:
            ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, the answer passed the limit.
        """
        if not text:
            return
        self.received += len(text.encode("utf-8", "surrogatepass"))
        if self.received > self.limit:
            raise self.too_large(self.received, "its text and tool-call arguments")

    async def whole(self, pieces: AsyncIterator[bytes]) -> bytes:
        """The body of a call's answer, of `pieces` (as decompressed), whole.

        Raises:
            ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, the body passed the limit (its
                reading stopped there).
        """
        body = bytearray()
        async for piece in pieces:
            body += piece
            if len(body) > self.limit:
                raise self.too_large(len(body), "its body")
        return bytes(body)

    def too_large(self, size: int, what: str) -> ResourceExhausted:
        """The error of an answer that brought `size` bytes in `what` (logged under an id)."""
        error_id = new_error_id()
        logger.warning(
            "the %s model's answer brought over %d bytes in %s, more than "
            "STELLO_MAX_RECORD_BYTES=%d lets the gateway store: its reading was stopped "
            "and the connection closed; the provider did not keep to max_tokens (error id %s)",
            self.provider,
            size,
            what,
            self.record_bytes,
            error_id,
        )
        return ResourceExhausted(
            f"the model's answer is over {size} bytes, over the {self.record_bytes} bytes a "
            "record may hold: its reading was stopped and nothing of the turn was stored "
            f"(error id {error_id})",
            reason=LLM_ANSWER_TOO_LARGE,
            metadata={"answer_bytes": str(size), "record_bytes": str(self.record_bytes)},
        )


class EventReading:
    """The reading of one stream's events (`sse.Parser`), its bytes bounded and its start
    kept (`StreamHead`): what the providers' stream readers (`openai_answers.read_chunks`,
    `anthropic_answers.read_events`) share."""

    def __init__(self, bound: AnswerBound) -> None:
        self._bound = bound
        self._head = StreamHead()
        self._seen = False

    async def events(self, pieces: AsyncIterator[bytes]) -> AsyncIterator[sse.Event]:
        """The events of `pieces` (a stream's body, as decompressed).

        Raises:
            ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, one event passed the limit.
        """
        parser = sse.Parser()
        async for piece in self._head.kept(pieces):
            for event in parser.feed(piece):
                self._seen = True
                yield event
            if parser.pending > self._bound.limit:
                raise self._bound.too_large(parser.pending, "one server-sent event")

    def without_event(self) -> tuple[str, str | None] | None:
        """Once read, for a stream that held no event and was not empty: what it
        began with, for the log (`StreamHead.detail`), and the error object it is, if it is
        one (`StreamHead.error_object`); None otherwise."""
        detail = None if self._seen else self._head.detail()
        return None if detail is None else (detail, self._head.error_object())
