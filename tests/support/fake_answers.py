"""What a fake model answers (`FakeAnswer`, its `FakeToolCall`s), rendered by the fake
servers of `tests/support/fake_openai.py` and `tests/support/fake_anthropic.py` in their
provider's protocol (moved out of `tests/support/fake_http.py`, which re-exports them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

JsonValue = Any


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call a fake model makes.

    `arguments` as a `str` is sent verbatim (to script malformed JSON); `id`
    None lets the fake number it.
    """

    name: str
    arguments: dict[str, JsonValue] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        """The arguments as JSON text on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class FakeAnswer:
    """What a fake model answers: text, tool calls, token usage, streamed in `chunks` deltas;
    `stop`: the finish_reason (OpenAI) or stop_reason (Anthropic) to send instead of the
    usual one (e.g. a content filter's: ``content_filter``, ``refusal``)."""

    text: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    prompt_tokens: int = 10
    completion_tokens: int = 5
    chunks: int = 3
    stop: str | None = None

    def text_pieces(self) -> list[str]:
        """The text cut into at most `chunks` non-empty deltas."""
        if not self.text:
            return []
        size = -(-len(self.text) // max(self.chunks, 1))
        return [self.text[i : i + size] for i in range(0, len(self.text), size)]


def split_in_two(text: str) -> list[str]:
    """`text` in two non-empty pieces when it has two characters (streamed tool arguments)."""
    if len(text) < 2:
        return [text] if text else []
    middle = len(text) // 2
    return [text[:middle], text[middle:]]
