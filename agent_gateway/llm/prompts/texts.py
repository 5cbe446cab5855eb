"""The registry of built-in texts: every key, its template variables, and its presets.

The gateway adds these texts to model calls (DESIGN §5.16). Each is a
`PromptKey`: the name a prompts file (or a profile) sets it by, the
``{name}`` variables its template may use (`agent_gateway.llm.prompts.templates`), the
ones it must use, and what it is for. `PRESETS` gives every key a text in
English (``en``, the default) and in the reference's Chinese (``zh``,
STELLO-SPEC §4.5.1, §4.9 — exactly its texts). Where the texts go, and the
message structures around them, are fixed by `agent_gateway.llm.prompts.messages`.

To add a text: a `PromptKey` in `KEYS`, its text in every preset (a test
checks each preset has exactly the keys), and its use through
`Prompts.text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

PresetName = Literal["en", "zh"]


@dataclass(frozen=True, slots=True)
class PromptKey:
    """One configurable built-in text.

    Attributes:
        name: its key in a prompts file.
        variables: the template variables it may use.
        required: the variables it must use (their value would be lost otherwise).
        meaning: where the gateway puts it (README's "Prompts" table).
    """

    name: str
    meaning: str
    variables: tuple[str, ...] = ()
    required: tuple[str, ...] = ()


SESSION_IDENTITY = PromptKey(
    "session_identity",
    "System message of every turn naming the session it runs in (only when the label is "
    "non-empty), after the system prompt.",
    variables=("label",),
)
COMPRESSOR = PromptKey(
    "compressor", "System prompt of in-session compression (summarises the oldest records)."
)
FORK_COMPRESSOR = PromptKey(
    "fork_compressor", "System prompt of the summary a COMPRESS fork makes of its source."
)
CONSOLIDATOR = PromptKey(
    "consolidator", "System prompt of consolidation (Consolidate; rewrites the memory)."
)
TRANSCRIPT_HEADER = PromptKey(
    "transcript_header",
    "Line before the records in compressor and consolidator calls (a newline follows it).",
)
MEMORY_HEADER = PromptKey(
    "memory_header",
    "Line before the current memory in consolidator calls (a newline follows it).",
)
PARENT_CONTEXT = PromptKey(
    "parent_context",
    "Block a COMPRESS fork appends to the child's system prompt, after a blank line.",
    variables=("summary",),
    required=("summary",),
)
OMITTED_RECORDS = PromptKey(
    "omitted_records",
    "First transcript line of a catch-up compression that cannot fold every older record "
    "in its calls: names how many are left out (a background fold adds them later).",
    variables=("count",),
    required=("count",),
)
UNKNOWN_PROFILE = PromptKey(
    "unknown_profile",
    "Tool error the model gets when stello_create_session names no configured profile.",
    variables=("profile",),
)

FORK_TOO_EARLY = PromptKey(
    "fork_too_early",
    "Tool error of stello_create_session while the session has fewer committed turns than "
    "STELLO_GATEWAY_FORK_MIN_TURNS.",
    variables=("turns", "min_turns"),
)
FORK_COOLING_DOWN = PromptKey(
    "fork_cooling_down",
    "Tool error of stello_create_session within STELLO_GATEWAY_FORK_COOLDOWN_TURNS turns of "
    "the session's last fork by the tool.",
    variables=("turns", "last_fork", "next_turn"),
)

SHARED_MEMORY_HINT = PromptKey(
    "shared_memory_hint",
    "Lines after the shared memory index (spec §4.9 item 7), after a blank line: how to read "
    "and keep the entries.",
)
SHARED_MEMORY_MORE = PromptKey(
    "shared_memory_more",
    "Last line inside the shared memory index when it shows fewer entries than the space "
    "holds (STELLO_GATEWAY_MEMORY_INDEX_MAX_ENTRIES, _MAX_TOKENS).",
    variables=("count",),
    required=("count",),
)

KEYS: tuple[PromptKey, ...] = (
    SESSION_IDENTITY,
    COMPRESSOR,
    FORK_COMPRESSOR,
    CONSOLIDATOR,
    TRANSCRIPT_HEADER,
    MEMORY_HEADER,
    PARENT_CONTEXT,
    OMITTED_RECORDS,
    UNKNOWN_PROFILE,
    FORK_TOO_EARLY,
    FORK_COOLING_DOWN,
    SHARED_MEMORY_HINT,
    SHARED_MEMORY_MORE,
)
"""Every key, in the order README documents them."""

_EN: Mapping[str, str] = {
    SESSION_IDENTITY.name: (
        '<session_identity>\nYou are in the "{label}" sub-session.\n</session_identity>'
    ),
    COMPRESSOR.name: (
        "You are a conversation compression assistant. Compress the conversation history "
        "below into one concise summary that keeps the context needed to continue it.\n"
        "Requirements:\n"
        "- Keep the core topic, the decisions made and the key facts\n"
        "- Leave out repetition and redundant detail\n"
        "- Write one coherent paragraph\n"
        "- Be terse, like a context memo\n"
        "- Write in the language the conversation is in"
    ),
    FORK_COMPRESSOR.name: (
        "You are a conversation compression assistant. Compress the conversation history "
        "below into one concise summary that a new sub-session starts from as its "
        "background.\n"
        "Requirements:\n"
        "- Keep the core topic, the key facts and the conclusions already confirmed\n"
        "- Bring out the people, settings and open tasks the sub-session may need to "
        "carry on\n"
        "- Leave out small talk, repetition and details already settled\n"
        "- Write one coherent paragraph, without lists or Markdown\n"
        "- Be terse and objective, like a handover memo\n"
        "- Write in the language the conversation is in"
    ),
    CONSOLIDATOR.name: (
        "You are a conversation summary assistant. Distil the conversation into one concise "
        "summary of 60 to 100 words.\n"
        "Requirements:\n"
        "- Focus on the core goals and the key results; keep only confirmed conclusions\n"
        "- Leave out the discussion itself, small talk and open questions\n"
        "- When a current summary is given, the new one replaces it: keep what still holds\n"
        "- Write one coherent paragraph, without lists or Markdown\n"
        "- Be terse and objective, like a work memo\n"
        "- Write in the language the conversation is in"
    ),
    TRANSCRIPT_HEADER.name: "Conversation:",
    MEMORY_HEADER.name: "Current summary:",
    PARENT_CONTEXT.name: "<parent_context>\n{summary}\n</parent_context>",
    OMITTED_RECORDS.name: "({count} earlier messages are not included in this summary.)",
    UNKNOWN_PROFILE.name: 'Profile "{profile}" is not configured',
    FORK_TOO_EARLY.name: (
        "Not enough turns to create a session yet: this session has {turns} committed "
        "turn(s), {min_turns} are needed"
    ),
    FORK_COOLING_DOWN.name: (
        "Cooling down: this session created a session at turn {last_fork}; the next one is "
        "allowed from turn {next_turn} (now {turns})"
    ),
    SHARED_MEMORY_HINT.name: (
        "To read an entry, call stello_memory_recall with its slug.\n"
        "To keep the shared memory current, call stello_memory_remember (add or replace an "
        "entry) and stello_memory_forget (remove one)."
    ),
    SHARED_MEMORY_MORE.name: "{count} more: recall by slug",
}

# The reference's texts, exactly (STELLO-SPEC §4.5.1, §4.4.5, §4.9); the fork guard's carry
# the reference's reasons, 轮次不足 and 冷却期 (§4.11), with the counts; omitted_records has
# no counterpart there (the reference never compresses part of a history).
_ZH: Mapping[str, str] = {
    SESSION_IDENTITY.name: "<session_identity>\n你当前在「{label}」子会话中。\n</session_identity>",
    COMPRESSOR.name: (
        "你是对话压缩助手。请将以下对话历史压缩为一段简洁的摘要，保留关键上下文信息。\n"
        "要求：\n"
        "- 保留对话的核心主题、已做出的决定和关键事实\n"
        "- 省略重复信息和冗余细节\n"
        "- 输出一段连贯文字\n"
        "- 语言精炼，像一份上下文备忘录"
    ),
    FORK_COMPRESSOR.name: (
        "你是对话压缩助手。请将以下对话历史压缩为一段简洁的摘要，作为子会话开场的上下文背景。\n"
        "要求：\n"
        "- 保留对话的核心主题、关键事实、已确认的结论\n"
        "- 突出对子会话延续可能有用的人物 / 设定 / 待办\n"
        "- 省略寒暄、重复信息和已收尾的细节\n"
        "- 输出一段连贯文字，不用列表或 Markdown 标记\n"
        "- 语言精炼客观，像一份交接备忘"
    ),
    CONSOLIDATOR.name: (
        "你是对话摘要助手。请将对话提炼为一段 100-150 字的简洁摘要。\n"
        "要求：\n"
        "- 聚焦核心目标和关键成果，只保留已确认的结论\n"
        "- 省略讨论过程、寒暄和未决事项\n"
        "- 输出一段连贯文字，不用列表或 Markdown 标记\n"
        "- 语言精炼客观，像一条工作备忘"
    ),
    TRANSCRIPT_HEADER.name: "对话记录:",
    MEMORY_HEADER.name: "当前摘要:",
    PARENT_CONTEXT.name: "<parent_context>\n{summary}\n</parent_context>",
    OMITTED_RECORDS.name: "（此前另有 {count} 条消息未纳入本摘要。）",
    UNKNOWN_PROFILE.name: 'Profile "{profile}" 未注册',
    FORK_TOO_EARLY.name: "轮次不足：当前 {turns} 轮，至少需要 {min_turns} 轮",
    FORK_COOLING_DOWN.name: (
        "冷却期：上次拆分在第 {last_fork} 轮，第 {next_turn} 轮起可再拆分（当前 {turns} 轮）"
    ),
    SHARED_MEMORY_HINT.name: (
        "需要某条内容时，用 slug 调用 stello_memory_recall 读取。\n"
        "用 stello_memory_remember（新增或更新）和 stello_memory_forget（删除）维护共享记忆。"
    ),
    SHARED_MEMORY_MORE.name: "另有 {count} 条：按 slug 读取",
}

PRESETS: Mapping[PresetName, Mapping[str, str]] = {"en": _EN, "zh": _ZH}
"""Every key's text per preset; ``en`` is the default."""
