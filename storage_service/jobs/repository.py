"""SQL of the gateway's background jobs (DESIGN §4.8, migration 0012).

Owns `background_jobs`: one row per (session, kind), whose `token` is the
claim of the run working on it. A claim is decided under the row's lock (a
plain `SELECT ... FOR UPDATE` pinned by space_id); the clock is the
database's, read in a SELECT or applied in a SET, never in a modification's
WHERE (DESIGN §4.7). Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from stello.db.maintenance import across_spaces, bounded
from storage_service.models import JobKindName, JobStatusName
from storage_service.transact.operations import UpdateJobOp

_COLUMNS = """kind, status, covered_until_seq, model_calls, tokens, runs, updated_at,
       token IS NOT NULL AND expires_at > now() AS claimed"""

# The session's row is share-locked first (it cannot go while a claim is made),
# and the database's clock read: a claim's times are parameters of the writes
# below (Citus allows no clock in a modification's WHERE or RETURNING).
VISIBLE = """
SELECT provisional_until IS NULL AS visible, now() AS now
FROM sessions WHERE space_id = $1 AND id = $2
FOR KEY SHARE
"""

_ROW = "kind, status, covered_until_seq, model_calls, tokens, runs, updated_at, token, expires_at"

LOCK_JOB = f"""
SELECT {_ROW}
FROM background_jobs
WHERE space_id = $1 AND session_id = $2 AND kind = $3
FOR UPDATE
"""

# A first claim ($5: its expiry, $6: now); a concurrent first claim inserts
# nothing and re-reads the row.
INSERT_JOB = f"""
INSERT INTO background_jobs (space_id, session_id, kind, status, token, expires_at, runs,
                             updated_at)
VALUES ($1, $2, $3, 'running', $4, $5, 1, $6)
ON CONFLICT (space_id, session_id, kind) DO NOTHING
RETURNING {_ROW}
"""

# A new run of a job whose claim is not live (checked under the row lock).
GRANT_JOB = f"""
UPDATE background_jobs
SET status = 'running', token = $4, expires_at = $5, model_calls = 0, tokens = 0,
    runs = runs + 1, updated_at = $6
WHERE space_id = $1 AND session_id = $2 AND kind = $3
RETURNING {_ROW}
"""

# A retried claim: the live claim its token ($4) holds, extended ($5: expiry,
# $6: now), the run unchanged.
REGRANT_JOB = f"""
UPDATE background_jobs
SET expires_at = $5, updated_at = $6
WHERE space_id = $1 AND session_id = $2 AND kind = $3 AND token = $4
RETURNING {_ROW}
"""

# Extends the claim while `token` still holds it, expired or not; a session being
# erased (DeleteSubtree hid it) is absent, and its claim is left as it was.
RENEW_JOB = """
WITH found AS (
    SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
        AND provisional_until IS DISTINCT FROM 'infinity'
), renewed AS (
    UPDATE background_jobs
    SET expires_at = now() + make_interval(secs => $5), updated_at = now()
    WHERE space_id = $1 AND session_id = $2 AND kind = $3 AND token = $4
      AND EXISTS (SELECT 1 FROM found)
    RETURNING expires_at
)
SELECT EXISTS (SELECT 1 FROM found) AS found, (SELECT expires_at FROM renewed) AS expires_at
"""

# Transact's BackgroundJobCheck: the row locked, its token read.
LOCK_TOKEN = """
SELECT token FROM background_jobs
WHERE space_id = $1 AND session_id = $2 AND kind = $3
FOR UPDATE
"""

# UpdateJobOp: progress (the covered seq never goes down) and, with $8, the
# end of the run.
UPDATE_JOB = """
UPDATE background_jobs
SET covered_until_seq = GREATEST(covered_until_seq, $5), model_calls = $6, tokens = $7,
    status = CASE WHEN $8 THEN $9 ELSE status END,
    token = CASE WHEN $8 THEN NULL ELSE token END,
    expires_at = CASE WHEN $8 THEN NULL ELSE expires_at END,
    updated_at = now()
WHERE space_id = $1 AND session_id = $2 AND kind = $3 AND token = $4
RETURNING true
"""

# How far a visible session's summaries and memory cover its records (GetSession
# with progress): the newest summary, the newest complete one, the memory's seq.
# Every table is pinned by the parameters themselves, not by a join on the
# session's columns: Citus routes a query to one worker only when each
# distributed table in it is restricted to the same `space_id` value, and the
# LATERAL form ran one task per shard of every worker (explore5 F4). The newest
# complete summary is one probe of `compression_caches_complete` (migration 0047), not
# a walk past every catch-up summary newer than it.
PROGRESS = """
SELECT s.last_seq, c.covered_until_seq AS summary_seq, c.lossy AS summary_lossy,
       (SELECT covered_until_seq FROM compression_caches
        WHERE space_id = $1 AND session_id = $2 AND NOT lossy
        ORDER BY covered_until_seq DESC LIMIT 1) AS complete_seq,
       sl.memory_covered_until_seq, sl.memory_version, l.until_seq AS inherited_seq
FROM sessions s
LEFT JOIN session_slots sl ON sl.space_id = $1 AND sl.session_id = $2
LEFT JOIN session_lineages l ON l.space_id = $1 AND l.session_id = $2
LEFT JOIN (
    SELECT covered_until_seq, lossy FROM compression_caches
    WHERE space_id = $1 AND session_id = $2
    ORDER BY covered_until_seq DESC
    LIMIT 1
) c ON true
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# Jobs left without a gateway (ListOrphanedJobs): an expired claim, or a run
# stopped on shutdown, of a visible session. Whether the session is visible is
# a scalar subquery, one probe of its key per job, not an EXISTS: statistics
# that called the space small made that a join over every session of the
# space (30,002 read for a page of 100). One space ($1), on the index
# `background_jobs_orphaned_space` (migration 0026) ...
_ORPHANED = """
SELECT j.space_id, j.session_id, {columns}
FROM background_jobs j
WHERE {space}j.status IN ('running', 'stopped')
  AND (j.expires_at IS NULL OR j.expires_at <= now())
  AND (SELECT true FROM sessions s
       WHERE s.space_id = {session_space} AND s.id = j.session_id
         AND s.provisional_until IS NULL
       LIMIT 1) IS NOT NULL
ORDER BY j.expires_at NULLS FIRST
LIMIT {limit}
"""
# (The session's space is the parameter, not the job's column: Citus routes the
# read to the space's worker only when both tables are pinned by the same value.)
ORPHANED_IN_SPACE = _ORPHANED.format(
    columns=_COLUMNS, space="j.space_id = $1 AND ", session_space="$1", limit="$2"
)
# ... or every space (an admin key): a maintenance read across spaces on the
# index `background_jobs_orphaned` (docs/scaling.md "Maintenance paths").
ORPHANED_EVERYWHERE = _ORPHANED.format(
    columns=_COLUMNS, space="", session_space="j.space_id", limit="$1"
)

JOBS_OF = f"""
SELECT {_COLUMNS}
FROM background_jobs
WHERE space_id = $1 AND session_id = $2
ORDER BY kind
"""


@dataclass(frozen=True, slots=True)
class Coverage:
    """How far a session's summaries and memory cover its records (0 = nothing)."""

    last_seq: int
    summary_seq: int
    summary_lossy: bool
    complete_seq: int
    memory_seq: int
    memory_version: int
    inherited_seq: int
    """The lineage's cut (0 = none): the session's own records are after it."""


@dataclass(frozen=True, slots=True)
class JobState:
    """A job as stored: how its last (or current) run stands."""

    kind: JobKindName
    status: JobStatusName
    covered_until_seq: int
    model_calls: int
    tokens: int
    runs: int
    updated_at: datetime
    claimed: bool
    """Whether a claim is live now."""


@dataclass(frozen=True, slots=True)
class OrphanedJob:
    """A job left without a gateway, and where it stands."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    job: JobState


@dataclass(frozen=True, slots=True)
class JobClaim:
    """The outcome of a claim: granted with its token and expiry, and the job after it."""

    granted: bool
    job: JobState
    token: uuid.UUID | None = None
    expires_at: datetime | None = None


def claim_token(token: str) -> uuid.UUID | None:
    """The claim token as stored, or None when it cannot be one (so it matches nothing)."""
    try:
        return uuid.UUID(token)
    except ValueError:
        return None


def _live(row: asyncpg.Record, now: datetime) -> bool:
    """Whether the row's claim is live at `now`."""
    return row["token"] is not None and row["expires_at"] > now


def _state(row: asyncpg.Record, *, claimed: bool | None = None) -> JobState:
    return JobState(
        row["kind"],
        row["status"],
        row["covered_until_seq"],
        row["model_calls"],
        row["tokens"],
        row["runs"],
        row["updated_at"],
        bool(row["claimed"]) if claimed is None else claimed,
    )


class JobRepository:
    """Background job statements, on a unit of work's connection."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def visible(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool, datetime] | None:
        """Share-lock the session's row; (whether it is committed, the database's now), or
        None when it is absent."""
        row = await self._con.fetchrow(VISIBLE, space_id, session_id)
        return None if row is None else (bool(row["visible"]), row["now"])

    async def claim(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        kind: JobKindName,
        ttl_s: int,
        now: datetime,
        token: uuid.UUID | None = None,
    ) -> JobClaim:
        """Take the job's claim unless one is live at `now` (in the caller's transaction);
        with `token` (the caller's), a live claim it already holds is granted again."""
        token = token or uuid.uuid4()
        args = (space_id, session_id, kind)
        expires_at = now + timedelta(seconds=ttl_s)
        while True:
            row = await self._con.fetchrow(LOCK_JOB, *args)
            if row is None:
                row = await self._con.fetchrow(INSERT_JOB, *args, token, expires_at, now)
                if row is None:
                    continue  # a concurrent first claim won: read its row
            elif _live(row, now) and row["token"] != token:
                return JobClaim(False, _state(row, claimed=True))
            elif _live(row, now):
                row = await self._con.fetchrow(REGRANT_JOB, *args, token, expires_at, now)
                assert row is not None  # the row is locked
            else:
                row = await self._con.fetchrow(GRANT_JOB, *args, token, expires_at, now)
                assert row is not None  # the row is locked
            return JobClaim(True, _state(row, claimed=True), token, expires_at)

    async def renew(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        kind: JobKindName,
        token: uuid.UUID | None,
        ttl_s: int,
    ) -> tuple[bool, datetime | None]:
        """(found, the new expiry when `token` still holds the claim; else None)."""
        row = await self._con.fetchrow(RENEW_JOB, space_id, session_id, kind, token, float(ttl_s))
        assert row is not None  # a SELECT without FROM answers one row
        return bool(row["found"]), row["expires_at"]

    async def holder(
        self, space_id: uuid.UUID, session_id: uuid.UUID, kind: JobKindName
    ) -> uuid.UUID | None:
        """Lock the job's row; the token of its claim (None: no claim, or no row)."""
        token: uuid.UUID | None = await self._con.fetchval(LOCK_TOKEN, space_id, session_id, kind)
        return token

    async def update(self, space_id: uuid.UUID, update: UpdateJobOp) -> bool:
        """Save a run's progress (and end it with `release`); whether its token held the
        claim."""
        updated = await self._con.fetchval(
            UPDATE_JOB,
            space_id,
            update.session_id,
            update.kind,
            claim_token(update.token),
            update.covered_until_seq,
            update.model_calls,
            update.tokens,
            update.release,
            update.status,
        )
        return bool(updated)

    async def orphaned(self, space_id: uuid.UUID | None, limit: int) -> list[OrphanedJob]:
        """Jobs left without a gateway in the space (None: in every space)."""
        if space_id is None:
            async with self._con.transaction():  # its own (SET LOCAL), or the caller's
                await across_spaces(self._con)  # every space's jobs: multi-shard
                rows = await self._con.fetch(ORPHANED_EVERYWHERE, limit)
        else:
            rows = await self._con.fetch(ORPHANED_IN_SPACE, space_id, limit)
        return [OrphanedJob(row["space_id"], row["session_id"], _state(row)) for row in rows]

    async def orphaned_maintained(self, space_id: uuid.UUID, limit: int) -> list[OrphanedJob]:
        """`orphaned` in one space, bounded as maintenance is (a read of a round done space
        by space: a node that does not answer ends it at the bound)."""
        async with self._con.transaction():  # its own (SET LOCAL), or the caller's
            await bounded(self._con)
            return await self.orphaned(space_id, limit)

    async def of_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[JobState]:
        """The session's jobs, by kind."""
        return [_state(row) for row in await self._con.fetch(JOBS_OF, space_id, session_id)]

    async def progress(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Coverage | None:
        """How far a visible session's summaries and memory cover it; None when not visible."""
        row = await self._con.fetchrow(PROGRESS, space_id, session_id)
        if row is None:
            return None
        return Coverage(
            last_seq=row["last_seq"],
            summary_seq=row["summary_seq"] or 0,
            summary_lossy=bool(row["summary_lossy"]),
            complete_seq=row["complete_seq"] or 0,
            memory_seq=row["memory_covered_until_seq"] or 0,
            memory_version=row["memory_version"] or 0,
            inherited_seq=row["inherited_seq"] or 0,
        )
