"""Helpers shared by the LLM-layer tests: record builders and a recording provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agent_gateway.context import Record
from agent_gateway.llm import (
    Completion,
    EchoProvider,
    LLMMessage,
    Prompts,
    Role,
    StreamEvent,
    ToolCallSpec,
    ToolSpec,
)

ENGLISH = Prompts.preset("en")
"""The default prompt set (what a gateway uses with no prompt settings)."""
CHINESE = Prompts.preset("zh")
"""The reference's texts (STELLO_GATEWAY_PROMPTS=zh)."""


def identity(label: str) -> str:
    """The default (English) session identity text for `label`."""
    return ENGLISH.identity(label)


def history(*items: tuple[Role, str] | Record) -> list[Record]:
    """Records numbered from seq 1; a `(role, content)` pair is a plain record."""
    built: list[Record] = []
    for seq, item in enumerate(items, start=1):
        if isinstance(item, Record):
            built.append(
                Record(
                    seq,
                    item.role,
                    item.content,
                    item.tool_calls,
                    item.tool_call_id,
                    item.is_error,
                )
            )
        else:
            role, content = item
            built.append(Record(seq, role, content))
    return built


def calls(*ids: str, name: str = "search") -> Record:
    """An assistant record calling tools with these ids (seq set by `history`)."""
    return Record(0, "assistant", "", tuple(ToolCallSpec(i, name, {"q": i}) for i in ids))


def answer(call_id: str, content: str = "ok") -> Record:
    """A tool record answering `call_id` (seq set by `history`)."""
    return Record(0, "tool", content, tool_call_id=call_id)


def long_records(count: int, size: int = 100) -> list[Record]:
    """`count` alternating user/assistant records of `size` characters each."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return history(*((roles[i % 2], f"{i:04d}" + "x" * (size - 4)) for i in range(count)))


class SpyProvider:
    """An echo provider that records every message list it is asked to answer."""

    def __init__(self, *, max_context_tokens: int = 1_000_000) -> None:
        self.inner = EchoProvider(max_context_tokens=max_context_tokens)
        self.calls: list[list[LLMMessage]] = []

    @property
    def max_context_tokens(self) -> int:
        """The wrapped echo's context window."""
        return self.inner.max_context_tokens

    async def complete(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> Completion:
        """Record the messages, then answer like echo."""
        self.calls.append(list(messages))
        return await self.inner.complete(messages, tools=tools)

    def stream(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Record the messages, then stream like echo."""
        self.calls.append(list(messages))
        return self.inner.stream(messages, tools=tools)
