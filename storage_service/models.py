"""Domain values of the conversation store: what the service takes and answers.

Plain frozen dataclasses, independent of gRPC: the servicer converts protos
into these and back (`storage_service.convert`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from stello.errors import session_not_found as session_not_found  # the one NOT_FOUND of a session

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["active", "archived"]
SlotName = Literal["system_prompt", "insight", "memory"]
JobKindName = Literal["consolidate", "fold"]
"""The kinds of the gateway's background jobs (migration 0012)."""
JobStatusName = Literal["running", "done", "budget_spent", "stopped", "failed"]
JsonObject = dict[str, Any]

ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
STATUSES: tuple[Status, ...] = ("active", "archived")
SLOT_NAMES: tuple[SlotName, ...] = ("system_prompt", "insight", "memory")
MAX_SEQ = 2**63 - 1
"""The largest seq (a bigint's): an open end of a seq range, closed for the planner."""


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """The conversation meta of one session as stored."""

    id: uuid.UUID
    label: str
    status: Status
    turn_count: int
    created_at: datetime
    updated_at: datetime
    last_active_at: datetime
    pinned: bool = False
    """Retention keeps the session's whole root subtree (tree PinSession)."""


@dataclass(frozen=True, slots=True)
class MetaUpdate:
    """A PutSession: the new label and status of an existing session."""

    session_id: uuid.UUID
    label: str
    status: Status


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ListSessions and the token of the next one ("" on the last)."""

    sessions: tuple[SessionMeta, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call an assistant record carries."""

    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to append; created_at None = the server's now."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    created_at: datetime | None = None
    metadata: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as stored, with its per-session seq."""

    seq: int
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: str | None
    created_at: datetime
    metadata: JsonObject | None
    inherited: bool = False
    """Read through a Fork INHERIT's lineage: one of the source's records (DESIGN §4.4)."""


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """ListRecords options, already validated (bounds exclusive, None = unbounded)."""

    limit: int
    offset: int = 0
    role: Role | None = None
    after_seq: int | None = None
    before_seq: int | None = None
    newest_first: bool = False
    page_token: str = ""


@dataclass(frozen=True, slots=True)
class RecordPage:
    """One ListRecords page, ascending seq, and the token of the next ("" on the last)."""

    records: tuple[StoredRecord, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class SessionSlots:
    """The three content slots of a session; None = unset, "" = a stored empty value."""

    session_id: uuid.UUID
    system_prompt: str | None
    memory: str | None
    insight: str | None
    memory_covered_until_seq: int | None = None
    memory_version: int = 0
    """One more on every write of the memory (0: never written)."""

    def get(self, slot: SlotName) -> str | None:
        """The value of one slot by name."""
        value: str | None = getattr(self, slot)
        return value


@dataclass(frozen=True, slots=True)
class CompressionCache:
    """A persisted compression summary and the last seq it covers.

    `lossy`: it names some older records by count only (a catch-up, DESIGN
    §4.3); a background fold replaces it by a complete one.
    """

    summary: str
    covered_until_seq: int
    lossy: bool = False


@dataclass(frozen=True, slots=True)
class TurnLease:
    """A turn lease just taken: its token and when it stops being live."""

    token: uuid.UUID
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Idempotency:
    """A request_id and the fingerprint of the request it came with."""

    request_id: str
    request_hash: bytes


@dataclass(frozen=True, slots=True)
class RememberedResult:
    """An idempotency entry a caller above storage stored (RememberResultOp)."""

    request_hash: bytes
    response: bytes


@dataclass(frozen=True, slots=True)
class SharedMemoryEntry:
    """One entry of a space's shared memory; body None in listings."""

    slug: str
    summary: str
    body: str | None
    created_at: datetime
    updated_at: datetime
    entry_id: uuid.UUID | None = None
    """The entry's surrogate id (events name it, never the slug); None only in an old
    remembered reply."""


@dataclass(frozen=True, slots=True)
class SharedMemoryPage:
    """One page of entries in insertion order, the next token ("" = last), the space's count."""

    entries: tuple[SharedMemoryEntry, ...]
    next_page_token: str
    total_count: int


@dataclass(frozen=True, slots=True)
class Upserted:
    """An upsert's answer: the entry as stored and whether the slug was new."""

    entry: SharedMemoryEntry
    created: bool


@dataclass(frozen=True, slots=True)
class IndexCaps:
    """How much of the shared memory a turn's index may show (DESIGN §4.5)."""

    max_entries: int
    max_tokens: int
    overhead_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TurnBudget:
    """What BeginTurn's window may hold, in estimated tokens (`stello.rules.tokens`); `index`:
    read the shared memory index too, within those caps."""

    window_tokens: int
    reserve_tokens: int = 0
    index: IndexCaps | None = None


@dataclass(frozen=True, slots=True)
class TurnKey:
    """The caller's idempotency scope and request_id of a turn."""

    scope: str
    request_id: str


@dataclass(frozen=True, slots=True)
class TurnState:
    """What a turn starts from (DESIGN §4.3): read under the session's row lock.

    `records` is the window (ascending seq); `tail_tokens` the estimate of every
    record after the cache; `first_tail_seq` the first of them (0 = none).
    """

    session: SessionMeta
    last_seq: int
    system_prompt: str | None
    insight: str | None
    cache: CompressionCache | None
    records: tuple[StoredRecord, ...] = ()
    tail_tokens: int = 0
    first_tail_seq: int = 0
    memory_index: tuple[SharedMemoryEntry, ...] = ()
    memory_total: int = 0
    skills: tuple[str, ...] | None = None
    """The frozen config's skill allow-list; None = not set."""


BusyPolicy = Literal["reject", "enqueue", "interrupt"]
"""What BeginTurn does while another turn holds the session (ROLLBACK is INTERRUPT)."""


@dataclass(frozen=True, slots=True)
class TurnBusy:
    """BeginTurn's busy policy; with ENQUEUE, the waiting call's ticket and the line's cap."""

    policy: BusyPolicy = "reject"
    waiter: uuid.UUID | None = None
    max_waiters: int = 0
    continuation: bool = False


@dataclass(frozen=True, slots=True)
class TurnQueued:
    """An ENQUEUE caller's place: the live tickets ahead, and when its ticket expires."""

    ahead: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class TurnStart:
    """BeginTurn's answer: a remembered entry, or the lease (None for an archived
    session, or a caller queued) and, when a window was asked for, the turn."""

    lease: TurnLease | None = None
    remembered: RememberedResult | None = None
    state: TurnState | None = None
    queued: TurnQueued | None = None
    interrupted: uuid.UUID | None = None
    """The token of the live lease an INTERRUPT took over."""
