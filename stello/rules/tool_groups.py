"""Spec §4.5.4's tool-group rule, written once: which records a model may be shown.

An assistant record with tool calls stands only with the tool records after it
that answer every one of its calls (the first answer of each: a tool record after
it that answers no call of it, or answers one again, goes, as a model's API
refuses it); a group missing an answer goes whole, and so does a tool record no
call precedes. The gateway applies it to every turn's
context (and a copying fork applied it at its cut); the command line reads old
exports with it. It works on anything that has a role, tool calls and the call a
tool record answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


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
            answers: list[int] = []
            j = i + 1
            while j < len(records) and records[j].role == "tool":
                answered = records[j].tool_call_id or ""
                if answered in expected:  # the first answer of a call it made
                    expected.discard(answered)
                    answers.append(j)
                j += 1
            if not expected:
                kept += [i, *answers]
            i = j
        else:
            if record.role != "tool":
                kept.append(i)
            i += 1
    return kept


def remove_incomplete_tool_groups(records: Sequence[M]) -> list[M]:
    """`records` without incomplete tool-call groups (spec §4.5.4).

    An assistant with tool calls stays with the consecutive tool messages after
    it only if they answer every call id (the first answer of each; the others
    go); otherwise all of them go. A tool message with no preceding assistant
    tool call goes. Everything else stays.
    """
    return [records[i] for i in kept_tool_group_indices(records)]
