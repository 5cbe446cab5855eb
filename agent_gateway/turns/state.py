"""What a turn is made of: its validated input, its plan, its new records (DESIGN §4.2).

A Send and a SubmitToolResults differ only in how the turn opens: a Send adds
the user record and sends the user message; a SubmitToolResults checks its
results against the pending client tool calls (the calls of the last
assistant record that no tool record answers yet), adds one tool record per
result in the model's call order, and sends no user message. Everything after
the opening is the same turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent_gateway.clients import RequestKey
from agent_gateway.history.records import new_record, now_micros
from agent_gateway.llm import Role, TextDelta, ToolCallEvent, ToolCallSpec, ToolSpec, Usage
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import FailedPrecondition, FieldViolation, InvalidArgument, cut
from stello.reasons import NO_PENDING_TOOL_CALLS

SEND_SCOPE = "gateway.Send"
"""Send and SendStream share it: they are the same turn, streamed or not."""
SUBMIT_SCOPE = "gateway.SubmitToolResults"
"""SubmitToolResults and SubmitToolResultsStream share it, as Send and SendStream do."""

Oversized = Callable[[str], "str | None"]
"""The error result replacing a tool result too large for the model's window; None: fits."""

TOOL = common_pb2.RECORD_ROLE_TOOL
ASSISTANT = common_pb2.RECORD_ROLE_ASSISTANT


@dataclass(frozen=True, slots=True)
class SendInput:
    """A validated Send or SendStream request."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    content: str
    tools: tuple[ToolSpec, ...] = ()
    key: RequestKey | None = None
    memory_tools: bool | None = None
    """Offer the shared memory tools (None: as the gateway's setting says)."""
    busy: int = common_pb2.BUSY_POLICY_UNSPECIFIED
    """What to do while another turn holds the session (a BusyPolicy value)."""


@dataclass(frozen=True, slots=True)
class ToolResultInput:
    """The client's answer to one pending tool call."""

    tool_call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class SubmitInput:
    """A validated SubmitToolResults or SubmitToolResultsStream request (ids non-empty and
    unique)."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    results: tuple[ToolResultInput, ...]
    tools: tuple[ToolSpec, ...] = ()
    key: RequestKey | None = None
    memory_tools: bool | None = None
    """Offer the shared memory tools (None: as the gateway's setting says)."""
    busy: int = common_pb2.BUSY_POLICY_UNSPECIFIED
    """What to do while another turn holds the session (a BusyPolicy value)."""


@dataclass(frozen=True, slots=True)
class TurnDone:
    """The last event of a turn: the committed turn as Send answers it."""

    response: agent_pb2.SendResponse


TurnEvent = TextDelta | ToolCallEvent | TurnDone
"""What a streamed turn yields: deltas and tool calls as they arrive, then TurnDone."""


class Plan(Protocol):
    """What differs between a Send and a SubmitToolResults."""

    @property
    def space_id(self) -> uuid.UUID:
        """The tenant space."""
        ...

    @property
    def session_id(self) -> uuid.UUID:
        """The session the turn runs on."""
        ...

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The client tools of the request."""
        ...

    @property
    def key(self) -> RequestKey | None:
        """The request's idempotency key, if any."""
        ...

    @property
    def touch_only(self) -> bool:
        """True when the turn must not count (tool-result continuations)."""
        ...

    @property
    def memory_tools(self) -> bool | None:
        """The request's choice of the shared memory tools (None: the gateway's setting)."""
        ...

    @property
    def busy(self) -> int:
        """What to do while another turn holds the session (a BusyPolicy value)."""
        ...

    def opening(
        self, turn: Turn, history: Sequence[common_pb2.Record], oversized: Oversized
    ) -> str | None:
        """Add the request's own records to `turn` (`history`: the newest stored records,
        the trailing tool group whole); answer the user message (None: none)."""
        ...


@dataclass(slots=True)
class Turn:
    """The records and usage of a running turn (seqs follow the last record read)."""

    base_seq: int
    records: list[common_pb2.Record] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def add(
        self,
        role: Role,
        content: str,
        *,
        tool_calls: Sequence[ToolCallSpec] = (),
        tool_call_id: str | None = None,
        is_error: bool = False,
        usage: Usage | None = None,
        compressed: bool = False,
    ) -> common_pb2.Record:
        """Add a new record of this turn, numbered after the records before it."""
        record = new_record(
            role,
            content,
            seq=self.base_seq + len(self.records) + 1,
            created_at=now_micros(),
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            is_error=is_error,
            usage=usage,
            compressed=compressed,
        )
        self.records.append(record)
        return record


@dataclass(frozen=True, slots=True)
class SendPlan:
    """A Send or SendStream: opens with the user record."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    tools: tuple[ToolSpec, ...]
    key: RequestKey | None
    content: str
    touch_only: bool = False
    memory_tools: bool | None = None
    busy: int = common_pb2.BUSY_POLICY_UNSPECIFIED

    def opening(
        self, turn: Turn, history: Sequence[common_pb2.Record], oversized: Oversized
    ) -> str | None:
        """Add the user record; the user message is the content (checked before the turn)."""
        turn.add("user", self.content)
        return self.content


@dataclass(frozen=True, slots=True)
class SubmitPlan:
    """A SubmitToolResults or SubmitToolResultsStream: opens with the tool records of the
    results."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    tools: tuple[ToolSpec, ...]
    key: RequestKey | None
    results: tuple[ToolResultInput, ...]
    touch_only: bool = True
    memory_tools: bool | None = None
    busy: int = common_pb2.BUSY_POLICY_UNSPECIFIED

    def opening(
        self, turn: Turn, history: Sequence[common_pb2.Record], oversized: Oversized
    ) -> str | None:
        """Check the results against the pending calls; add their tool records (a result
        `oversized` refuses replaced by the error result it gives); no user message.

        Raises:
            FailedPrecondition: reason NO_PENDING_TOOL_CALLS.
            InvalidArgument: a result answers no pending call, or a pending call has none.
        """
        pending = pending_tool_calls(history)
        if not pending:
            raise FailedPrecondition(
                f"session {self.session_id} has no pending tool calls to answer: its last "
                "turn asked for none, or they were answered since (by another "
                "SubmitToolResults) or dropped (by a Send); nothing was written",
                reason=NO_PENDING_TOOL_CALLS,
                metadata={"subject": f"session/{self.session_id}"},
            )
        by_id = {result.tool_call_id: result for result in self.results}
        wanted = {call.id for call in pending}
        problems = [
            (
                f"results[{i}].tool_call_id",
                f"{cut(r.tool_call_id, 64)!r} answers no pending tool call",
            )
            for i, r in enumerate(self.results)
            if r.tool_call_id not in wanted
        ]
        problems += [
            ("results", f"pending tool call {call.id!r} ({call.name}) has no result")
            for call in pending
            if call.id not in by_id
        ]
        if problems:
            raise InvalidArgument(
                "the results must answer every pending tool call exactly once: "
                + "; ".join(f"{name}: {why}" for name, why in problems),
                [FieldViolation(name, why) for name, why in problems],
            )
        for call in pending:  # the model's call order, not the request's
            result = by_id[call.id]
            refused = oversized(result.content)
            content, is_error = (
                (result.content, result.is_error)
                if refused is None
                else (
                    refused,
                    True,
                )
            )
            turn.add("tool", content, tool_call_id=call.id, is_error=is_error)
        return None


def pending_tool_calls(history: Sequence[common_pb2.Record]) -> list[common_pb2.ToolCall]:
    """The calls of the last assistant record that no tool record after it answers yet."""
    start = len(history)
    while start > 0 and history[start - 1].role == TOOL:
        start -= 1
    if start == 0 or history[start - 1].role != ASSISTANT:
        return []
    answered = {record.tool_call_id for record in history[start:]}
    return [call for call in history[start - 1].tool_calls if call.id not in answered]
