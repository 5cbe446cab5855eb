"""How many of a model's tokens a prompt takes, and the shares of the window (DESIGN §4.3).

Storage estimates a record as ceil(code points / 4) (`stello.rules.tokens`): cheap,
stored, and what its window budget is in. A model counts differently (CJK
text about four times more), so before any call the gateway counts what it is
about to send with `Counter`: ASCII characters three to a token, every other
character as a token of its own (CJK, Devanagari, emoji; an upper bound for
common tokenizers), 4 tokens per message, each tool schema as its JSON text
— times a factor `Calibration` learns from the prompt_tokens the provider
reports (a tokenizer that counts more than the bound raises it; it decays
back towards 1). No prompt is sent unless that count fits the window.

The shares: the context is compressed when it would reach `THRESHOLD` of the
window, down to a tail of at most `LOW_WATER` (hysteresis: compression is
rare); a summary may take `SUMMARY_SHARE`; a record over `RECORD_SHARE`
is refused up front (it could be neither sent with its context nor
compressed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent_gateway.llm import LLMMessage, ToolSpec
from stello.errors import InvalidArgument

THRESHOLD = 0.8
"""A context that would reach this share of the window is compressed first."""
LOW_WATER = 0.4
"""Compression leaves at most this share of the window in records."""
SUMMARY_SHARE = 1 / 8
"""A summary's answer is capped at this share of the window (max_tokens)."""
RECORD_SHARE = 1 / 2
"""A message or tool result over this share of the window is refused."""
REPLY_SHARE = 1 / 4
"""An answer's max_tokens is at most this share of the window: room for a tokenizer counting
more than the calibration knows yet (the first calls of a provider)."""
MESSAGE_OVERHEAD = 4
"""Tokens a chat format adds per message (role, separators)."""
MAX_SUMMARY_TOKENS = 4096
"""A summary is capped here on any window."""
REPLY_BYTES_PER_TOKEN = 16
"""max_tokens is kept under the record size limit over this (a token is rarely longer)."""
DECAY = 0.98
"""How fast a raised calibration falls back towards 1 per report."""


def bound(text: str) -> int:
    """Tokens `text` takes at most: ASCII characters in threes, every other one alone."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return len(text) - ascii_chars + math.ceil(ascii_chars / 3)


@dataclass(slots=True)
class Calibration:
    """The factor a provider's tokenizer counts over `bound`, learnt from its reports."""

    factor: float = 1.0

    def observe(self, reported: int, bounded: int) -> None:
        """A call the provider counted `reported` prompt tokens for, `bounded` by `bound`."""
        if reported <= 0 or bounded <= 0:
            return
        observed = reported / bounded
        self.factor = max(1.0, observed, 1.0 + (self.factor - 1.0) * DECAY)


class Counter:
    """Counts messages in a provider's tokens (see the module docstring)."""

    def __init__(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def raw(self, messages: Iterable[LLMMessage], tools: Sequence[ToolSpec] = ()) -> int:
        """The bound of `messages` and `tools`, uncalibrated (what a report is compared with)."""
        total = sum(_message_bound(m) for m in messages)
        return total + sum(bound(_tool_json(tool)) + MESSAGE_OVERHEAD for tool in tools)

    def text(self, text: str) -> int:
        """One text, calibrated."""
        return math.ceil(bound(text) * self.calibration.factor)

    def message(self, message: LLMMessage) -> int:
        """One message, calibrated."""
        return math.ceil(_message_bound(message) * self.calibration.factor)

    def messages(self, messages: Iterable[LLMMessage], tools: Sequence[ToolSpec] = ()) -> int:
        """A prompt (messages and tool schemas), calibrated."""
        return math.ceil(self.raw(messages, tools) * self.calibration.factor)

    def to_estimate(self, tokens: int) -> int:
        """The most storage estimate (ceil(code points / 4)) records of `tokens` can have:
        ASCII text is the least dense for `bound`, three characters a token."""
        return math.ceil(tokens * 3 / (4 * self.calibration.factor)) + 1


@dataclass(frozen=True, slots=True)
class Window:
    """A provider's window and what follows from it."""

    tokens: int
    record_bytes: int

    @property
    def threshold(self) -> int:
        """Compress a context that would reach this."""
        return int(self.tokens * THRESHOLD)

    @property
    def low_water(self) -> int:
        """Compression leaves records of at most this."""
        return int(self.tokens * LOW_WATER)

    @property
    def summary_tokens(self) -> int:
        """max_tokens of a summary."""
        return max(16, min(MAX_SUMMARY_TOKENS, int(self.tokens * SUMMARY_SHARE)))

    @property
    def record_tokens(self) -> int:
        """The largest message or tool result accepted."""
        return int(self.tokens * RECORD_SHARE)

    @property
    def min_reply_tokens(self) -> int:
        """A call is not made when the window leaves its answer less than this."""
        return max(16, self.tokens // 32)

    def reply_tokens(self, prompt: int) -> int:
        """max_tokens of an answer to a prompt of `prompt` tokens: what the window leaves
        (a margin kept), at most `REPLY_SHARE` of it, and never more than a record holds."""
        margin = max(8, self.tokens // 64)
        room = self.tokens - prompt - margin
        cap = min(int(self.tokens * REPLY_SHARE), self.record_bytes // REPLY_BYTES_PER_TOKEN)
        return max(0, min(room, cap))

    def check_message(self, counter: Counter, content: str, field: str) -> None:
        """Refuse a user message too large for the window (before anything is written).

        Raises:
            InvalidArgument: naming `field`.
        """
        tokens = counter.text(content)
        if tokens > self.record_tokens:
            raise InvalidArgument.field(
                field,
                f"is about {tokens} tokens, more than half the model's window of "
                f"{self.tokens}: it could not be sent with its context",
            )


def _message_bound(message: LLMMessage) -> int:
    calls = sum(bound(c.name) + bound(c.arguments_json()) for c in message.tool_calls)
    return bound(message.content) + calls + MESSAGE_OVERHEAD


def _tool_json(tool: ToolSpec) -> str:
    # The chat completions form (the longest of the providers'), default separators and
    # escaped non-ASCII: no shorter than what an SDK sends.
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return json.dumps({"type": "function", "function": function})
