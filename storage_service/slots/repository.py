"""SQL of the content slots (system prompt, insight, memory).

Owns `session_slots` (the compression cache is `caches`'). Slot columns keep NULL for
"unset" and '' as a stored value. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import asyncpg

from stello.errors import Aborted, OutOfRange
from stello.reasons import CONCURRENT_MODIFICATION
from stello.stored.events import EventKind, Outbox
from storage_service.models import (
    SLOT_NAMES,
    SessionMeta,
    SessionSlots,
    SlotName,
    session_not_found,
)
from storage_service.sessions.repository import meta_of, session_event

GET_SLOTS = """
SELECT s.id AS session_id, sl.system_prompt, sl.memory, sl.insight, sl.memory_covered_until_seq,
       sl.memory_version
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = s.space_id AND sl.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# $3, $4, $5: whether to read the system prompt, the memory, the insight (a slot
# not read is NULL and never detoasted). Driven by the ids asked for ($2, distinct,
# in request order): each is one LATERAL primary-key lookup with LIMIT 1 in
# sessions and in session_slots, which no plan can turn into a scan of the space,
# whatever the statistics (on a space bulk-loaded and never analyzed, PostgreSQL
# 15 read all of its sessions for a `s.id = ANY($2)` page of 100).
# Byte-bounded: `fits` while the running total of each row's slot bytes plus $6
# (its framing in the reply) stays within $7, and for the first row found always;
# a row past that comes back with its slots NULL and unread (octet_length takes a
# TOAST value's length from its pointer: the slots it cannot carry cost no reads).
BATCH_GET_SLOTS = """
SELECT n, session_id, fits,
       CASE WHEN fits THEN system_prompt END AS system_prompt,
       CASE WHEN fits THEN memory END AS memory,
       CASE WHEN fits THEN insight END AS insight
FROM (
    SELECT wanted.n, s.id AS session_id, sl.system_prompt, sl.memory, sl.insight,
           row_number() OVER w = 1 OR sum(
               $6 + coalesce(octet_length(sl.system_prompt), 0)
               + coalesce(octet_length(sl.memory), 0) + coalesce(octet_length(sl.insight), 0)
           ) OVER w <= $7 AS fits
    FROM unnest($2::uuid[]) WITH ORDINALITY AS wanted(id, n)
    CROSS JOIN LATERAL (
        SELECT v.id FROM sessions v
        WHERE v.space_id = $1 AND v.id = wanted.id AND v.provisional_until IS NULL
        LIMIT 1
    ) s
    LEFT JOIN LATERAL (
        SELECT CASE WHEN $3 THEN c.system_prompt END AS system_prompt,
               CASE WHEN $4 THEN c.memory END AS memory,
               CASE WHEN $5 THEN c.insight END AS insight
        FROM session_slots c
        WHERE c.space_id = $1 AND c.session_id = s.id
        LIMIT 1
    ) sl ON true
    WINDOW w AS (ORDER BY wanted.n)
) sized
ORDER BY n
"""

SLOTS_FRAMING_BYTES = 64
"""A SessionSlots' bytes in a reply besides its slots' text: its tag and length (at most
1 + 5), the session id (38) and each slot's tag and length (at most 3 x 6), and a margin."""

# GetSession with slots: the meta and the slots asked for ($3, $4, $5 as in
# BATCH_GET_SLOTS), in one statement (a joined view reads storage once).
GET_SESSION_WITH_SLOTS = """
SELECT s.id, s.label, s.status, s.turn_count, s.created_at, s.updated_at, s.last_active_at,
       s.pinned,
       CASE WHEN $3 THEN sl.system_prompt END AS system_prompt,
       CASE WHEN $4 THEN sl.memory END AS memory,
       CASE WHEN $5 THEN sl.insight END AS insight
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = s.space_id AND sl.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# The session row is share-locked before the slot row is written, the order a
# Transact locks them in (so the two never deadlock); no session, no row. An
# update takes the insert's time (`EXCLUDED.updated_at`, the column's default
# now()): Citus runs no now() in an ON CONFLICT DO UPDATE (DESIGN §4.7). The
# column cannot be a parameter, so one template gives the statement of each
# slot (its names are the fixed SLOT_NAMES, never input).
_PUT_SLOT = """
WITH s AS (SELECT id FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity' FOR KEY SHARE)
INSERT INTO session_slots (space_id, session_id, {column})
SELECT $1, s.id, $3::text FROM s
ON CONFLICT (space_id, session_id)
DO UPDATE SET {column} = EXCLUDED.{column}, updated_at = EXCLUDED.updated_at
RETURNING true
"""
PUT_SLOT: dict[SlotName, str] = {slot: _PUT_SLOT.format(column=slot) for slot in SLOT_NAMES}

# The memory's put makes its version one more (migration 0012): a consolidation
# saving over the memory it read (MemoryVersionCheck) never overwrites it.
PUT_SLOT["memory"] = """
WITH s AS (SELECT id FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity' FOR KEY SHARE)
INSERT INTO session_slots (space_id, session_id, memory, memory_version)
SELECT $1, s.id, $3::text, 1 FROM s
ON CONFLICT (space_id, session_id)
DO UPDATE SET memory = EXCLUDED.memory, memory_version = session_slots.memory_version + 1,
              updated_at = EXCLUDED.updated_at
RETURNING true
"""

# CopySystemPromptOp: the visible source's non-empty prompt onto an existing
# session, as PUT_SLOT writes it; found flags for both and whether it copied. A
# function of plain statements (migration 0034: routed on Citus, where the INSERT
# as a CTE was planned through the coordinator).
COPY_SYSTEM_PROMPT = """
SELECT target_found, source_found, copied FROM stello_copy_system_prompt($1, $2, $3)
"""

# A consolidation's memory, with the last seq it covers (migration 0006), which
# never goes down and never passes the session's last seq: a lower one, or one
# beyond, writes nothing (no row returned).
PUT_MEMORY_COVERING = """
WITH s AS (SELECT id FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity' AND last_seq >= $4 FOR KEY SHARE)
INSERT INTO session_slots (space_id, session_id, memory, memory_covered_until_seq, memory_version)
SELECT $1, s.id, $3::text, $4::bigint, 1 FROM s
ON CONFLICT (space_id, session_id)
DO UPDATE SET memory = EXCLUDED.memory,
              memory_covered_until_seq = EXCLUDED.memory_covered_until_seq,
              memory_version = session_slots.memory_version + 1,
              updated_at = EXCLUDED.updated_at
WHERE session_slots.memory_covered_until_seq IS NULL
   OR session_slots.memory_covered_until_seq <= EXCLUDED.memory_covered_until_seq
RETURNING true
"""

# Why PUT_MEMORY_COVERING wrote nothing: the session's last seq (no row: not there).
LAST_SEQ = """
SELECT last_seq FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity'
"""

# MemoryVersionCheck (the session's row is locked by the Transact).
MEMORY_VERSION = """
SELECT memory_version FROM session_slots WHERE space_id = $1 AND session_id = $2
"""

CLEAR_INSIGHT = """
WITH cleared AS (
    UPDATE session_slots SET insight = NULL, updated_at = now()
    WHERE space_id = $1 AND session_id = $2 AND insight IS NOT NULL
    RETURNING true
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity') AS found,
       EXISTS (SELECT 1 FROM cleared) AS cleared
"""

# FOR UPDATE waits for a concurrent consumer and then reads its result, so of
# two concurrent consumers exactly one sees the insight.
LOCK_INSIGHT = """
SELECT (SELECT provisional_until IS NULL
        FROM sessions WHERE space_id = $1 AND id = $2) AS visible,
       (SELECT insight FROM session_slots
        WHERE space_id = $1 AND session_id = $2 FOR UPDATE) AS insight
"""

LOCK_INSIGHTS = """
SELECT session_id, insight FROM session_slots
WHERE space_id = $1 AND session_id = ANY($2::uuid[])
ORDER BY session_id
FOR UPDATE
"""


SLOT_PUT_EVENTS: dict[SlotName, EventKind] = {
    "system_prompt": "system_prompt_put",
    "insight": "insight_put",
    "memory": "memory_put",
}


def _slots(row: asyncpg.Record) -> SessionSlots:
    covered = row["memory_covered_until_seq"] if "memory_covered_until_seq" in row else None
    version = row["memory_version"] if "memory_version" in row else None
    return SessionSlots(
        row["session_id"],
        row["system_prompt"],
        row["memory"],
        row["insight"],
        covered,
        version or 0,
    )


class SlotRepository:
    """Slot statements, on a unit of work's connection and outbox."""

    __slots__ = ("_con", "_outbox")

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self._outbox = outbox

    async def get(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionSlots | None:
        """The slots of a visible session, or None."""
        row = await self._con.fetchrow(GET_SLOTS, space_id, session_id)
        return None if row is None else _slots(row)

    async def batch_get(
        self,
        space_id: uuid.UUID,
        session_ids: Sequence[uuid.UUID],
        slots: AbstractSet[SlotName],
        max_bytes: int,
    ) -> tuple[list[SessionSlots], int | None]:
        """The `slots` of the visible sessions among `session_ids` (distinct), in their
        order, while they fit `max_bytes` of reply (the first always); and the index in
        `session_ids` of the first one left out, None when none was."""
        wanted = ("system_prompt" in slots, "memory" in slots, "insight" in slots)
        rows = await self._con.fetch(
            BATCH_GET_SLOTS,
            space_id,
            list(session_ids),
            *wanted,
            SLOTS_FRAMING_BYTES,
            max_bytes,
        )
        found = [_slots(row) for row in rows if row["fits"]]
        cut = next((row["n"] - 1 for row in rows if not row["fits"]), None)
        return found, cut

    async def get_with_meta(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slots: AbstractSet[SlotName]
    ) -> tuple[SessionMeta, SessionSlots] | None:
        """The meta and the `slots` of a visible session (the others None), or None."""
        wanted = ("system_prompt" in slots, "memory" in slots, "insight" in slots)
        row = await self._con.fetchrow(GET_SESSION_WITH_SLOTS, space_id, session_id, *wanted)
        if row is None:
            return None
        meta = meta_of(row)
        return meta, SessionSlots(row["id"], row["system_prompt"], row["memory"], row["insight"])

    async def put(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slot: SlotName, content: str
    ) -> None:
        """Overwrite one slot; NotFound when the session does not exist."""
        try:
            stored = await self._con.fetchval(PUT_SLOT[slot], space_id, session_id, content)
        except asyncpg.ForeignKeyViolationError as exc:  # deleted under us
            raise session_not_found(session_id) from exc
        if not stored:
            raise session_not_found(session_id)
        self._outbox.add(space_id, session_event(SLOT_PUT_EVENTS[slot], session_id))

    async def copy_system_prompt(
        self, space_id: uuid.UUID, session_id: uuid.UUID, source_id: uuid.UUID
    ) -> bool:
        """Copy the source's non-empty system prompt onto the session; whether it had one.

        Raises:
            NotFound: the session does not exist, or the source is not a visible session.
        """
        try:
            row = await self._con.fetchrow(COPY_SYSTEM_PROMPT, space_id, session_id, source_id)
        except asyncpg.ForeignKeyViolationError as exc:  # deleted under us
            raise session_not_found(session_id) from exc
        assert row is not None
        if not row["target_found"]:
            raise session_not_found(session_id)
        if not row["source_found"]:
            raise session_not_found(source_id)
        if row["copied"]:
            event = session_event(SLOT_PUT_EVENTS["system_prompt"], session_id)
            self._outbox.add(space_id, event)
        return bool(row["copied"])

    async def put_memory_covering(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        content: str,
        covered_until_seq: int,
        field: str = "covered_until_seq",
    ) -> None:
        """Overwrite the memory and the seq it covers.

        Raises:
            NotFound: the session is absent.
            OutOfRange: `covered_until_seq` (the request's `field`) is beyond the session's
                last seq (a memory covering seqs not yet assigned would never cover the
                records they get).
            Aborted: reason CONCURRENT_MODIFICATION; the stored memory covers more.
        """
        try:
            stored = await self._con.fetchval(
                PUT_MEMORY_COVERING, space_id, session_id, content, covered_until_seq
            )
        except asyncpg.ForeignKeyViolationError as exc:  # deleted under us
            raise session_not_found(session_id) from exc
        if not stored:
            last = await self._con.fetchrow(LAST_SEQ, space_id, session_id)
            if last is None:
                raise session_not_found(session_id)
            if covered_until_seq > last["last_seq"]:
                raise OutOfRange.field(
                    field,
                    f"{covered_until_seq} is beyond the session's last seq "
                    f"({last['last_seq']}); nothing was written",
                )
            raise Aborted(
                f"the memory of session {session_id} already covers records after seq "
                f"{covered_until_seq}; nothing was written (the covered seq never goes down)",
                reason=CONCURRENT_MODIFICATION,
            )
        self._outbox.add(space_id, session_event("memory_put", session_id))

    async def memory_version(self, space_id: uuid.UUID, session_id: uuid.UUID) -> int:
        """The memory's version (0 when never written)."""
        version = await self._con.fetchval(MEMORY_VERSION, space_id, session_id)
        return int(version or 0)

    async def clear_insight(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Delete the insight; False when the session does not exist."""
        row = await self._con.fetchrow(CLEAR_INSIGHT, space_id, session_id)
        assert row is not None  # a SELECT without FROM answers one row
        if row["cleared"]:
            self._outbox.add(space_id, session_event("insight_cleared", session_id))
        return bool(row["found"])

    async def lock_insight(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool | None, str | None]:
        """Lock the slot row; (visible: None when absent, the insight)."""
        row = await self._con.fetchrow(LOCK_INSIGHT, space_id, session_id)
        assert row is not None  # a SELECT without FROM answers one row
        return row["visible"], row["insight"]

    async def lock_insights(
        self, space_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, str | None]:
        """Lock the slot rows of these sessions; their insights (missing row = None)."""
        rows = await self._con.fetch(LOCK_INSIGHTS, space_id, list(session_ids))
        return {row["session_id"]: row["insight"] for row in rows}
