"""What the network providers (openai, anthropic) make sure of in a model's answer.

Tool-call ids are unique within an answer. Each call is answered by its own tool
result, matched by id, so two calls sharing an id (some OpenAI-compatible servers
reuse them) could not be answered apart. A repeated id, and an id a missing one was
given (``tool_<i>``) that is already taken, gets the first free suffix ``_2``,
``_3``, ... (letters, digits, ``_`` and ``-`` only, as Anthropic requires of ids).
The renamed id is the one stored with the call and answered by its result, so the
model sees the same id on the call and on its result in the next round.

A truncated answer (the model reached max_tokens) is kept as it is, and logged:
`log_stop` says which call was cut and at how many tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from agent_gateway.llm.base import ToolCallSpec

logger = logging.getLogger(__name__)

TRUNCATED = frozenset({"length", "max_tokens"})
"""The stop reasons of an answer cut at max_tokens (OpenAI's, Anthropic's)."""


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
    """Log an answer the model stopped for `reason` when that means it was cut short."""
    if reason in TRUNCATED:
        logger.warning(
            "the %s model's answer was cut at max_tokens (%s): it is kept as it is",
            provider,
            "the provider's own limit" if max_tokens is None else max_tokens,
        )
