"""Domain values of the session tree: what the service takes and answers.

Plain frozen dataclasses, independent of gRPC: the servicer converts protos
into these and back (`tree_service.convert`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

Status = Literal["active", "archived"]
STATUSES: tuple[Status, ...] = ("active", "archived")

ROOT_LABEL = "Root"
CHILD_LABEL = "Session"


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """A session's frozen configuration; None means the field was never set."""

    system_prompt: str | None = None
    skills: tuple[str, ...] | None = None
    compressor_prompt: str | None = None
    consolidator_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """A visible session as a topology node with its direct links."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    children: tuple[uuid.UUID, ...]
    refs: tuple[uuid.UUID, ...]
    depth: int
    index: int
    label: str
    source_session_id: uuid.UUID | None
    status: Status


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """A light node of GetTree (no children or refs lists: linked by parent_id)."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    depth: int
    index: int
    label: str
    status: Status
    turn_count: int
    source_session_id: uuid.UUID | None


class TreeReadTooLong(Exception):
    """Raised by the repository when reading a tree ran past its statement timeout."""


TreeRow: TypeAlias = Sequence[Any]
"""One GetTree row as the statement answers it, read by position (a large tree is 100,000s
of them): id, parent_id (text, None for a top), depth, index, label, status, turn_count,
source_session_id (text or None), and a top's created_at (None below the tops)."""

ROW_ID, ROW_PARENT, ROW_INDEX, ROW_TOP_AT = 0, 1, 3, 8
"""Positions of a `TreeRow`'s id, parent id, sibling index and top's created_at."""


@dataclass(frozen=True, slots=True)
class TreeRows:
    """What GetTree read: the top session(s) by (created_at, id), then all below, unordered."""

    tops: Sequence[TreeRow]
    below: Sequence[TreeRow]

    def __len__(self) -> int:
        return len(self.tops) + len(self.below)


@dataclass(frozen=True, slots=True)
class Summary:
    """A session as ListAll lists it."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    label: str
    status: Status
    turn_count: int
    created_at: datetime
    updated_at: datetime
    last_active_at: datetime
    pinned: bool = False
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SummaryPage:
    """One page of ListAll and the token of the next one ("" on the last)."""

    sessions: tuple[Summary, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class NewSession:
    """A CreateSession request, validated.

    `request_hash` fingerprints the request without its request_id; it is only
    meaningful when `request_id` is non-empty.
    """

    space_id: uuid.UUID
    parent_id: uuid.UUID | None
    label: str | None
    source_session_id: uuid.UUID | None
    config: SessionConfig | None
    provisional: bool
    request_id: str = ""
    request_hash: bytes = b""
    metadata: dict[str, str] = field(default_factory=dict)
    copy_source_metadata: bool = False


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """What CreateSession writes besides the ids: one statement's parameters."""

    parent_id: uuid.UUID | None
    label: str
    source_id: uuid.UUID | None
    provisional_ttl_s: float | None
    """None = visible at once."""
    config: dict[str, Any] | None
    """The stored config as JSON; None = store none."""
    metadata: dict[str, str] = field(default_factory=dict)
    copy_source_metadata: bool = False


@dataclass(frozen=True, slots=True)
class TreeQuery:
    """A GetTree request: the whole forest or one subtree, optionally depth-limited."""

    space_id: uuid.UUID
    root_id: uuid.UUID | None = None
    max_depth: int | None = None


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """ListAll's filters (common.v1 SessionFilter); each None / empty = no filter."""

    metadata: tuple[tuple[str, str], ...] = ()
    label_prefix: str | None = None
    parent_id: uuid.UUID | None = None
    root_id: uuid.UUID | None = None
    roots_only: bool = False
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class PageQuery:
    """A ListAll request: its filters, page size and opaque token."""

    space_id: uuid.UUID
    status: Status | None
    page_size: int
    page_token: str = ""
    filter: SessionFilter = SessionFilter()


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """An UpdateSessionMetadata request, validated."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    set: dict[str, str]
    remove: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SweepQuery:
    """A sweep: provisional sessions older than `older_than_s` (0 = past their TTL)."""

    older_than_s: float = 0.0
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class SweptSession:
    """A provisional session removed (or, on a dry run, due) by a sweep."""

    space_id: uuid.UUID
    id: uuid.UUID
