"""SQL of the sessions row's conversation meta (DESIGN §3), and the row as every room reads it.

The tree creates the row; storage writes only its own columns: label and status here,
last_seq and token_total with the records (`storage_service.records`), turn_count,
last_active_at and the lease with the turn (`storage_service.turns`), last_fork_turn in the
fork guard (`storage_service.guard`). Reads treat a provisional session
(``provisional_until IS NOT NULL``) as absent; writes accept it, and the events of its
changes are dropped until it is visible (`session_event`), unless it is being erased
(``provisional_until = 'infinity'``: DeleteSubtree hid it, DESIGN §4.8): every write
answers that one as absent too. Every statement filters by
``space_id``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby

import asyncpg

from stello.stored.events import Event, EventKind, Outbox
from storage_service.models import MetaUpdate, SessionMeta, Status

GET_SESSION = """
SELECT id, label, status, turn_count, created_at, updated_at, last_active_at, pinned
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""

PUT_SESSION = """
UPDATE sessions
SET label = $3, status = $4, updated_at = now(),
    archived_at = CASE WHEN $4 <> 'archived' THEN NULL
                       WHEN status = 'archived' THEN archived_at ELSE $5::timestamptz END
WHERE space_id = $1 AND id = $2 AND provisional_until IS DISTINCT FROM 'infinity'
RETURNING id, label, status, turn_count, created_at, updated_at, last_active_at, pinned
"""

# A page of ListSessions: $1 the space, $2 the limit, then the status ($3) when one is
# asked for, then the position (created_at, id) the page starts after. One statement per
# combination, each condition written out only when it applies: a plan that knows no
# parameter (a pooler's long-lived connection) takes the index on status
# (`sessions_status_created`) and starts its walk at the position only for conditions it
# can see; `$n IS NULL OR ...` made it walk the space from its start, filtering.
_LIST_SESSIONS = """
SELECT id, label, status, turn_count, created_at, updated_at, last_active_at, pinned
FROM sessions
WHERE space_id = $1
  AND provisional_until IS NULL{status}{after}
ORDER BY created_at, id
LIMIT $2
"""


def _list_sessions(*, by_status: bool, after: bool) -> str:
    """The page statement for a status filter or none, and a first page or a later one."""
    at = 4 if by_status else 3
    return _LIST_SESSIONS.format(
        status="\n  AND status = $3" if by_status else "",
        after=f"\n  AND (created_at, id) > (${at}::timestamptz, ${at + 1}::uuid)" if after else "",
    )


LIST_SESSIONS = {
    (by_status, after): _list_sessions(by_status=by_status, after=after)
    for by_status in (False, True)
    for after in (False, True)
}

SESSION_EXISTS = """
SELECT true FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity'
"""

# The set a trim locks: the named sessions ($2) and the readers of the trimmed ones
# ($3), never one being erased. The ids are found first, distinct and in id order
# (`_TRIM_IDS`): each trimmed session's readers one range of `record_segments_holder`
# (LATERAL), then each session by one primary-key probe (LATERAL), whatever the
# statistics: a set condition (`id = ANY (...)`, `holder_id = ANY (...)`) let the
# planner scan the space's sessions, or under a generic plan its segments, when its
# statistics called the space small (a big space grown since the last ANALYZE: 120,000
# tuples of `sessions` to lock 10 in a space of 30,000, 120,000 of `record_segments`
# for 6 readers). A locking probe locks in its outer side's order: id order.
_TRIM_IDS = """
SELECT DISTINCT t.id
FROM (SELECT unnest($2::uuid[]) AS id
      UNION ALL
      SELECT g.session_id
      FROM unnest($3::uuid[]) AS h (id)
      CROSS JOIN LATERAL (
          SELECT g.session_id FROM record_segments g
          WHERE g.space_id = $1 AND g.holder_id = h.id
          OFFSET 0
      ) g) t
ORDER BY 1
"""
_TRIM_ROW = """
    SELECT s.id, s.last_seq, s.turn_token, s.turn_expires_at > now() AS lease_live,
           s.released_turn_token, s.status
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = t.id AND s.provisional_until IS DISTINCT FROM 'infinity'
"""

# A trim's row locks (DESIGN §4.4, migration 0023): the named sessions ($2) and every
# session reading rows the trimmed ones ($3, among $2) hold, in ONE pass in id order, FOR
# NO KEY UPDATE (a trim changes no key, so a fork's key share of a holder never waits for
# it). Sessions being erased are skipped: the erasure job locks those FOR UPDATE (before
# their readers). Taken before the view is read; the release (`stello_release_records`)
# then finds its readers locked. The first passes SKIP LOCKED rows (a trim that waits for
# none while it holds some closes no cycle of waits: e.g. holding a reader that a fork
# waits for, queued behind a DeleteSubtree that waits for the fork's key share), and the
# transaction tries again a little later when one was skipped; the later passes wait.
_LOCK_FOR_TRIM = f"""
SELECT l.*
FROM ({_TRIM_IDS}) t
CROSS JOIN LATERAL ({_TRIM_ROW}    FOR NO KEY UPDATE OF s {{wait}}
) l
"""
LOCK_FOR_TRIM = _LOCK_FOR_TRIM.format(wait="")
LOCK_FOR_TRIM_SKIPPING = _LOCK_FOR_TRIM.format(wait="SKIP LOCKED")

# The set `LOCK_FOR_TRIM` locks, unlocked, in id order: a trim's pass when the Transact
# also checks an insight or a memory version (`lock_for_trim`'s `exclusive`). Then each
# run of consecutive ids is locked in its mode by `LOCK_IDS`: the checked sessions FOR
# UPDATE (which also blocks a slot row insert: its foreign-key check takes a KEY SHARE),
# the others FOR NO KEY UPDATE, all in id order. Upgraded after the pass, as before, a
# checked session's lock came after higher ids: a fork holding its key share (a holder of
# its source's rows) and waiting for its source, a reader the trim held, waited for the
# trim while the trim waited for it. A session the listing missed (a reader a fork
# committed meanwhile) is found by `UNLOCKED_FOR_TRIM`, as a skipped one is.
TRIM_SET_IDS = f"""
SELECT l.id
FROM ({_TRIM_IDS}) t
CROSS JOIN LATERAL ({_TRIM_ROW}    OFFSET 0
) l
ORDER BY l.id
"""

_LOCK_IDS = f"""
SELECT l.*
FROM (SELECT DISTINCT t.id FROM unnest($2::uuid[]) AS t (id) ORDER BY 1) t
CROSS JOIN LATERAL ({_TRIM_ROW}    FOR {{mode}} OF s {{wait}}
) l
"""
LOCK_IDS = {
    (exclusive, wait): _LOCK_IDS.format(
        mode="UPDATE" if exclusive else "NO KEY UPDATE", wait="" if wait else "SKIP LOCKED"
    )
    for exclusive in (False, True)
    for wait in (False, True)
}
"""`_LOCK_IDS` by (FOR UPDATE?, waiting?)."""

# A Transact's lock: the named sessions ($2) FOR UPDATE, waiting, in id order, each one
# primary-key probe whatever the statistics (`_LOCK_IDS`): a set condition (`id = ANY
# ($2)`) let the planner scan the space's sessions when its statistics called the space
# small (a big space grown since the last ANALYZE: 60,000 tuples to lock 10 in a space
# of 30,000).
LOCK_SESSIONS = LOCK_IDS[True, True]

# A session of the set `LOCK_FOR_TRIM` locks that is not among the locked ($4), if any:
# one skipped, or a reader a fork committed while the set was being locked (once a session
# and its readers are locked, no fork can add one: it locks its source FOR SHARE).
UNLOCKED_FOR_TRIM = f"""
SELECT l.id
FROM ({_TRIM_IDS}) t
CROSS JOIN LATERAL ({_TRIM_ROW}    OFFSET 0
) l
WHERE t.id <> ALL ($4::uuid[])
LIMIT 1
"""

TRIM_QUICK_PASSES = 6
"""Passes of `lock_for_trim` that skip locked rows, backing off 10, 20, ... 60 ms after
each (210 ms in all) before the passes that wait."""
TRIM_BACKOFF_S = 0.01
TRIM_LOCK_PASSES = 12
"""Passes of `lock_for_trim` in all; past them it keeps a set a fork grew (the release
locks the newcomers after the others, as before migration 0023)."""


class _Again(Exception):
    """A trim's pass missed a row (skipped, or a reader a fork added): take it again."""


@dataclass(frozen=True, slots=True)
class LockedSession:
    """A session row locked for a Transact: what its preconditions read."""

    last_seq: int
    turn_token: uuid.UUID | None
    lease_live: bool
    released_token: uuid.UUID | None = None
    """The lease token the last committed Transact released (migration 0014)."""
    archived: bool = False


def _locked(row: asyncpg.Record) -> LockedSession:
    return LockedSession(
        row["last_seq"],
        row["turn_token"],
        bool(row["lease_live"]),
        row["released_turn_token"],
        row["status"] == "archived",
    )


def meta_of(row: asyncpg.Record) -> SessionMeta:
    """A session's meta from a row holding its columns (every room reads them so)."""
    return SessionMeta(
        id=row["id"],
        label=row["label"],
        status=row["status"],
        turn_count=row["turn_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_active_at=row["last_active_at"],
        pinned=row["pinned"],
    )


def session_event(
    kind: EventKind,
    session_id: uuid.UUID,
    first_seq: int | None = None,
    last_seq: int | None = None,
) -> Event:
    """The event of a change to a session, dropped by the flush while it is provisional."""
    return Event(kind, session_id, first_seq=first_seq, last_seq=last_seq, if_visible=True)


class SessionRepository:
    """The meta statements, on a unit of work's connection and outbox."""

    __slots__ = ("_con", "_outbox")

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self._outbox = outbox

    async def get(self, space_id: uuid.UUID, session_id: uuid.UUID) -> SessionMeta | None:
        """The meta of a visible session, or None."""
        row = await self._con.fetchrow(GET_SESSION, space_id, session_id)
        return None if row is None else meta_of(row)

    async def put(self, space_id: uuid.UUID, update: MetaUpdate) -> SessionMeta | None:
        """Replace label and status; None when the session does not exist."""
        row = await self._con.fetchrow(
            PUT_SESSION,
            space_id,
            update.session_id,
            update.label,
            update.status,
            datetime.now(UTC),  # when it is archived (a parameter: DESIGN §4.7)
        )
        if row is None:
            return None
        self._outbox.add(space_id, session_event("session_updated", update.session_id))
        return meta_of(row)

    async def page(
        self,
        space_id: uuid.UUID,
        status: Status | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[SessionMeta]:
        """Visible sessions ordered by (created_at, id), strictly after `after`."""
        args: list[object] = [space_id, limit]
        if status is not None:
            args.append(status)
        if after is not None:
            args.extend(after)
        query = LIST_SESSIONS[status is not None, after is not None]
        rows = await self._con.fetch(query, *args)
        return [meta_of(row) for row in rows]

    async def exists(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Whether the session exists in the space (provisional included)."""
        return bool(await self._con.fetchval(SESSION_EXISTS, space_id, session_id))

    async def lock(
        self, space_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, LockedSession]:
        """Lock the sessions' rows (in id order, so lockers never deadlock); absent ones omitted."""
        rows = await self._con.fetch(LOCK_SESSIONS, space_id, list(session_ids))
        return {row["id"]: _locked(row) for row in rows}

    async def lock_for_trim(
        self,
        space_id: uuid.UUID,
        session_ids: Sequence[uuid.UUID],
        trimmed: Sequence[uuid.UUID],
        exclusive: Sequence[uuid.UUID] = (),
    ) -> dict[uuid.UUID, LockedSession]:
        """Lock the sessions' rows and those of every reader of the `trimmed` ones (among
        them) in one pass in id order, FOR NO KEY UPDATE (`LOCK_FOR_TRIM`), the `exclusive`
        ones (among them) FOR UPDATE in the same pass; the named sessions found, as `lock`
        answers them. Must come first in the transaction: a pass that missed a row is
        rolled back (to a savepoint: its locks go) and taken again, so no lock is taken
        after a higher id, and (first) none is waited for while others are held."""
        wanted = set(session_ids)
        named, held = list(wanted), list(trimmed)
        for attempt in range(TRIM_LOCK_PASSES):
            quick = attempt < TRIM_QUICK_PASSES
            try:
                async with self._con.transaction():
                    rows = await self._lock_pass(space_id, named, held, set(exclusive), not quick)
                    ids = [row["id"] for row in rows]
                    missed = await self._con.fetchval(UNLOCKED_FOR_TRIM, space_id, named, held, ids)
                    if missed is not None and attempt + 1 < TRIM_LOCK_PASSES:
                        raise _Again
            except _Again:
                if quick:
                    await asyncio.sleep(TRIM_BACKOFF_S * (attempt + 1))
                continue
            return {row["id"]: _locked(row) for row in rows if row["id"] in wanted}
        raise AssertionError("unreachable: the last pass keeps its locks")

    async def _lock_pass(
        self,
        space_id: uuid.UUID,
        named: list[uuid.UUID],
        held: list[uuid.UUID],
        exclusive: set[uuid.UUID],
        wait: bool,
    ) -> list[asyncpg.Record]:
        """One pass of `lock_for_trim`: the rows it locked, in id order."""
        if not exclusive:
            lock = LOCK_FOR_TRIM if wait else LOCK_FOR_TRIM_SKIPPING
            return list(await self._con.fetch(lock, space_id, named, held))
        ids = [row["id"] for row in await self._con.fetch(TRIM_SET_IDS, space_id, named, held)]
        rows: list[asyncpg.Record] = []
        for strong, run in groupby(ids, key=exclusive.__contains__):
            rows += await self._con.fetch(LOCK_IDS[strong, wait], space_id, list(run))
        return rows
