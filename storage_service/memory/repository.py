"""SQL of a space's shared memory (DESIGN §4.5, migration 0007).

Entries are ordered by (created_at, slug) within their space: an upsert of an
existing slug keeps its created_at, so it keeps its place; a new one takes
`clock_timestamp()`, so it goes last. Every write queues its event on the
unit of work's outbox (no session: the event names the entry by its surrogate
`entry_id`, never by its slug: events carry no user text, DESIGN §4.6). Every
statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from stello.errors import NotFound
from stello.events import Event, Outbox
from storage_service.models import SharedMemoryEntry, Upserted

# One statement, one snapshot: the space's count and the page agree. A space
# without entries answers one row with NULL entry columns.
LIST_ENTRIES = """
SELECT m.total, e.slug, e.summary, e.created_at, e.updated_at, e.entry_id
FROM (SELECT count(*) AS total FROM shared_memory WHERE space_id = $1) m
LEFT JOIN LATERAL (
    SELECT slug, summary, created_at, updated_at, entry_id
    FROM shared_memory
    WHERE space_id = $1
      AND ($2::timestamptz IS NULL OR (created_at, slug) > ($2, $3::text))
    ORDER BY created_at, slug
    LIMIT $4
) e ON true
ORDER BY e.created_at, e.slug
"""

GET_ENTRY = """
SELECT slug, summary, body, created_at, updated_at, entry_id
FROM shared_memory
WHERE space_id = $1 AND slug = $2
"""

# xmax is 0 on a row this statement inserted (not on one it updated). $5: the id
# a new entry gets (a replaced one keeps its own).
UPSERT_ENTRY = """
INSERT INTO shared_memory AS m (space_id, slug, summary, body, created_at, updated_at, entry_id)
VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp(), $5)
ON CONFLICT (space_id, slug)
DO UPDATE SET summary = EXCLUDED.summary, body = EXCLUDED.body, updated_at = EXCLUDED.updated_at
RETURNING created_at, updated_at, (xmax = 0) AS created, entry_id
"""

REMOVE_ENTRY = """
DELETE FROM shared_memory WHERE space_id = $1 AND slug = $2 RETURNING entry_id
"""


def _entry(row: asyncpg.Record, body: str | None) -> SharedMemoryEntry:
    return SharedMemoryEntry(
        row["slug"], row["summary"], body, row["created_at"], row["updated_at"], row["entry_id"]
    )


class MemoryRepository:
    """Shared memory statements, on a unit of work's connection and outbox."""

    __slots__ = ("_con", "_outbox")

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self._outbox = outbox

    async def page(
        self, space_id: uuid.UUID, after: tuple[datetime, str] | None, limit: int
    ) -> tuple[list[SharedMemoryEntry], int]:
        """Up to `limit` entries (no bodies) after the key `after`, and the space's count."""
        after_at, after_slug = after if after is not None else (None, None)
        rows = await self._con.fetch(LIST_ENTRIES, space_id, after_at, after_slug, limit)
        entries = [_entry(row, None) for row in rows if row["slug"] is not None]
        return entries, int(rows[0]["total"])

    async def get(self, space_id: uuid.UUID, slug: str) -> SharedMemoryEntry | None:
        """The entry, body included, or None."""
        row = await self._con.fetchrow(GET_ENTRY, space_id, slug)
        return None if row is None else _entry(row, row["body"])

    async def upsert(self, space_id: uuid.UUID, slug: str, summary: str, body: str) -> Upserted:
        """Create the entry at the end of the order, or replace it in its place."""
        try:
            row = await self._con.fetchrow(
                UPSERT_ENTRY, space_id, slug, summary, body, uuid.uuid4()
            )
        except asyncpg.ForeignKeyViolationError as exc:  # the space was deleted under us
            raise NotFound(f"space {space_id} not found") from exc
        assert row is not None  # an upsert answers its row
        entry_id = row["entry_id"]
        self._outbox.add(space_id, Event("shared_memory_upserted", entry_id=entry_id))
        entry = SharedMemoryEntry(
            slug, summary, body, row["created_at"], row["updated_at"], entry_id
        )
        return Upserted(entry, bool(row["created"]))

    async def remove(self, space_id: uuid.UUID, slug: str) -> bool:
        """Delete the entry; False when there was none (then no event)."""
        entry_id = await self._con.fetchval(REMOVE_ENTRY, space_id, slug)
        if entry_id is not None:
            self._outbox.add(space_id, Event("shared_memory_removed", entry_id=entry_id))
        return entry_id is not None
