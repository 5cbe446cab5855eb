"""SQL of a space's shared memory (DESIGN §4.5, migration 0007).

Entries are ordered by (created_at, slug) within their space: an upsert of an
existing slug keeps its created_at, so it keeps its place; a new one takes
`clock_timestamp()`, so it goes last. Every write queues its event on the
unit of work's outbox (no session: the event names the entry by its surrogate
`entry_id`, never by its slug: events carry no user text, DESIGN §4.6). Every
statement filters by ``space_id``.

The space's count is one row (`shared_memory_counts`, migration 0014) that the
writes keep in their transaction: a read that answers the count (every turn
that shows the index) reads that row and its page, never the whole space; a
new entry counts itself in under that row's lock, up to the space's cap.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from stello.errors import space_not_found
from stello.stored import reply_erasure
from stello.stored.events import Event, Outbox
from storage_service.models import SharedMemoryEntry, Upserted

# One statement, one snapshot: the space's count and the page agree. A space
# without entries answers one row with NULL entry columns. Reads the count's
# row and at most $2 entries, however many the space holds: the first page, or
# (LIST_ENTRIES_AFTER) the page after the key ($3, $4), written out so that a
# plan that knows no parameter starts its walk of `shared_memory_order` there
# (`$3 IS NULL OR ...` made it walk from the space's first entry).
_LIST_ENTRIES = """
SELECT m.total, e.slug, e.summary, e.created_at, e.updated_at, e.entry_id
FROM (SELECT COALESCE((SELECT entries FROM shared_memory_counts WHERE space_id = $1), 0)
             AS total) m
LEFT JOIN LATERAL (
    SELECT slug, summary, created_at, updated_at, entry_id
    FROM shared_memory
    WHERE space_id = $1{after}
    ORDER BY created_at, slug
    LIMIT $2
) e ON true
ORDER BY e.created_at, e.slug
"""
LIST_ENTRIES = _LIST_ENTRIES.format(after="")
LIST_ENTRIES_AFTER = _LIST_ENTRIES.format(
    after="\n      AND (created_at, slug) > ($3::timestamptz, $4::text)"
)

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

# A new entry counts itself in, unless the space already holds $2 (no row
# answered: the caller refuses the entry, and its transaction rolls back).
# Concurrent creators wait on the row, then recheck against the new count.
COUNT_ADDED = """
INSERT INTO shared_memory_counts AS c (space_id, entries) VALUES ($1, 1)
ON CONFLICT (space_id) DO UPDATE SET entries = c.entries + 1
WHERE c.entries < $2
RETURNING entries
"""

COUNT_REMOVED = """
UPDATE shared_memory_counts SET entries = entries - 1 WHERE space_id = $1 AND entries > 0
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
        if after is None:
            rows = await self._con.fetch(LIST_ENTRIES, space_id, limit)
        else:
            rows = await self._con.fetch(LIST_ENTRIES_AFTER, space_id, limit, *after)
        entries = [_entry(row, None) for row in rows if row["slug"] is not None]
        return entries, int(rows[0]["total"])

    async def get(self, space_id: uuid.UUID, slug: str) -> SharedMemoryEntry | None:
        """The entry, body included, or None."""
        row = await self._con.fetchrow(GET_ENTRY, space_id, slug)
        return None if row is None else _entry(row, row["body"])

    async def upsert(
        self, space_id: uuid.UUID, slug: str, summary: str, body: str, max_entries: int
    ) -> Upserted | None:
        """Create the entry at the end of the order, or replace it in its place; None (and
        its count unchanged) when it would be a new one past `max_entries` (the caller's
        transaction must then roll back: the entry row is written)."""
        try:
            row = await self._con.fetchrow(
                UPSERT_ENTRY, space_id, slug, summary, body, uuid.uuid4()
            )
        except asyncpg.ForeignKeyViolationError as exc:  # the space was deleted under us
            raise space_not_found(space_id) from exc
        assert row is not None  # an upsert answers its row
        if row["created"] and await self._con.fetchval(COUNT_ADDED, space_id, max_entries) is None:
            return None
        entry_id = row["entry_id"]
        self._outbox.add(space_id, Event("shared_memory_upserted", entry_id=entry_id))
        entry = SharedMemoryEntry(
            slug, summary, body, row["created_at"], row["updated_at"], entry_id
        )
        return Upserted(entry, bool(row["created"]))

    async def link_reply(
        self, space_id: uuid.UUID, scope: str, request_id: str, entry_id: uuid.UUID
    ) -> None:
        """Link the reply stored under the key in this transaction to the entry it holds."""
        await reply_erasure.link_entry(self._con, space_id, scope, request_id, entry_id)

    async def remove(self, space_id: uuid.UUID, slug: str) -> bool:
        """Delete the entry, and erase the remembered replies that hold it (DESIGN §4.8);
        False when there was none (then no event)."""
        entry_id = await self._con.fetchval(REMOVE_ENTRY, space_id, slug)
        if entry_id is not None:
            await reply_erasure.erase_entry_replies(self._con, space_id, entry_id)
            await self._con.execute(COUNT_REMOVED, space_id)
            self._outbox.add(space_id, Event("shared_memory_removed", entry_id=entry_id))
        return entry_id is not None
