"""Default prompts and the helper LLM calls: compression, fork compression, consolidation.

Message shapes follow STELLO-SPEC §4.9 exactly:

- compressor: ``[system prompt, (system <role_context>)?, user "对话记录:\\n" + lines]``;
- consolidator: the same, with ``"当前摘要:\\n" + memory + "\\n\\n"`` before
  ``"对话记录:"`` when the current memory is non-empty.

Lines are ``"<role>: <content>"`` joined by newlines; tool calls are not
rendered. Answers have their ``<think>…</think>`` blocks removed and are
trimmed. Memory never enters a compression (spec §4.7).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from agent_gateway.llm.base import LLMMessage, LLMProvider

DEFAULT_COMPRESS_PROMPT = (
    "你是一名对话压缩助手。请把下面的对话历史压缩成一段简洁的摘要，"
    "保留理解后续对话所需的关键上下文。\n"
    "要求：\n"
    "- 保留核心主题、已经做出的决定和关键事实\n"
    "- 去掉重复内容和冗余细节\n"
    "- 写成一段连贯的文字\n"
    "- 措辞精炼，像一份上下文备忘录"
)
"""System prompt of the in-session compressor (spec §4.9 items 3 and 4)."""

DEFAULT_FORK_COMPRESS_PROMPT = (
    "你是一名对话压缩助手。请把下面的对话历史压缩成一段简洁的摘要，"
    "作为子会话开场时的上下文背景。\n"
    "要求：\n"
    "- 保留核心主题、关键事实和已经确认的结论\n"
    "- 突出对子会话后续工作有用的人物、设定和待办事项\n"
    "- 去掉寒暄、重复内容和已经了结的细节\n"
    "- 写成一段连贯的文字，不使用列表或 Markdown\n"
    "- 语气简洁客观，像一份交接备忘录"
)
"""System prompt of the fork compressor (`ForkContext.COMPRESS`, spec §4.4.3)."""

DEFAULT_CONSOLIDATE_PROMPT = (
    "你是一名对话摘要助手。请把对话提炼成一段 100 到 150 字的简洁摘要。\n"
    "要求：\n"
    "- 聚焦核心目标和已经确认的成果\n"
    "- 不写讨论过程、寒暄和尚未解决的事项\n"
    "- 写成一段连贯的文字，不使用列表或 Markdown\n"
    "- 语气客观精炼，像一条工作备忘"
)
"""System prompt of the consolidator that writes a session's memory (spec §4.6)."""

TRANSCRIPT_HEADER = "对话记录:\n"
MEMORY_HEADER = "当前摘要:\n"

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


class Transcribable(Protocol):
    """Anything with a role and a text content (a stored record, an LLM message)."""

    @property
    def role(self) -> str:
        """system, user, assistant or tool."""
        ...

    @property
    def content(self) -> str:
        """The text."""
        ...


def transcript(records: Iterable[Transcribable]) -> str:
    """The records as ``"<role>: <content>"`` lines joined by newlines."""
    return "\n".join(f"{r.role}: {r.content}" for r in records)


def strip_think(text: str) -> str:
    """`text` without ``<think>…</think>`` blocks, trimmed."""
    return _THINK.sub("", text).strip()


def _role_context(role_context: str | None) -> list[LLMMessage]:
    if not role_context:
        return []
    return [LLMMessage("system", f"<role_context>\n{role_context}\n</role_context>")]


def build_compress_messages(
    records: Iterable[Transcribable],
    *,
    prompt: str = DEFAULT_COMPRESS_PROMPT,
    role_context: str | None = None,
) -> list[LLMMessage]:
    """The messages of a compressor call (pass DEFAULT_FORK_COMPRESS_PROMPT for a fork)."""
    return [
        LLMMessage("system", prompt),
        *_role_context(role_context),
        LLMMessage("user", TRANSCRIPT_HEADER + transcript(records)),
    ]


def build_consolidate_messages(
    current_memory: str | None,
    records: Iterable[Transcribable],
    *,
    prompt: str = DEFAULT_CONSOLIDATE_PROMPT,
    role_context: str | None = None,
) -> list[LLMMessage]:
    """The messages of a consolidator call over the current memory and all records."""
    memory = f"{MEMORY_HEADER}{current_memory}\n\n" if current_memory else ""
    return [
        LLMMessage("system", prompt),
        *_role_context(role_context),
        LLMMessage("user", memory + TRANSCRIPT_HEADER + transcript(records)),
    ]


async def compress_records(
    provider: LLMProvider,
    records: Sequence[Transcribable],
    *,
    prompt: str = DEFAULT_COMPRESS_PROMPT,
    role_context: str | None = None,
) -> str:
    """Summarise `records` with `provider`; provider errors propagate.

    The in-session compressor uses the defaults; a fork passes
    ``prompt=DEFAULT_FORK_COMPRESS_PROMPT``.
    """
    messages = build_compress_messages(records, prompt=prompt, role_context=role_context)
    completion = await provider.complete(messages)
    return strip_think(completion.content)


async def consolidate_records(
    provider: LLMProvider,
    current_memory: str | None,
    records: Sequence[Transcribable],
    *,
    prompt: str = DEFAULT_CONSOLIDATE_PROMPT,
    role_context: str | None = None,
) -> str:
    """The new memory of a session from its current memory and all its records."""
    messages = build_consolidate_messages(
        current_memory, records, prompt=prompt, role_context=role_context
    )
    completion = await provider.complete(messages)
    return strip_think(completion.content)


def fork_system_prompt(system_prompt: str | None, summary: str) -> str:
    """The child's system prompt after a compressing fork (spec §4.9 item 6)."""
    return f"{system_prompt or ''}\n\n<parent_context>\n{summary}\n</parent_context>"
