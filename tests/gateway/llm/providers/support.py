"""Helpers shared by the provider tests: the two ways to call a provider, and a turn's context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import pytest

from agent_gateway.history.context import Record, context_prefix
from agent_gateway.llm import Completion, LLMMessage, LLMProvider, ToolCallSpec, ToolSpec, collect
from stello.errors import StelloError
from tests.gateway.llm.support import ENGLISH

Mode = Literal["complete", "stream"]

MODES = [pytest.param("complete", id="complete"), pytest.param("stream", id="stream")]
"""Parametrise a test over a non-streaming and a streaming call."""

MODEL = "test-model"
KEY = "sk-test-key-0123456789"

SEARCH = ToolSpec(
    "search",
    "Search the notes.",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def logged(caplog: pytest.LogCaptureFixture, error: BaseException) -> str:
    """The one log line under `error`'s error id: the details its client is not told."""
    assert isinstance(error, StelloError)
    found = re.search(r"error id ([0-9a-f]{16})", error.message)
    assert found is not None, error.message
    lines = [r.getMessage() for r in caplog.records if found.group(1) in r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


async def call(
    provider: LLMProvider,
    mode: Mode,
    messages: Sequence[LLMMessage],
    tools: Sequence[ToolSpec] | None = None,
) -> Completion:
    """The provider's completion, through `complete` or through `stream`."""
    if mode == "complete":
        return await provider.complete(messages, tools=tools)
    return await collect(provider.stream(messages, tools=tools))


def turn_context() -> list[LLMMessage]:
    """A turn of spec §4.5.1: system prompt, identity, insight, history, the user message.

    The history has two rounds, one of them a tool round with a failed call.
    Memory has no way in: context assembly takes none (DESIGN §5.5).
    """
    history = [
        Record(1, "user", "What is in my notes?"),
        Record(2, "assistant", "", (ToolCallSpec("call_a", "search", {"q": "notes"}),)),
        Record(3, "tool", "index unavailable", tool_call_id="call_a", is_error=True),
        Record(4, "assistant", "I could not search them."),
    ]
    return [
        *context_prefix("You are Stello.", "Research", "The user prefers short answers.", ENGLISH),
        *(record.to_message() for record in history),
        LLMMessage("user", "Try again."),
    ]
