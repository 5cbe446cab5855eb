"""The sessions' SQL: creation and commit, metadata, status, label and config.

`SessionStatements` runs them on a unit of work's connection
(`tree_service.unit.TreeTx.sessions`), each change's event queued in its outbox;
`SessionReads` reads a config on the pool. Foreign-key violations (a session
removed by a concurrent delete) become domain errors here, with the asyncpg error
as their cause.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, cast

import asyncpg

from stello.db.pool import fetch
from stello.errors import session_not_found
from stello.stored.events import Event, EventKind, Outbox
from tree_service.models import Node, SessionSpec, Status
from tree_service.nodes.repository import STATUS_OF, to_node
from tree_service.sql import ERASING, NODE_COLUMNS, UNLINKED_NODE_COLUMNS

# -- CreateSession / CommitSession ---------------------------------------------

# Takes the parent's row lock (serialising sibling indexes) and bumps it.
LOCK_PARENT = """
UPDATE sessions SET updated_at = now()
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
RETURNING id
"""

# One statement creates a session and its config: $3 the parent (NULL for a
# root), $4 the label, $5 the source, $6 the provisioning TTL in seconds (NULL =
# visible now), $7 the config (NULL = none). It inserts nothing when the parent or the source
# is not a visible session of the space, and always answers one row that says
# which. A provisional session takes no index yet; a visible child takes the
# next one, so its caller holds the parent's row lock (LOCK_PARENT) first. A
# function (migration 0033) of statements each routed to the space's worker on
# Citus: as one statement, its INSERTs were CTEs, which Citus plans through every
# worker (explore5 F4).
CREATE_SESSION = """
SELECT * FROM stello_create_session($1, $2, $3, $4, $5, $6::float8, $7::jsonb)
"""

# The new session's metadata ($3 keys, $4 values), with its created_at (the
# order of filtered listings), in CreateSession's transaction.
INSERT_METADATA = """
INSERT INTO session_metadata (space_id, session_id, key, value, created_at)
SELECT $1, $2, m.key, m.value, s.created_at
FROM unnest($3::text[], $4::text[]) AS m (key, value)
JOIN sessions s ON s.space_id = $1 AND s.id = $2
"""

# A session's metadata pairs (a fork's source, or before a change).
METADATA = """
SELECT key, value FROM session_metadata WHERE space_id = $1 AND session_id = $2
"""

# UpdateSessionMetadata's lock: a visible session's row, its metadata then
# changed under it (one change at a time per session).
LOCK_METADATA = """
SELECT id FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

# $3 keys, $4 values written (added or replaced).
UPSERT_METADATA = """
INSERT INTO session_metadata AS m (space_id, session_id, key, value, created_at)
SELECT $1, $2, p.key, p.value, s.created_at
FROM unnest($3::text[], $4::text[]) AS p (key, value)
JOIN sessions s ON s.space_id = $1 AND s.id = $2
ON CONFLICT (space_id, session_id, key) DO UPDATE SET value = EXCLUDED.value
"""

# $3 keys removed.
DELETE_METADATA = """
DELETE FROM session_metadata
WHERE space_id = $1 AND session_id = $2 AND key = ANY ($3::text[])
"""

# CommitSession's first statement: row-lock the session (provisional or not)
# and, when it is still provisional, its parent, both in ONE pass in id order
# (FOR NO KEY UPDATE, the lock a bump takes): commits under one parent then
# assign indexes one at a time. Child then parent, a CommitSession deadlocked
# with a trim of one of them whose readers include the other (a trim locks in
# id order: storage's LOCK_FOR_TRIM). The parent is read before the lock: a
# session's parent never changes, and a committed session is provisional no
# more, so a session still provisional once locked had its parent locked too.
# One row per locked session, `target` on the session's, with its metadata
# (CommitSession answers it: no statement of its own); none for the session
# when it does not exist.
LOCK_FOR_COMMIT = f"""
SELECT s.id = $2 AS target, s.provisional_until IS NOT NULL AS provisional,
       CASE WHEN s.id = $2 THEN (SELECT jsonb_object_agg(m.key, m.value)
                                 FROM session_metadata m
                                 WHERE m.space_id = $1 AND m.session_id = s.id) END AS metadata
FROM sessions s
WHERE s.space_id = $1
  AND s.id = ANY (ARRAY[$2::uuid, (SELECT c.parent_id FROM sessions c
                                   WHERE c.space_id = $1 AND c.id = $2
                                     AND c.provisional_until IS NOT NULL)])
  AND (s.id <> $2 OR s.provisional_until IS DISTINCT FROM {ERASING})
ORDER BY s.id
FOR NO KEY UPDATE OF s
"""

TOUCH = """
UPDATE sessions SET updated_at = now()
WHERE space_id = $1 AND id = $2
"""

# max + 1 under the parent's lock (`LOCK_FOR_COMMIT`): deletes leave gaps,
# never duplicates. The parent's bump is here, on the row already locked: no
# statement after the lock takes a row lock out of id order.
COMMIT_SESSION = f"""
WITH parent AS (
    UPDATE sessions p SET updated_at = now()
    WHERE p.space_id = $1
      AND p.id = (SELECT c.parent_id FROM sessions c WHERE c.space_id = $1 AND c.id = $2)
    RETURNING p.id
)
UPDATE sessions s
SET provisional_until = NULL,
    sibling_index = CASE
        WHEN s.parent_id IS NULL THEN 0
        ELSE (SELECT COALESCE(max(c.sibling_index) + 1, 0)
              FROM sessions c WHERE c.space_id = $1 AND c.parent_id = s.parent_id) END
WHERE s.space_id = $1 AND s.id = $2
RETURNING {NODE_COLUMNS}
"""

# No-op (no bump) when the status is already $3. $4: the time of the change (a
# parameter: Citus runs no now() inside a CASE of a modification, DESIGN §4.7).
# An unarchive is activity: it moves last_active_at (and so the day retention
# judges by), or the next sweep would archive again what the user just took back.
SET_STATUS = """
UPDATE sessions
SET status = $3, updated_at = now(),
    archived_at = CASE WHEN $3 = 'archived' THEN $4::timestamptz END,
    last_active_at = CASE WHEN $3 = 'active' THEN GREATEST(last_active_at, $4::timestamptz)
                          ELSE last_active_at END
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL AND status <> $3
"""

LOCK_STATUS = """
SELECT status
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

# No-op (no bump, no row) when the label is already $3, as SET_STATUS.
_SET_LABEL = """
UPDATE sessions s SET label = $3, updated_at = now()
WHERE s.space_id = $1 AND s.id = $2 AND s.label <> $3
RETURNING {columns}
"""
SET_LABEL = _SET_LABEL.format(columns=NODE_COLUMNS)
SET_LABEL_UNLINKED = _SET_LABEL.format(columns=UNLINKED_NODE_COLUMNS)

# -- Config --------------------------------------------------------------------

# One row when the session is visible; config NULL when never written.
GET_CONFIG = """
SELECT c.config
FROM sessions s
LEFT JOIN session_configs c ON c.space_id = $1 AND c.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# Whole overwrite; no row when the session is not visible. The time is the
# insert's (the column's default now()): no now() in an ON CONFLICT DO UPDATE
# on Citus (DESIGN §4.7).
PUT_CONFIG = """
INSERT INTO session_configs (space_id, session_id, config)
SELECT s.space_id, s.id, $3::jsonb
FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
ON CONFLICT (space_id, session_id)
DO UPDATE SET config = EXCLUDED.config, updated_at = EXCLUDED.updated_at
RETURNING config
"""

JsonObject = dict[str, Any]


class SessionReads:
    """The sessions' reads on the pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def config(self, space_id: uuid.UUID, session_id: uuid.UUID) -> tuple[bool, Any]:
        """(visible, stored config JSON or None)."""
        rows = await fetch(self._pool, GET_CONFIG, space_id, session_id)
        return (True, rows[0]["config"]) if rows else (False, None)


class SessionStatements:
    """The sessions' statements of one unit of work, on its connection and outbox."""

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self.outbox = outbox

    def _changed(self, space_id: uuid.UUID, kind: EventKind, session_id: uuid.UUID) -> None:
        self.outbox.add(space_id, Event(kind, session_id))

    async def lock_parent(self, space_id: uuid.UUID, parent_id: uuid.UUID) -> bool:
        """Row-lock and bump a visible parent; False when there is none."""
        return await self._con.fetchrow(LOCK_PARENT, space_id, parent_id) is not None

    async def create_session(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        spec: SessionSpec,
    ) -> Node:
        """Insert a session and its config in one statement; its new node.

        Raises:
            NotFound: the parent or the source is not a visible session of the space.
        """
        try:
            row = await self._con.fetchrow(
                CREATE_SESSION,
                space_id,
                session_id,
                spec.parent_id,
                spec.label,
                spec.source_id,
                spec.provisional_ttl_s,
                spec.config,
            )
        except asyncpg.ForeignKeyViolationError as exc:  # deleted since the statement's read
            if "source" in (exc.constraint_name or "") or spec.parent_id is None:
                raise session_not_found(spec.source_id, "source session") from exc
            raise session_not_found(spec.parent_id, "parent session") from exc
        assert row is not None
        if not row["parent_found"]:
            raise session_not_found(spec.parent_id, "parent session")
        if not row["source_found"]:
            raise session_not_found(spec.source_id, "source session")
        if spec.metadata:
            await self._con.execute(
                INSERT_METADATA,
                space_id,
                session_id,
                list(spec.metadata),
                list(spec.metadata.values()),
            )
        if spec.provisional_ttl_s is None:  # visible at once: committed as it is born
            self._changed(space_id, "session_committed", session_id)
        return Node(
            id=row["id"],
            parent_id=row["parent_id"],
            children=(),
            refs=(),
            depth=row["depth"],
            index=row["sibling_index"] or 0,
            label=row["label"],
            source_session_id=row["source_session_id"],
            status=STATUS_OF[row["status"]],
        )

    async def metadata(self, space_id: uuid.UUID, session_id: uuid.UUID) -> dict[str, str]:
        """A session's metadata pairs."""
        rows = await self._con.fetch(METADATA, space_id, session_id)
        return {r["key"]: r["value"] for r in rows}

    async def lock_metadata(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Row-lock a visible session before its metadata changes; False when absent."""
        return await self._con.fetchval(LOCK_METADATA, space_id, session_id) is not None

    async def change_metadata(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        written: dict[str, str],
        removed: list[str],
    ) -> None:
        """Write and remove a locked session's pairs, bump it, and say so (one event)."""
        if written:
            await self._con.execute(
                UPSERT_METADATA, space_id, session_id, list(written), list(written.values())
            )
        if removed:
            await self._con.execute(DELETE_METADATA, space_id, session_id, removed)
        await self._con.execute(TOUCH, space_id, session_id)
        self._changed(space_id, "metadata_changed", session_id)

    async def lock_for_commit(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool, dict[str, str]] | None:
        """Row-lock a session and, if provisional, its parent, in id order; (provisional?,
        its metadata), None when absent."""
        rows = await self._con.fetch(LOCK_FOR_COMMIT, space_id, session_id)
        target = next((r for r in rows if r["target"]), None)
        if target is None:
            return None
        return bool(target["provisional"]), target["metadata"] or {}

    async def touch(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Bump updated_at (and take the row lock)."""
        await self._con.execute(TOUCH, space_id, session_id)

    async def commit_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node:
        """Give a locked provisional session its index and make it visible."""
        row = await self._con.fetchrow(COMMIT_SESSION, space_id, session_id)
        assert row is not None
        self._changed(space_id, "session_committed", session_id)
        return to_node(row)

    async def set_status(self, space_id: uuid.UUID, session_id: uuid.UUID, status: Status) -> None:
        """Set a visible session's status (no bump and no event when unchanged)."""
        done = await self._con.execute(SET_STATUS, space_id, session_id, status, datetime.now(UTC))
        if done.rpartition(" ")[2] != "0":
            kind: EventKind = "session_archived" if status == "archived" else "session_unarchived"
            self._changed(space_id, kind, session_id)

    async def lock_status(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Status | None:
        """Row-lock a visible session; its status, or None."""
        return cast("Status | None", await self._con.fetchval(LOCK_STATUS, space_id, session_id))

    async def set_label(
        self, space_id: uuid.UUID, session_id: uuid.UUID, label: str, *, linked: bool = True
    ) -> Node | None:
        """Replace a locked session's label; its node (without its children and refs unless
        `linked`), or None (no bump and no event) when the label was already `label`."""
        query = SET_LABEL if linked else SET_LABEL_UNLINKED
        row = await self._con.fetchrow(query, space_id, session_id, label)
        if row is None:
            return None
        self._changed(space_id, "session_updated", session_id)
        return to_node(row)

    async def put_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID, config: JsonObject
    ) -> JsonObject | None:
        """Overwrite a visible session's config; the stored JSON, or None if not visible."""
        try:
            rows = await self._con.fetch(PUT_CONFIG, space_id, session_id, config)
        except asyncpg.ForeignKeyViolationError as exc:
            raise session_not_found(session_id) from exc
        if not rows:
            return None
        self._changed(space_id, "config_put", session_id)
        return cast("JsonObject", rows[0]["config"])
