"""Context assembly for a turn: pure functions over records (STELLO-SPEC §4.5, §4.7).

The context of a turn, in order (spec §4.5.1, DESIGN §5.5):

1. the system prompt, when non-empty;
2. the session identity (the configured ``session_identity`` text), when the
   label is non-empty;
3. the insight, when non-empty;
4. the compression summary, when auto-compression applies;
5. the history with incomplete tool-call groups removed (§4.5.4), or only its
   recent window after compression;
6. the user message — or, when continuing a turn with tool results
   (SubmitToolResults, DESIGN §4.2), no user message: the context then ends
   with the new tool messages.

Memory is never part of it. Compression starts when the estimate reaches 80%
of the provider's context window (§4.7). The summary is cached by the seq of
the last record it covers (DESIGN §5.11): the cache is reused when that seq is
unchanged, otherwise the compressor runs and the new cache is returned for
the caller to store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from agent_gateway.llm.base import LLMMessage, Role, ToolCallSpec, estimate_tokens
from agent_gateway.llm.prompts import Prompts

__all__ = [
    "COMPRESS_THRESHOLD",
    "SUMMARY_ESTIMATE_TOKENS",
    "AssembledContext",
    "CompressionCache",
    "Compressor",
    "Record",
    "assemble_context",
    "context_prefix",
    "estimate_messages_tokens",
    "estimate_tokens",
    "kept_tool_group_indices",
    "remove_incomplete_tool_groups",
]

COMPRESS_THRESHOLD = 0.8
"""Compression starts when the estimate reaches this share of the context window."""

SUMMARY_ESTIMATE_TOKENS = 500
"""Tokens reserved for a summary that does not exist yet."""


@dataclass(frozen=True, slots=True)
class Record:
    """One stored conversation record, as context assembly needs it.

    `tool_calls` is set on assistant records only; `tool_call_id` and
    `is_error` on tool records only.
    """

    seq: int
    role: Role
    content: str
    tool_calls: tuple[ToolCallSpec, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    def to_message(self) -> LLMMessage:
        """The record as a message to the model."""
        return LLMMessage(
            self.role, self.content, self.tool_calls, self.tool_call_id, self.is_error
        )


@dataclass(frozen=True, slots=True)
class CompressionCache:
    """A compression summary standing in for every record with seq <= covered_until_seq."""

    summary: str
    covered_until_seq: int


Compressor = Callable[[Sequence[Record]], Awaitable[str]]
"""Summarises the oldest records (e.g. `llm.compress_records` bound to a provider)."""


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """The messages of a turn and what compression did to build them.

    Attributes:
        messages: the context, in the order of the module docstring.
        compressed: a summary replaced the oldest records.
        cache: the summary in use (reused or new); None when not compressed.
        cache_to_store: the new summary when the compressor ran (store it, e.g.
            PutCompressionCache); None when nothing changed.
        estimated_tokens: ceil(len/4) summed over `messages`.
    """

    messages: tuple[LLMMessage, ...]
    compressed: bool = False
    cache: CompressionCache | None = None
    cache_to_store: CompressionCache | None = None
    estimated_tokens: int = 0


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


class ToolGroupMember(Protocol):
    """What the sanitiser reads from a record or a message."""

    @property
    def role(self) -> str:
        """system, user, assistant or tool."""
        ...

    @property
    def tool_calls(self) -> Sequence[_HasId]:
        """The calls of an assistant record (empty otherwise)."""
        ...

    @property
    def tool_call_id(self) -> str | None:
        """The call a tool record answers."""
        ...


M = TypeVar("M", bound=ToolGroupMember)


def kept_tool_group_indices(records: Sequence[ToolGroupMember]) -> list[int]:
    """Indexes of the records the sanitiser keeps (spec §4.5.4), in order."""
    kept: list[int] = []
    i = 0
    while i < len(records):
        record = records[i]
        if record.role == "assistant" and record.tool_calls:
            expected = {call.id for call in record.tool_calls}
            j = i + 1
            while j < len(records) and records[j].role == "tool":
                expected.discard(records[j].tool_call_id or "")
                j += 1
            if not expected:
                kept.extend(range(i, j))
            i = j
        else:
            if record.role != "tool":
                kept.append(i)
            i += 1
    return kept


def remove_incomplete_tool_groups(records: Sequence[M]) -> list[M]:
    """`records` without incomplete tool-call groups (spec §4.5.4).

    An assistant with tool calls stays with the consecutive tool messages after
    it only if they answer every call id; otherwise all of them go. A tool
    message with no preceding assistant tool call goes. Everything else stays.
    """
    return [records[i] for i in kept_tool_group_indices(records)]


def estimate_messages_tokens(messages: Iterable[LLMMessage | Record]) -> int:
    """The spec §4.7 estimate of messages: ceil(len/4) of each content (tool calls not counted)."""
    return sum(estimate_tokens(m.content) for m in messages)


def context_prefix(
    system_prompt: str | None, label: str, insight: str | None, prompts: Prompts
) -> list[LLMMessage]:
    """System prompt, identity and insight, each only when non-empty (never memory)."""
    prefix: list[LLMMessage] = []
    if system_prompt:
        prefix.append(LLMMessage("system", system_prompt))
    if label:
        prefix.append(LLMMessage("system", prompts.identity(label)))
    if insight:
        prefix.append(LLMMessage("system", insight))
    return prefix


def _window_start(records: Sequence[Record], budget: float, keep_from: int) -> int:
    """Where the recent window starts; records[keep_from:] are always in it (spec §4.7)."""
    start = keep_from
    if budget > 0:
        used = 0
        for i in range(keep_from - 1, -1, -1):
            cost = estimate_tokens(records[i].content)
            if used + cost > budget:
                break
            used += cost
            start = i
    # Never split a tool group: extend back to its assistant, or skip orphans.
    while start < len(records) and records[start].role == "tool":
        j = start - 1
        while j >= 0 and records[j].role == "tool":
            j -= 1
        if j >= 0 and records[j].role == "assistant" and records[j].tool_calls:
            start = j
            break
        start += 1
    return min(start, keep_from)


async def assemble_context(
    *,
    system_prompt: str | None,
    label: str,
    insight: str | None,
    history: Sequence[Record],
    user_message: str | None,
    provider_max_tokens: int,
    cache: CompressionCache | None,
    last_prompt_tokens: int | None,
    compress: Compressor,
    prompts: Prompts,
    pending: Sequence[Record] = (),
    load_cache: Callable[[], Awaitable[CompressionCache | None]] | None = None,
) -> AssembledContext:
    """Build the context of a turn, compressing the oldest history when it is too long.

    Args:
        system_prompt: the session's system prompt (None or '' = none).
        label: the session's label ('' = no identity message).
        insight: the insight put into this turn (None or '' = none).
        history: the session's stored records, in seq order.
        user_message: the user's message; None when continuing with tool results.
        provider_max_tokens: the provider's context window.
        cache: the stored compression cache, if any.
        last_prompt_tokens: the provider-reported prompt tokens of the previous
            call, when known (0 or None = unknown).
        compress: called with the records to summarise on a cache miss; its
            errors propagate (nothing is to be written then).
        prompts: the configured texts (the session identity comes from them).
        pending: records of this turn not stored yet, after `history` (the
            tool results of SubmitToolResults): always sent, never compressed,
            their seq ignored.
        load_cache: when given, reads the stored cache in place of `cache`,
            and only once the estimate reaches the threshold (a turn under it
            never needs the cache, so it need not read it).

    Returns:
        The messages, and the new cache to store when the compressor ran. The
        summary replaces exactly the records it covers; the window sent is
        every sanitised record after them. An empty summary adds no message.
    """
    prefix = context_prefix(system_prompt, label, insight, prompts)
    combined = [*history, *pending]
    kept = kept_tool_group_indices(combined)
    records = [combined[i] for i in kept]
    stored_count = sum(1 for i in kept if i < len(history))
    tail = [LLMMessage("user", user_message)] if user_message is not None else []

    full = (*prefix, *(r.to_message() for r in records), *tail)
    if last_prompt_tokens:
        estimate = last_prompt_tokens + estimate_messages_tokens([*records[-2:], *tail])
    else:
        estimate = estimate_messages_tokens(full)
    threshold = COMPRESS_THRESHOLD * provider_max_tokens
    if estimate < threshold:
        return AssembledContext(full, estimated_tokens=estimate_messages_tokens(full))
    if load_cache is not None:
        cache = await load_cache()

    fixed = estimate_messages_tokens([*prefix, *records[stored_count:], *tail])
    summary_estimate = (
        estimate_tokens(cache.summary)
        if cache is not None and cache.summary
        else SUMMARY_ESTIMATE_TOKENS
    )
    count = _window_start(records, threshold - fixed - summary_estimate, stored_count)
    if count == 0:
        return AssembledContext(full, estimated_tokens=estimate_messages_tokens(full))

    covered_until_seq = records[count - 1].seq
    to_store: CompressionCache | None = None
    if cache is not None and cache.covered_until_seq == covered_until_seq:
        used = cache
    else:
        used = CompressionCache(await compress(records[:count]), covered_until_seq)
        to_store = used
    summary = [LLMMessage("system", used.summary)] if used.summary else []
    messages = (*prefix, *summary, *(r.to_message() for r in records[count:]), *tail)
    return AssembledContext(
        messages,
        compressed=True,
        cache=used,
        cache_to_store=to_store,
        estimated_tokens=estimate_messages_tokens(messages),
    )
