"""SQL of BeginTurn's turn (DESIGN §4.3): the locked session row and the window's probes.

The row comes with its slots, newest summary and the skill allow-list of its
frozen config (`session_configs`, which the tree writes; storage only reads it).

Part of the storage repository (`storage_service.records.repository.Repository`
extends `TurnRepository`). Every probe is one index lookup whatever the
history's length: the token columns of migration 0006 turn "the newest records
within a budget" into the first record whose cumulative estimate reaches
(total - budget), found on the ``records_tokens`` index.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from storage_service.models import CompressionCache, SessionMeta
from storage_service.records.lineage import PARTS
from storage_service.sessions.repository import meta_of

# FOR UPDATE OF s: a Transact (a turn's commit) and a slot put (FOR KEY SHARE)
# wait until the turn has been read, so what it reads is one consistent state.
LOCK_TURN = """
SELECT s.id, s.label, s.status, s.turn_count, s.created_at, s.updated_at, s.last_active_at,
       s.last_seq, s.token_total, s.provisional_until IS NULL AS visible,
       sl.system_prompt, sl.insight, c.summary, c.covered_until_seq, c.lossy,
       cf.config -> 'skills' AS skills
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = s.space_id AND sl.session_id = s.id
LEFT JOIN session_configs cf ON cf.space_id = s.space_id AND cf.session_id = s.id
LEFT JOIN LATERAL (
    SELECT summary, covered_until_seq, lossy FROM compression_caches
    WHERE space_id = s.space_id AND session_id = s.id
    ORDER BY covered_until_seq DESC
    LIMIT 1
) c ON true
WHERE s.space_id = $1 AND s.id = $2
FOR UPDATE OF s
"""

# Every probe goes over the session's view (`PARTS`, DESIGN §4.4): one index
# probe per part, the parts being its inherited segments and its own records.

# The first record after a seq, with the cumulative estimate before it.
FIRST_AFTER = f"""
WITH {PARTS}
SELECT x.seq, x.before
FROM parts p
CROSS JOIN LATERAL (
    SELECT seq, token_cumulative - token_estimate AS before
    FROM records
    WHERE space_id = $1 AND session_id = p.holder_id
      AND seq >= p.from_seq AND seq <= p.to_seq AND seq > $3
    ORDER BY seq
    LIMIT 1
) x
ORDER BY x.seq
LIMIT 1
"""

# The first record whose cumulative estimate reaches $3 (records_tokens). The
# cumulative grows with seq along the view, so the record is in the first
# part whose last record reaches $3; there it is that part's first record
# when the records before it already reach $3 (the part starts after a trim),
# else the holder's first record (by seq) reaching $3, which lies in the
# part: the holder's rows below the part are on the same line before it, and
# its last record in the part reaches $3. That probe names no seq bound, so it
# is one descent of records_tokens (cumulative, seq) whatever the statistics.
REACHING = f"""
WITH {PARTS}, chosen AS (
    SELECT p.holder_id, p.from_seq, p.to_seq
    FROM parts p
    CROSS JOIN LATERAL (
        SELECT token_cumulative AS cumulative
        FROM records
        WHERE space_id = $1 AND session_id = p.holder_id
          AND seq >= p.from_seq AND seq <= p.to_seq
        ORDER BY seq DESC
        LIMIT 1
    ) e
    WHERE e.cumulative >= $3
    ORDER BY p.from_seq
    LIMIT 1
), first AS (
    SELECT c.holder_id, c.to_seq, f.seq, f.before
    FROM chosen c
    CROSS JOIN LATERAL (
        SELECT seq, token_cumulative - token_estimate AS before
        FROM records
        WHERE space_id = $1 AND session_id = c.holder_id AND seq >= c.from_seq
        ORDER BY seq
        LIMIT 1
    ) f
)
SELECT seq, before FROM first WHERE before >= $3
UNION ALL
SELECT x.seq, x.before
FROM first f
CROSS JOIN LATERAL (
    SELECT seq, token_cumulative - token_estimate AS before
    FROM records
    WHERE space_id = $1 AND session_id = f.holder_id AND token_cumulative >= $3
    ORDER BY token_cumulative, seq
    LIMIT 1
) x
WHERE f.before < $3
"""

# The nearest record before $3 that is not a tool result: the caller of the
# tool records after it (a backward walk that stops at the first match).
CALLER_BEFORE = f"""
WITH {PARTS}
SELECT x.seq, x.role, x.calls
FROM parts p
CROSS JOIN LATERAL (
    SELECT seq, role, tool_calls IS NOT NULL AND jsonb_array_length(tool_calls) > 0 AS calls
    FROM records
    WHERE space_id = $1 AND session_id = p.holder_id
      AND seq >= p.from_seq AND seq <= p.to_seq AND seq < $3 AND role <> 'tool'
    ORDER BY seq DESC
    LIMIT 1
) x
ORDER BY x.seq DESC
LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class LockedTurn:
    """The session row of a turn, locked, with its slots and newest summary."""

    visible: bool
    meta: SessionMeta
    last_seq: int
    token_total: int
    system_prompt: str | None
    insight: str | None
    cache: CompressionCache | None
    skills: tuple[str, ...] | None = None
    """The frozen config's skill allow-list (the tree writes it); None = not set."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A record's seq and the cumulative estimate of the records before it."""

    seq: int
    before: int


def _mark(row: asyncpg.Record | None) -> Mark | None:
    return None if row is None else Mark(row["seq"], row["before"])


class TurnRepository:
    """The turn's statements, run on one connection."""

    _con: asyncpg.Connection

    async def lock_turn(self, space_id: uuid.UUID, session_id: uuid.UUID) -> LockedTurn | None:
        """Lock the session's row; its meta, slots and cache (None when absent)."""
        row = await self._con.fetchrow(LOCK_TURN, space_id, session_id)
        if row is None:
            return None
        cache = None
        if row["summary"] is not None:
            cache = CompressionCache(row["summary"], row["covered_until_seq"], row["lossy"])
        meta = meta_of(row)
        return LockedTurn(
            visible=row["visible"],
            meta=meta,
            last_seq=row["last_seq"],
            token_total=row["token_total"],
            system_prompt=row["system_prompt"],
            insight=row["insight"],
            cache=cache,
            skills=tuple(row["skills"]) if row["skills"] is not None else None,
        )

    async def first_after(
        self, space_id: uuid.UUID, session_id: uuid.UUID, seq: int
    ) -> Mark | None:
        """The first record with a seq above `seq`; None when there is none."""
        return _mark(await self._con.fetchrow(FIRST_AFTER, space_id, session_id, seq))

    async def reaching(
        self, space_id: uuid.UUID, session_id: uuid.UUID, cumulative: int
    ) -> Mark | None:
        """The first record whose cumulative estimate is at least `cumulative`."""
        return _mark(await self._con.fetchrow(REACHING, space_id, session_id, cumulative))

    async def caller_before(
        self, space_id: uuid.UUID, session_id: uuid.UUID, seq: int
    ) -> int | None:
        """The seq of the assistant record whose tool calls the tool records just before
        `seq` answer; None when the nearest other record is not such a call."""
        row = await self._con.fetchrow(CALLER_BEFORE, space_id, session_id, seq)
        if row is None or row["role"] != "assistant" or not row["calls"]:
            return None
        seq_: int = row["seq"]
        return seq_
