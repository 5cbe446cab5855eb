"""Helpers shared by the LLM-layer tests: record builders and a recording provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agent_gateway.history.context import Record
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


# The reference's texts (its packages' DEFAULT_*_PROMPT and session identity), exactly.
ZH_COMPRESS = (
    "你是对话压缩助手。请将以下对话历史压缩为一段简洁的摘要，保留关键上下文信息。\n"
    "要求：\n"
    "- 保留对话的核心主题、已做出的决定和关键事实\n"
    "- 省略重复信息和冗余细节\n"
    "- 输出一段连贯文字\n"
    "- 语言精炼，像一份上下文备忘录"
)
ZH_FORK_COMPRESS = (
    "你是对话压缩助手。请将以下对话历史压缩为一段简洁的摘要，作为子会话开场的上下文背景。\n"
    "要求：\n"
    "- 保留对话的核心主题、关键事实、已确认的结论\n"
    "- 突出对子会话延续可能有用的人物 / 设定 / 待办\n"
    "- 省略寒暄、重复信息和已收尾的细节\n"
    "- 输出一段连贯文字，不用列表或 Markdown 标记\n"
    "- 语言精炼客观，像一份交接备忘"
)
ZH_CONSOLIDATE = (
    "你是对话摘要助手。请将对话提炼为一段 100-150 字的简洁摘要。\n"
    "要求：\n"
    "- 聚焦核心目标和关键成果，只保留已确认的结论\n"
    "- 省略讨论过程、寒暄和未决事项\n"
    "- 输出一段连贯文字，不用列表或 Markdown 标记\n"
    "- 语言精炼客观，像一条工作备忘"
)


def has_cjk(text: str) -> bool:
    """Whether `text` holds a CJK ideograph or CJK/full-width punctuation."""
    return any(
        "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef"
        for c in text
    )


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
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Record the messages, then answer like echo."""
        self.calls.append(list(messages))
        return await self.inner.complete(messages, tools=tools, max_tokens=max_tokens)

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Record the messages, then stream like echo."""
        self.calls.append(list(messages))
        return self.inner.stream(messages, tools=tools, max_tokens=max_tokens)
