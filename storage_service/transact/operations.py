"""Transact's vocabulary: preconditions, operations and their results (domain values)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from storage_service.models import (
    CompressionCache,
    JobKindName,
    JobStatusName,
    MetaUpdate,
    NewRecord,
    SessionMeta,
    SlotName,
    StoredRecord,
)


@dataclass(frozen=True, slots=True)
class LastSeqCheck:
    """Holds when the session's last assigned seq equals `expected`."""

    session_id: uuid.UUID
    expected: int


@dataclass(frozen=True, slots=True)
class InsightCheck:
    """Holds when the insight slot equals `expected` (None = no insight)."""

    session_id: uuid.UUID
    expected: str | None


@dataclass(frozen=True, slots=True)
class LeaseCheck:
    """Holds when `token` is the session's current, live turn lease."""

    session_id: uuid.UUID
    token: str


@dataclass(frozen=True, slots=True)
class ActiveCheck:
    """Holds when the session is active (not archived)."""

    session_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class JobCheck:
    """Holds when `token` holds the claim on the session's job of `kind`."""

    session_id: uuid.UUID
    kind: JobKindName
    token: str


@dataclass(frozen=True, slots=True)
class MemoryVersionCheck:
    """Holds when the session's memory version equals `expected` (0 = never written)."""

    session_id: uuid.UUID
    expected: int


Precondition = (
    LastSeqCheck | InsightCheck | LeaseCheck | ActiveCheck | JobCheck | MemoryVersionCheck
)

# The wire name of each precondition kind (PreconditionFailure.type).
PRECONDITION_KINDS: dict[type[Precondition], str] = {
    LastSeqCheck: "session_last_seq",
    InsightCheck: "insight_unchanged",
    LeaseCheck: "turn_lease",
    ActiveCheck: "session_active",
    JobCheck: "background_job",
    MemoryVersionCheck: "memory_version",
}


@dataclass(frozen=True, slots=True)
class AppendOp:
    """Append records (as AppendRecords)."""

    session_id: uuid.UUID
    records: tuple[NewRecord, ...]


@dataclass(frozen=True, slots=True)
class PutSessionOp:
    """Replace label and status (as PutSession)."""

    update: MetaUpdate

    @property
    def session_id(self) -> uuid.UUID:
        """The session the put names."""
        return self.update.session_id


@dataclass(frozen=True, slots=True)
class PutSlotOp:
    """Overwrite one content slot (as PutSystemPrompt, PutInsight, PutMemory)."""

    session_id: uuid.UUID
    slot: SlotName
    content: str
    covered: int | None = None
    """The memory only: the last seq it covers (it never goes down)."""


@dataclass(frozen=True, slots=True)
class ClearInsightOp:
    """Delete the insight (as ClearInsight)."""

    session_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PutCacheOp:
    """Overwrite the compression cache (as PutCompressionCache)."""

    session_id: uuid.UUID
    cache: CompressionCache
    keep_newer: bool = False
    """Store it beside the newer summaries instead of dropping them."""


@dataclass(frozen=True, slots=True)
class TrimOp:
    """Keep only the newest records (as TrimRecords)."""

    session_id: uuid.UUID
    keep_recent: int


@dataclass(frozen=True, slots=True)
class BumpTurnOp:
    """Record committed turns, `turns` of them (touch_only: last_active_at only)."""

    session_id: uuid.UUID
    touch_only: bool = False
    turns: int = 1


@dataclass(frozen=True, slots=True)
class ReleaseTurnOp:
    """End the lease if `token` is current (as ReleaseTurn)."""

    session_id: uuid.UUID
    token: str


@dataclass(frozen=True, slots=True)
class UpdateJobOp:
    """Save a background job run's progress while `token` holds its claim; with
    `release`, end the run with `status` (as UpdateJobOp on the wire)."""

    session_id: uuid.UUID
    kind: JobKindName
    token: str
    covered_until_seq: int
    model_calls: int
    tokens: int
    release: bool = False
    status: JobStatusName = "running"


@dataclass(frozen=True, slots=True)
class RememberOp:
    """Store an idempotency entry of a caller above storage, linked to the sessions whose
    data it holds."""

    scope: str
    request_id: str
    request_hash: bytes
    response: bytes
    require_new: bool = False
    """A live entry under the key fails the Transact (ALREADY_EXISTS) instead of being
    replaced."""
    session_ids: tuple[uuid.UUID, ...] = ()
    """The sessions whose data `response` holds; empty: those the other operations write."""


@dataclass(frozen=True, slots=True)
class InheritOp:
    """Give a new session the records of `source_id` through `until_seq` by reference."""

    session_id: uuid.UUID
    source_id: uuid.UUID
    until_seq: int | None


@dataclass(frozen=True, slots=True)
class CopyPromptOp:
    """Copy the system prompt slot of `source_id` to the session (when it has one)."""

    session_id: uuid.UUID
    source_id: uuid.UUID


SessionOperation = (
    AppendOp
    | InheritOp
    | CopyPromptOp
    | PutSessionOp
    | PutSlotOp
    | ClearInsightOp
    | PutCacheOp
    | TrimOp
    | BumpTurnOp
    | ReleaseTurnOp
    | UpdateJobOp
)
"""The operations that write one session (and lock its row)."""

Operation = SessionOperation | RememberOp

ResultKind = Literal[
    "append_records",
    "put_session",
    "put_system_prompt",
    "put_insight",
    "clear_insight",
    "put_memory",
    "put_compression_cache",
    "trim_records",
    "bump_turn",
    "release_turn",
    "remember_result",
    "inherit_records",
    "copy_system_prompt",
    "update_job",
]


@dataclass(frozen=True, slots=True)
class OperationResult:
    """The outcome of one operation; which fields are set follows `kind`."""

    kind: ResultKind
    records: tuple[StoredRecord, ...] = ()
    session: SessionMeta | None = None
    removed_count: int = 0
    released: bool = False
    until_seq: int = 0
    """inherit_records: the cut (the last inherited seq; 0 = none)."""
    copied: bool = False
    """copy_system_prompt: whether the source had a prompt to copy."""
    updated: bool = False
    """update_job: whether the token held the claim."""
