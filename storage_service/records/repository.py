"""All SQL of the storage service (DESIGN §3): sessions meta, records, slots, cache, lease
(slots and cache in `storage_service.slots.repository`, shared memory in
`storage_service.memory.repository`, the fork guard in `storage_service.guard.repository`).

Every statement filters by ``space_id``. Reads treat provisional sessions
(``provisional_until IS NOT NULL``) as absent; writes accept them. A
`Repository` runs statements on one connection, so the service composes them
into transactions; `Database` hands out repositories, inside a transaction or
for one self-contained statement (a single statement is atomic on its own and
saves the BEGIN/COMMIT round trips).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import asyncpg

from stello import idempotency
from stello.db import in_statement, in_transaction
from storage_service.guard.repository import GuardRepository
from storage_service.memory.repository import MemoryRepository
from storage_service.models import (
    MetaUpdate,
    NewRecord,
    RecordQuery,
    RememberedResult,
    SessionMeta,
    Status,
    StoredRecord,
    ToolCall,
)
from storage_service.records.lineage import PARTS, LineageRepository
from storage_service.sessions.repository import meta_of
from storage_service.slots.repository import SlotRepository
from storage_service.turns.repository import TurnRepository

T = TypeVar("T")

MAX_SEQ = 2**63 - 1

GET_SESSION = """
SELECT id, label, status, turn_count, created_at, updated_at, last_active_at
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""

PUT_SESSION = """
UPDATE sessions
SET label = $3, status = $4, updated_at = now()
WHERE space_id = $1 AND id = $2
RETURNING id, label, status, turn_count, created_at, updated_at, last_active_at
"""

LIST_SESSIONS = """
SELECT id, label, status, turn_count, created_at, updated_at, last_active_at
FROM sessions
WHERE space_id = $1
  AND provisional_until IS NULL
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4::uuid))
ORDER BY created_at, id
LIMIT $5
"""

SESSION_EXISTS = """
SELECT true FROM sessions WHERE space_id = $1 AND id = $2
"""

# Seqs are assigned under the session's row lock, taken by the UPDATE and held
# to the end of the statement's transaction: concurrent appends queue on it and
# get contiguous ranges. No row (unknown session) means nothing is inserted.
# The token columns (migration 0006) are counted under the same lock: each
# record's estimate, and the cumulative one continuing the session's total.
_NEW_RECORDS = """
incoming AS (
    SELECT r.role, r.content, r.tool_calls::jsonb AS tool_calls, r.tool_call_id, r.created_at,
           r.metadata::jsonb AS metadata, r.ord,
           stello_record_tokens(r.content, r.tool_calls::jsonb) AS tokens
    FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::text[])
         WITH ORDINALITY AS r (role, content, tool_calls, tool_call_id, created_at, metadata, ord)
), added AS (
    SELECT COALESCE(sum(tokens), 0) AS tokens FROM incoming
)"""
_BUMP_SEQ = """
bumped AS (
    UPDATE sessions
    SET last_seq = last_seq + $3, token_total = token_total + added.tokens
    FROM added
    WHERE space_id = $1 AND id = $2
    RETURNING last_seq - $3 AS base, token_total - added.tokens AS base_tokens,
              provisional_until IS NULL AS visible
)"""
_INSERT_RECORDS = """
INSERT INTO records (space_id, session_id, seq, role, content, tool_calls, tool_call_id,
                     created_at, metadata, token_estimate, token_cumulative)
SELECT $1, $2, bumped.base + r.ord, r.role, r.content, r.tool_calls, r.tool_call_id,
       COALESCE(r.created_at, now()), r.metadata, r.tokens,
       bumped.base_tokens + sum(r.tokens) OVER (ORDER BY r.ord)
FROM bumped, incoming r
RETURNING seq, created_at"""
APPEND_RECORDS = f"WITH {_NEW_RECORDS}, {_BUMP_SEQ}\n{_INSERT_RECORDS}\n"

# AppendRecords on its own, one statement that is its whole transaction: the
# event's position is taken in it (the space's row stays locked until this
# statement commits), as `stello.events.Outbox.flush` does at a transaction's
# end. A provisional session takes no position and writes no event.
APPEND_RECORDS_ALONE = f"""
WITH {_NEW_RECORDS}, {_BUMP_SEQ}, inserted AS ({_INSERT_RECORDS}
), taken AS (
    INSERT INTO space_positions AS p (space_id, last_position)
    SELECT $1, 1 FROM bumped WHERE bumped.visible
    ON CONFLICT (space_id) DO UPDATE SET last_position = p.last_position + 1
    RETURNING p.last_position
), event AS (
    INSERT INTO space_events (space_id, position, kind, session_id, first_seq, last_seq)
    SELECT $1, taken.last_position, 'records_appended', $2, bumped.base + 1, bumped.base + $3
    FROM taken, bumped
)
SELECT seq, created_at FROM inserted
"""

# One row per visible session (NULL record columns when nothing matches), no
# row at all when the session is absent or provisional. The walk goes over the
# session's view (`PARTS`: inherited segments, then its own records; DESIGN
# §4.4), one index range per part, and takes $7 + 1 records (the extra one
# only tells whether more are left: `walked`), keeping the first $7 whose
# running size stays within $8 bytes, the first always. A record's size is
# estimated from the stored lengths without detoasting the content (jsonb
# counted twice: its protobuf Struct form is larger). The walk direction
# cannot be a parameter, so one template gives the two constants.
_LIST_RECORDS = """
WITH {parts}
SELECT s.id AS session_id, r.seq, r.role, r.content, r.tool_calls, r.tool_call_id,
       r.created_at, r.metadata, r.inherited, r.walked
FROM sessions s
LEFT JOIN LATERAL (
    SELECT sized.seq, sized.role, sized.content, sized.tool_calls, sized.tool_call_id,
           sized.created_at, sized.metadata, sized.inherited, sized.walked
    FROM (
        SELECT page.*,
               row_number() OVER (ORDER BY page.seq {direction}) AS n,
               sum(page.size) OVER (ORDER BY page.seq {direction}) AS running,
               count(*) OVER () AS walked
        FROM (
            SELECT x.*
            FROM parts p
            CROSS JOIN LATERAL (
                SELECT seq, role, content, tool_calls, tool_call_id, created_at, metadata,
                       p.inherited,
                       64 + octet_length(content) + COALESCE(octet_length(tool_call_id), 0)
                       + 2 * COALESCE(octet_length(tool_calls::text), 0)
                       + 2 * COALESCE(octet_length(metadata::text), 0) AS size
                FROM records
                WHERE space_id = $1 AND session_id = p.holder_id
                  AND seq >= p.from_seq AND seq <= p.to_seq
                  AND seq > $3 AND seq < $4
                  AND ($5::text IS NULL OR role = $5)
                ORDER BY seq {direction}
                LIMIT $6::bigint + $7 + 1
            ) x
            ORDER BY x.seq {direction}
            OFFSET $6
            LIMIT $7 + 1
        ) page
    ) sized
    WHERE sized.n <= $7 AND (sized.n = 1 OR sized.running <= $8)
) r ON true
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""
LIST_RECORDS_OLDEST = _LIST_RECORDS.format(parts=PARTS, direction="ASC")
LIST_RECORDS_NEWEST = _LIST_RECORDS.format(parts=PARTS, direction="DESC")

LOCK_SESSIONS = """
SELECT id, last_seq, turn_token, turn_expires_at > now() AS lease_live
FROM sessions
WHERE space_id = $1 AND id = ANY($2::uuid[])
ORDER BY id
FOR UPDATE
"""

# The seq through which TrimRecords removes records from the view (the
# newest record older than the newest `keep_recent` ($3); NULL with fewer
# records than that), and how many records of the view it removes.
TRIM_CUT = f"""
WITH {PARTS}, cut AS (
    SELECT x.seq
    FROM parts p
    CROSS JOIN LATERAL (
        SELECT seq FROM records
        WHERE space_id = $1 AND session_id = p.holder_id
          AND seq >= p.from_seq AND seq <= p.to_seq
        ORDER BY seq DESC
        LIMIT $3::bigint + 1
    ) x
    ORDER BY x.seq DESC
    OFFSET $3
    LIMIT 1
), removed AS (
    SELECT x.n, x.first_seq
    FROM cut, parts p
    CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(seq) AS first_seq FROM records
        WHERE space_id = $1 AND session_id = p.holder_id
          AND seq >= p.from_seq AND seq <= p.to_seq AND seq <= cut.seq
    ) x
)
SELECT (SELECT seq FROM cut) AS through, COALESCE(sum(n), 0) AS removed,
       min(first_seq) AS first_seq
FROM removed
"""

# The view stops at `through`; rows a fork still reads go to an heir first
# (migration 0009).
RELEASE = """
SELECT stello_release_records($1, ARRAY[$2::uuid], $3)
"""

# Takes the lease unless a live one exists; a concurrent taker blocks on the
# row lock, then re-checks the condition against the winner's lease.
BEGIN_TURN = """
WITH taken AS (
    UPDATE sessions
    SET turn_token = $3, turn_expires_at = now() + make_interval(secs => $4)
    WHERE space_id = $1 AND id = $2
      AND (turn_token IS NULL OR turn_expires_at <= now())
    RETURNING turn_expires_at
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2) AS found,
       (SELECT turn_expires_at FROM taken) AS expires_at
"""

RELEASE_TURN = """
WITH released AS (
    UPDATE sessions SET turn_token = NULL, turn_expires_at = NULL
    WHERE space_id = $1 AND id = $2 AND turn_token = $3 AND turn_expires_at > now()
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2) AS found,
       EXISTS (SELECT 1 FROM released) AS released
"""

# Extends the lease while `token` ($3) still holds it, expired or not: an
# expired lease nobody took since is still its holder's to keep.
RENEW_TURN = """
WITH renewed AS (
    UPDATE sessions SET turn_expires_at = now() + make_interval(secs => $4)
    WHERE space_id = $1 AND id = $2 AND turn_token = $3
    RETURNING turn_expires_at
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2) AS found,
       (SELECT turn_expires_at FROM renewed) AS expires_at
"""

BUMP_TURN = """
UPDATE sessions
SET turn_count = turn_count + CASE WHEN $3 THEN 0 ELSE $4 END, last_active_at = now()
WHERE space_id = $1 AND id = $2
RETURNING id, label, status, turn_count, created_at, updated_at, last_active_at
"""


@dataclass(frozen=True, slots=True)
class LockedSession:
    """A session row locked for a Transact: what its preconditions read."""

    last_seq: int
    turn_token: uuid.UUID | None
    lease_live: bool


def _record(row: asyncpg.Record) -> StoredRecord:
    calls: list[dict[str, str]] | None = row["tool_calls"]
    return StoredRecord(
        row["seq"],
        row["role"],
        row["content"],
        tuple([ToolCall(c["id"], c["name"], c["arguments_json"]) for c in calls]) if calls else (),
        row["tool_call_id"],
        row["created_at"],
        row["metadata"],
        row["inherited"],
    )


def _calls_json(calls: Sequence[ToolCall]) -> str | None:
    if not calls:
        return None  # no tool calls: the key is absent, not an empty list (spec §1.5)
    return json.dumps(
        [{"id": c.id, "name": c.name, "arguments_json": c.arguments_json} for c in calls]
    )


class Repository(
    SlotRepository,
    MemoryRepository,
    GuardRepository,
    TurnRepository,
    LineageRepository,
    idempotency.KeyStatements,
):
    """The storage statements, run on one connection (maybe inside a transaction)."""

    async def get_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionMeta | None:
        """The meta of a visible session, or None."""
        row = await self._con.fetchrow(GET_SESSION, space_id, session_id)
        return None if row is None else meta_of(row)

    async def put_session(self, space_id: uuid.UUID, update: MetaUpdate) -> SessionMeta | None:
        """Replace label and status; None when the session does not exist."""
        row = await self._con.fetchrow(
            PUT_SESSION, space_id, update.session_id, update.label, update.status
        )
        if row is None:
            return None
        self._changed(space_id, "session_updated", update.session_id)
        return meta_of(row)

    async def list_sessions(
        self,
        space_id: uuid.UUID,
        status: Status | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[SessionMeta]:
        """Visible sessions ordered by (created_at, id), strictly after `after`."""
        after_at, after_id = after if after is not None else (None, None)
        rows = await self._con.fetch(LIST_SESSIONS, space_id, status, after_at, after_id, limit)
        return [meta_of(row) for row in rows]

    async def session_exists(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Whether the session exists in the space (provisional included)."""
        return bool(await self._con.fetchval(SESSION_EXISTS, space_id, session_id))

    async def append_records(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        records: Sequence[NewRecord],
        *,
        alone: bool = False,
    ) -> tuple[StoredRecord, ...] | None:
        """Append `records` (non-empty) with the next seqs; None when the session is absent.

        `alone`: the statement is its own transaction and writes its event itself
        (one round trip); else the event waits in the outbox for the transaction's end.
        """
        rows = await self._con.fetch(
            APPEND_RECORDS_ALONE if alone else APPEND_RECORDS,
            space_id,
            session_id,
            len(records),
            [r.role for r in records],
            [r.content for r in records],
            [_calls_json(r.tool_calls) for r in records],
            [r.tool_call_id for r in records],
            [r.created_at for r in records],
            [None if r.metadata is None else json.dumps(r.metadata) for r in records],
        )
        if not rows:
            return None
        stored = sorted((row["seq"], row["created_at"]) for row in rows)
        if not alone:
            self._changed(
                space_id,
                "records_appended",
                session_id,
                first_seq=stored[0][0],
                last_seq=stored[-1][0],
            )
        return tuple(
            StoredRecord(
                seq=seq,
                role=r.role,
                content=r.content,
                tool_calls=r.tool_calls,
                tool_call_id=r.tool_call_id,
                created_at=created_at,
                metadata=r.metadata,
            )
            for (seq, created_at), r in zip(stored, records, strict=True)
        )

    async def list_records(
        self, space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery, max_bytes: int
    ) -> tuple[list[StoredRecord], bool] | None:
        """The records `query` selects within `max_bytes` (at least one), ascending seq, and
        whether the walk left records; None when the session is not visible."""
        rows = await self._con.fetch(
            LIST_RECORDS_NEWEST if query.newest_first else LIST_RECORDS_OLDEST,
            space_id,
            session_id,
            query.after_seq if query.after_seq is not None else -MAX_SEQ,
            query.before_seq if query.before_seq is not None else MAX_SEQ,
            query.role,
            query.offset,
            query.limit,
            max_bytes,
        )
        if not rows:
            return None
        records = [_record(row) for row in rows if row["seq"] is not None]
        more = bool(records) and rows[0]["walked"] > len(records)
        if query.newest_first:
            records.reverse()
        return records, more

    async def lock_sessions(
        self, space_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, LockedSession]:
        """Lock the sessions' rows (in id order, so lockers never deadlock); absent ones omitted."""
        rows = await self._con.fetch(LOCK_SESSIONS, space_id, list(session_ids))
        return {
            row["id"]: LockedSession(row["last_seq"], row["turn_token"], bool(row["lease_live"]))
            for row in rows
        }

    async def trim_records(self, space_id: uuid.UUID, session_id: uuid.UUID, keep: int) -> int:
        """Delete all but the newest `keep` records (and the stale cache); how many went."""
        row = await self._con.fetchrow(TRIM_CUT, space_id, session_id, keep)
        assert row is not None  # an aggregate answers one row
        removed = int(row["removed"])
        if removed:
            await self._con.execute(RELEASE, space_id, session_id, row["through"])
            await self.clear_cache(space_id, session_id)
            self._changed(
                space_id,
                "records_trimmed",
                session_id,
                first_seq=row["first_seq"],
                last_seq=row["through"],
            )
        return removed

    async def begin_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID, ttl_s: int
    ) -> tuple[bool, datetime | None]:
        """(found, expiry when the lease was taken; None while another lease lives)."""
        row = await self._con.fetchrow(BEGIN_TURN, space_id, session_id, token, float(ttl_s))
        assert row is not None
        return bool(row["found"]), row["expires_at"]

    async def release_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID | None
    ) -> tuple[bool, bool]:
        """(found, whether a live lease held by `token` was ended)."""
        row = await self._con.fetchrow(RELEASE_TURN, space_id, session_id, token)
        assert row is not None
        return bool(row["found"]), bool(row["released"])

    async def renew_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: uuid.UUID | None, ttl_s: int
    ) -> tuple[bool, datetime | None]:
        """(found, the new expiry when `token` still holds the lease; else None)."""
        row = await self._con.fetchrow(RENEW_TURN, space_id, session_id, token, float(ttl_s))
        assert row is not None
        return bool(row["found"]), row["expires_at"]

    async def bump_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, touch_only: bool, turns: int = 1
    ) -> SessionMeta | None:
        """turn_count + `turns` (unless touch_only), last_active_at = now; None when absent."""
        row = await self._con.fetchrow(BUMP_TURN, space_id, session_id, touch_only, turns)
        if row is None:
            return None
        if not touch_only:
            self._changed(space_id, "turn_committed", session_id)
        return meta_of(row)

    async def remembered(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> RememberedResult | None:
        """The live idempotency entry under the key, without locking it; None when absent."""
        row = await self._con.fetchrow(
            idempotency.SELECT, space_id, scope, request_id, idempotency.TTL_HOURS
        )
        if row is None:
            return None
        return RememberedResult(bytes(row["request_hash"]), bytes(row["response"]))


class Database:
    """Hands out repositories: in a retried transaction, or for one atomic statement."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def transaction(self, work: Callable[[Repository], Awaitable[T]]) -> T:
        """Run `work` in one transaction (retried on serialization failure or deadlock);
        the events of its changes are written as the last statement (DESIGN §4.6)."""

        async def run(con: asyncpg.Connection) -> T:
            repo = Repository(con)
            result = await work(repo)
            if repo.outbox.pending:
                await repo.outbox.flush(con)
            return result

        return await in_transaction(self._pool, run)

    async def statement(self, work: Callable[[Repository], Awaitable[T]]) -> T:
        """Run `work`, a single self-contained statement, outside an explicit transaction
        (retried like a transaction)."""

        async def run(con: asyncpg.Connection) -> T:
            repo = Repository(con)
            result = await work(repo)
            # A change writes its event in its own transaction: never use this for one.
            assert not repo.outbox.pending, "a write with events must use transaction()"
            return result

        return await in_statement(self._pool, run)
