"""SQL of the space outbox's reading side (DESIGN §4.6): pages of events, retention purge.

Storage owns `space_events` and `space_positions` (migration 0005); both
services write them through `stello.stored.events.Outbox`. Every statement filters by
``space_id`` (the purge joins each space's own row).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import asyncpg

from stello.db.maintenance import across_spaces, bounded, bulk
from stello.stored.events import EventKind

# One statement, one snapshot: the space's newest position, its purge mark
# and the page agree. A space without events has neither row: 0 and 0.
READ_EVENTS = """
SELECT m.last_position, m.purged_through, e.position, e.kind, e.session_id, e.other_id,
       e.first_seq, e.last_seq, e.session_ids, e.entry_id, e.created_at
FROM (SELECT COALESCE(max(last_position), 0) AS last_position,
             COALESCE(max(purged_through), 0) AS purged_through
      FROM space_positions WHERE space_id = $1) m
LEFT JOIN LATERAL (
    SELECT * FROM space_events
    WHERE space_id = $1 AND position > $2
    ORDER BY position
    LIMIT $3
) e ON true
ORDER BY e.position
"""

# pg advisory lock key of the purge ("stellopg"): one replica purges at a time.
PURGE_LOCK_KEY = 0x7374656C6C6F7067
TRY_PURGE_LOCK = "SELECT pg_try_advisory_xact_lock($1)"

# Deletes every space's events older than $1 seconds and raises each space's
# purge mark to the newest position it deleted (cursors below it are expired).
# Ages count from the purge transaction's start (now(), a statement or two
# earlier): Citus runs no volatile function such as clock_timestamp() in a
# modification's WHERE (DESIGN §4.7).
PURGE = """
WITH purged AS (
    DELETE FROM space_events e
    USING space_positions p
    WHERE e.space_id = p.space_id
      AND e.created_at < now() - make_interval(secs => $1)
    RETURNING e.space_id, e.position
), marks AS (
    SELECT space_id, max(position) AS through, count(*) AS n FROM purged GROUP BY space_id
)
UPDATE space_positions p
SET purged_through = GREATEST(p.purged_through, marks.through)
FROM marks
WHERE p.space_id = marks.space_id
RETURNING marks.n
"""

# PURGE in space $2 alone, every table pinned to it (routed to its worker): the purge's
# fallback when a node is out of reach (`Purger`, `stello.db.periodic.Periodic.by_space`).
PURGE_IN_SPACE = """
WITH purged AS (
    DELETE FROM space_events e
    WHERE e.space_id = $2
      AND e.created_at < now() - make_interval(secs => $1)
    RETURNING e.position
)
UPDATE space_positions p
SET purged_through = GREATEST(p.purged_through, marks.through)
FROM (SELECT max(position) AS through, count(*) AS n FROM purged) marks
WHERE p.space_id = $2 AND marks.n > 0
RETURNING marks.n
"""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event as stored: its position in the space's commit order and what it names."""

    position: int
    kind: EventKind
    session_id: uuid.UUID | None
    other_id: uuid.UUID | None
    first_seq: int | None
    last_seq: int | None
    session_ids: tuple[uuid.UUID, ...]
    entry_id: uuid.UUID | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EventRows:
    """A page of events with the space's newest position and purge mark."""

    events: tuple[StoredEvent, ...]
    last_position: int
    purged_through: int


class EventRepository:
    """Reads and purges the outbox, on a unit of work's connection."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def read(self, space_id: uuid.UUID, after: int, limit: int) -> EventRows:
        """Up to `limit` events after position `after`, oldest first (one statement)."""
        rows = await self._con.fetch(READ_EVENTS, space_id, after, limit)
        head = rows[0]
        events = tuple(
            StoredEvent(
                row["position"],
                cast(EventKind, row["kind"]),
                row["session_id"],
                row["other_id"],
                row["first_seq"],
                row["last_seq"],
                tuple(row["session_ids"] or ()),
                row["entry_id"],
                row["created_at"],
            )
            for row in rows
            if row["position"] is not None
        )
        return EventRows(events, head["last_position"], head["purged_through"])

    async def purge(self, older_than_s: float) -> int | None:
        """Delete events older than `older_than_s`; how many, or None if another replica is.

        The lock is a transaction's (`pg_try_advisory_xact_lock`): run it in one.
        """
        if not await self._con.fetchval(TRY_PURGE_LOCK, PURGE_LOCK_KEY):
            return None
        await across_spaces(self._con)  # every space's events: multi-shard
        await bulk(self._con)  # a backlog of expired events may outlast a batch's bound
        return sum(int(row["n"]) for row in await self._con.fetch(PURGE, older_than_s))

    async def purge_space(self, older_than_s: float, space_id: uuid.UUID) -> int | None:
        """`purge` in one space, every statement pinned to it (a round's fallback while a
        node is out of reach); the same lock."""
        if not await self._con.fetchval(TRY_PURGE_LOCK, PURGE_LOCK_KEY):
            return None
        await bounded(self._con)
        rows = await self._con.fetch(PURGE_IN_SPACE, older_than_s, space_id)
        return sum(int(row["n"]) for row in rows)
