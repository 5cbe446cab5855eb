"""A turn's context: the messages it sends, built from what BeginTurn read (DESIGN §4.3).

The context of a turn, in order (STELLO-SPEC §4.5.1, DESIGN §5.5):

1. the system prompt, when non-empty;
2. the space's shared memory index (`agent_gateway.memory.index`, DESIGN
   §4.5), when the turn offers the memory tools and it shows an entry;
3. the session identity (the configured ``session_identity`` text), when the
   label is non-empty;
4. the insight, when non-empty;
5. the summary of the records before the window, when there is one;
6. the window (the newest records after the summary) with incomplete
   tool-call groups removed (§4.5.4), and this turn's own tool results;
7. the user message — or, when continuing a turn with tool results
   (SubmitToolResults, DESIGN §4.2), no user message: the context then ends
   with the new tool messages;
8. what the tool loop adds (the model's calls and their results).

The session's own memory is never part of it (DESIGN §5.5). `TurnContext`
holds these parts, counts them in the provider's tokens
(`agent_gateway.history.budget.Counter`) and gives up its oldest window records, whole
tool groups at a time, when a compression (`agent_gateway.history.compression`) folds
them into the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_gateway.llm.base import LLMMessage, Role, ToolCallSpec, ToolSpec
from agent_gateway.llm.prompts.messages import Prompts
from stello.rules.tool_groups import remove_incomplete_tool_groups

__all__ = [
    "Record",
    "Summary",
    "TurnContext",
    "context_prefix",
    "tool_groups",
]


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
class Summary:
    """A compression summary standing in for every record with seq <= covered_until_seq.

    `lossy`: it names some of the oldest records it covers by count only (a
    catch-up); a background fold replaces it by a complete one.
    """

    text: str
    covered_until_seq: int
    lossy: bool = False


def context_prefix(
    system_prompt: str | None,
    label: str,
    insight: str | None,
    prompts: Prompts,
    shared_index: str | None = None,
) -> list[LLMMessage]:
    """System prompt, the space's shared memory index (`shared_index`), identity and
    insight, each only when non-empty (never the session's own memory)."""
    prefix: list[LLMMessage] = []
    if system_prompt:
        prefix.append(LLMMessage("system", system_prompt))
    if shared_index:
        prefix.append(LLMMessage("system", shared_index))
    if label:
        prefix.append(LLMMessage("system", prompts.identity(label)))
    if insight:
        prefix.append(LLMMessage("system", insight))
    return prefix


def tool_groups(records: Sequence[Record]) -> list[list[Record]]:
    """`records` cut into what is evicted together: an assistant record with tool calls and
    the tool records after it, or one other record."""
    groups: list[list[Record]] = []
    for record in records:
        if record.role == "tool" and groups and _calls(groups[-1][0]):
            groups[-1].append(record)
        else:
            groups.append([record])
    return groups


def _calls(record: Record) -> bool:
    return record.role == "assistant" and bool(record.tool_calls)


class TurnContext:
    """The parts of a turn's context (see the module docstring) and what they cost.

    Args:
        prefix: system prompt, identity and insight messages.
        summary: the summary in use, if any.
        window: the stored records after it, ascending (some at or before its
            seq when the trailing tool group reaches back that far).
        pending: this turn's own records sent after the window (the tool
            results of SubmitToolResults); never evicted.
        user: the user message; None when continuing with tool results.
        tools: the tool schemas offered (they count too).
    """

    def __init__(
        self,
        prefix: Sequence[LLMMessage],
        summary: Summary | None,
        window: Sequence[Record],
        pending: Sequence[Record],
        user: str | None,
        tools: Sequence[ToolSpec],
    ) -> None:
        self.prefix = list(prefix)
        self.summary = summary
        self.window = list(window)
        self.pending = list(pending)
        self.user = user
        self.tools = list(tools)
        self.loop: list[LLMMessage] = []
        """The tool loop's messages: the model's calls and their results."""

    def records(self) -> list[Record]:
        """The window and the pending records, sanitised."""
        return remove_incomplete_tool_groups([*self.window, *self.pending])

    def messages(self) -> list[LLMMessage]:
        """The context, in order."""
        messages = list(self.prefix)
        if self.summary is not None and self.summary.text:
            messages.append(LLMMessage("system", self.summary.text))
        messages.extend(record.to_message() for record in self.records())
        if self.user is not None:
            messages.append(LLMMessage("user", self.user))
        return messages + self.loop

    def evictable(self) -> list[list[Record]]:
        """The window's tool groups, oldest first, that a compression may fold: all but a
        trailing tool group (the one SubmitToolResults continues)."""
        groups = tool_groups(self.window)
        if groups and _calls(groups[-1][0]):
            groups.pop()
        return groups

    def evict(self, count: int) -> list[Record]:
        """Take the oldest `count` evictable groups out of the window; their records."""
        evicted = [record for group in self.evictable()[:count] for record in group]
        self.window = self.window[len(evicted) :]
        return evicted

    def use(self, summary: Summary) -> None:
        """Send `summary` in place of the records it covers (already evicted)."""
        self.summary = summary
