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
start of a stream's bytes so that the providers' SSE decoders can end such a
stream with the error object (the SDK raises it) or with a `NO_EVENT` mark
whose detail, logged, is what came.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

from agent_gateway.llm.base import ToolCallSpec

logger = logging.getLogger(__name__)

TRUNCATED = frozenset({"length", "max_tokens"})
"""The stop reasons of an answer cut at max_tokens (OpenAI's, Anthropic's)."""
FILTERED = frozenset({"content_filter", "refusal"})
"""The stop reasons of an answer a safety filter stopped (OpenAI's and Azure's, Anthropic's)."""


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
"""The type (`object`) of the event a provider's SSE decoder ends a stream with no event with."""
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
