"""SQL of a turn (DESIGN §4.2, §4.3): the lease, the row's turn columns, BeginTurn's locked read.

The lease (`sessions.turn_token`, `turn_expires_at`) is taken, renewed and given
back by one statement each, under the session's row lock; an INTERRUPT takes it
over and records the token it stopped (`interrupted_turn_tokens`, the newest
16: migration 0037), which that turn's renewal then reports; a commit bumps
`turn_count` and `last_active_at`. BeginTurn's read locks the row and brings its
slots, newest summary and the skill allow-list of its frozen config
(`session_configs`, which the tree writes; storage only reads it). Every
statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from stello.stored.events import Outbox
from storage_service.models import CompressionCache, SessionMeta
from storage_service.sessions.repository import meta_of, session_event

# FOR UPDATE OF s: a Transact (a turn's commit) and a slot put (FOR KEY SHARE)
# wait until the turn has been read, so what it reads is one consistent state.
# The newest summary is joined by its seq (the key's last column: one index
# probe), not by a LATERAL ... LIMIT 1, which Citus does not run with a row
# lock (DESIGN §4.7).
LOCK_TURN = """
SELECT s.id, s.label, s.status, s.turn_count, s.created_at, s.updated_at, s.last_active_at,
       s.pinned,
       s.last_seq, s.token_total, s.provisional_until IS NULL AS visible,
       sl.system_prompt, sl.insight, c.summary, c.covered_until_seq, c.lossy,
       cf.config -> 'skills' AS skills, s.turn_token,
       s.turn_token IS NOT NULL AND s.turn_expires_at > now() AS lease_live, now() AS now,
       EXISTS (SELECT 1 FROM turn_waiters w
               WHERE w.space_id = $1 AND w.session_id = $2 AND w.expires_at > now()) AS queued
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = s.space_id AND sl.session_id = s.id
LEFT JOIN session_configs cf ON cf.space_id = s.space_id AND cf.session_id = s.id
LEFT JOIN compression_caches c
  ON c.space_id = s.space_id AND c.session_id = s.id
 AND c.covered_until_seq = (SELECT max(covered_until_seq) FROM compression_caches
                            WHERE space_id = $1 AND session_id = $2)
WHERE s.space_id = $1 AND s.id = $2
FOR UPDATE OF s
"""

# Takes the lease unless a live one exists; a concurrent taker blocks on the
# row lock, then re-checks the condition against the winner's lease.
BEGIN_TURN = """
WITH taken AS (
    UPDATE sessions
    SET turn_token = $3, turn_expires_at = now() + make_interval(secs => $4)
    WHERE space_id = $1 AND id = $2 AND provisional_until IS DISTINCT FROM 'infinity'
      AND (turn_token IS NULL OR turn_expires_at <= now())
    RETURNING turn_expires_at
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity') AS found,
       (SELECT turn_expires_at FROM taken) AS expires_at
"""

# INTERRUPT (DESIGN §4.2): the lease is taken whoever holds it, and a live
# holder's token is recorded as interrupted (RenewTurn tells that turn), after
# the 15 newest recorded before it (so each turn of a chain of INTERRUPTs
# faster than a renewal is told). $5 is the transaction's time, read under the
# row lock (DESIGN §4.7).
TAKE_OVER_TURN = """
UPDATE sessions
SET turn_token = $3, turn_expires_at = $5::timestamptz + make_interval(secs => $4),
    interrupted_turn_tokens = CASE
        WHEN turn_token IS NOT NULL AND turn_expires_at > $5::timestamptz
        THEN (COALESCE(interrupted_turn_tokens, '{}') || turn_token)
            [GREATEST(cardinality(interrupted_turn_tokens) - 14, 1):]
        ELSE interrupted_turn_tokens END
WHERE space_id = $1 AND id = $2
RETURNING turn_expires_at
"""

# Whether the session waits for client tool results: its newest record that is
# not a tool result is an assistant record with a call no tool record after it
# answers. Reads one tool group at most (backwards on the key from the newest).
# An inherited history never ends open (a fork leaves an open group at its cut
# out), so the session's own rows tell. The answered ids are one range of the
# key after that record (an uncorrelated ARRAY, read once), not a NOT EXISTS:
# the planner ran that as an anti join whose inner side read every tool record
# of the session (10,001 of a 30,000-record history to check 3 calls). The
# range is closed (no seq is above the largest bigint): an open one from a value
# the plan does not know is costed as a third of the session, and a session
# that fills the table was then read by a Seq Scan; a closed one, as a few rows.
OPEN_TOOL_CALLS = """
WITH last_call AS (
    SELECT seq, tool_calls FROM records
    WHERE space_id = $1 AND session_id = $2 AND role <> 'tool'
    ORDER BY seq DESC
    LIMIT 1
)
SELECT EXISTS (
    SELECT 1 FROM last_call l, jsonb_array_elements(COALESCE(l.tool_calls, '[]')) AS c
    WHERE (c ->> 'id' = ANY (ARRAY(
        SELECT r.tool_call_id FROM records r
        WHERE r.space_id = $1 AND r.session_id = $2
          AND r.seq > (SELECT seq FROM last_call) AND r.seq <= 9223372036854775807
          AND r.role = 'tool' AND r.tool_call_id IS NOT NULL))) IS NOT TRUE
)
"""

# $4: a committed Transact's release (ReleaseTurnOp) records the token it
# released, so that a retry of that commit can tell it was stored.
RELEASE_TURN = """
WITH released AS (
    UPDATE sessions
    SET turn_token = NULL, turn_expires_at = NULL,
        released_turn_token = CASE WHEN $4 THEN turn_token ELSE released_turn_token END
    WHERE space_id = $1 AND id = $2
        AND provisional_until IS DISTINCT FROM 'infinity' AND turn_token = $3
      AND turn_expires_at > now()
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity') AS found,
       EXISTS (SELECT 1 FROM released) AS released
"""

# Extends the lease while `token` ($3) still holds it, expired or not: an
# expired lease nobody took since is still its holder's to keep.
RENEW_TURN = """
WITH renewed AS (
    UPDATE sessions SET turn_expires_at = now() + make_interval(secs => $4)
    WHERE space_id = $1 AND id = $2
        AND provisional_until IS DISTINCT FROM 'infinity' AND turn_token = $3
    RETURNING turn_expires_at
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity') AS found,
       (SELECT turn_expires_at FROM renewed) AS expires_at,
       EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
               AND $3 = ANY (interrupted_turn_tokens)) AS interrupted
"""

# turn_count stops at the largest int32 (the column's and the API's): an import may bring
# any count up to it, and the session's next turn overflowed the column (INTERNAL on
# every Send from then on).
BUMP_TURN = """
UPDATE sessions
SET turn_count = LEAST(turn_count::bigint + CASE WHEN $3 THEN 0 ELSE $4 END, 2147483647),
    last_active_at = now()
WHERE space_id = $1 AND id = $2 AND provisional_until IS DISTINCT FROM 'infinity'
RETURNING id, label, status, turn_count, created_at, updated_at, last_active_at, pinned
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
    turn_token: uuid.UUID | None = None
    lease_live: bool = False
    now: datetime | None = None
    """The transaction's time (the database's clock): later statements take it as a
    parameter (DESIGN §4.7)."""
    queued: bool = False
    """Whether live ENQUEUE tickets wait for the session."""


@dataclass(frozen=True, slots=True)
class Renewal:
    """RenewTurn's answer: whether the session exists, the new expiry (None: `token` no
    longer holds the lease), and whether an INTERRUPT took it over."""

    found: bool
    expires_at: datetime | None
    interrupted: bool


def lease_token(token: str) -> uuid.UUID | None:
    """The lease token as stored, or None when it cannot be one (so it matches nothing)."""
    try:
        return uuid.UUID(token)
    except ValueError:
        return None


class TurnRepository:
    """The turn's statements, on a unit of work's connection and outbox."""

    __slots__ = ("_con", "_outbox")

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self._outbox = outbox

    async def lock(self, space_id: uuid.UUID, session_id: uuid.UUID) -> LockedTurn | None:
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
            turn_token=row["turn_token"],
            lease_live=row["lease_live"],
            now=row["now"],
            queued=row["queued"],
        )

    async def begin(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID, ttl_s: int
    ) -> tuple[bool, datetime | None]:
        """(found, expiry when the lease was taken; None while another lease lives)."""
        found, expires_at = await self._begin_once(space_id, session_id, token, ttl_s)
        if found and expires_at is None:
            # As `renew`: the UPDATE may have waited for a delete that hid the session,
            # which this statement's snapshot does not see; a new one does.
            found, expires_at = await self._begin_once(space_id, session_id, token, ttl_s)
        return found, expires_at

    async def _begin_once(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID, ttl_s: int
    ) -> tuple[bool, datetime | None]:
        row = await self._con.fetchrow(BEGIN_TURN, space_id, session_id, token, float(ttl_s))
        assert row is not None
        return bool(row["found"]), row["expires_at"]

    async def take_over(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        token: uuid.UUID,
        ttl_s: int,
        now: datetime,
    ) -> datetime:
        """Take the lease of a locked, existing session whoever holds it (INTERRUPT); its
        expiry. A live holder's token is recorded as interrupted."""
        expires_at: datetime = await self._con.fetchval(
            TAKE_OVER_TURN, space_id, session_id, token, float(ttl_s), now
        )
        return expires_at

    async def open_tool_calls(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Whether the session's last assistant record has calls no tool record answers."""
        return bool(await self._con.fetchval(OPEN_TOOL_CALLS, space_id, session_id))

    async def release(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        token: uuid.UUID | None,
        *,
        committed: bool = False,
    ) -> tuple[bool, bool]:
        """(found, whether a live lease held by `token` was ended); `committed`: the release
        of a Transact, which records the token as the one a commit released."""
        row = await self._con.fetchrow(RELEASE_TURN, space_id, session_id, token, committed)
        assert row is not None
        return bool(row["found"]), bool(row["released"])

    async def renew(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID | None, ttl_s: int
    ) -> Renewal:
        """Extend the lease `token` holds; see `Renewal`."""
        renewal = await self._renew_once(space_id, session_id, token, ttl_s)
        if renewal.found and renewal.expires_at is None and not renewal.interrupted:
            # The UPDATE may have waited for a transaction that hid the session (a delete)
            # or interrupted the turn, and this statement's snapshot, taken before that
            # committed, still says found and not interrupted. Asked again, a new snapshot
            # sees it; only a renewal that renewed nothing pays for the second statement.
            renewal = await self._renew_once(space_id, session_id, token, ttl_s)
        return renewal

    async def _renew_once(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID | None, ttl_s: int
    ) -> Renewal:
        row = await self._con.fetchrow(RENEW_TURN, space_id, session_id, token, float(ttl_s))
        assert row is not None
        return Renewal(bool(row["found"]), row["expires_at"], bool(row["interrupted"]))

    async def bump(
        self, space_id: uuid.UUID, session_id: uuid.UUID, touch_only: bool, turns: int = 1
    ) -> SessionMeta | None:
        """turn_count + `turns` (unless touch_only), last_active_at = now; None when absent."""
        row = await self._con.fetchrow(BUMP_TURN, space_id, session_id, touch_only, turns)
        if row is None:
            return None
        if not touch_only:
            self._outbox.add(space_id, session_event("turn_committed", session_id))
        return meta_of(row)
