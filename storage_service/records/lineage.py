"""SQL of fork by reference (DESIGN §4.4, migration 0009): a session's view and its lineage.

A session's records are its *view*: its segments (ranges of another
session's rows, `record_segments`), then its own rows after its lineage's
cut. `PARTS` lists them for one session in one CTE, so every read of records
is one index range per part (a session without a lineage has exactly one).
`InheritRecordsOp` writes a lineage: the source's segments cut at the cut,
plus the source's own part (one segment with the source's last one when that
one is the source's own rows just below it). When that list would pass
`SEGMENT_CAP`, the source is compacted first (`stello_compact_segments`,
migration 0013): the rows of some adjacent segments are copied, verbatim, into
the source, which then holds them as one segment; once for all its forks, which
then copy no row. So a fork writes at most `SEGMENT_CAP` segment rows, and
every read probes at most `SEGMENT_CAP` + 1 parts, however deep the chain of
forks. What happens to the rows when a source is trimmed or
deleted is `stello_release_records`'s job (migrations 0009, 0013). Every
statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from stello.errors import FailedPrecondition, session_not_found
from stello.reasons import SESSION_NOT_EMPTY

SEGMENT_CAP = 16
"""Segments per session at most (DESIGN §4.4); migration 0013 compacts to it too.

Chosen from a simulation of chains of forks (each session adding r records, then
forked): rows copied per fork on average at depth 2,000 with r = 1 are 8.9 at a
cap of 8, 6.5 at 16; a read probes at most the cap + 1 parts (16 probes cost
less than a millisecond), so 16 keeps both small."""

# The parts of the view of session $2 of space $1 (at most SEGMENT_CAP + 1).
# Seqs of a view are contiguous (appends number them in order, trims cut a
# prefix, forks and releases keep them), so a segment holds a row at every seq
# of its range, and its own part one at every seq from its first own record
# through `last_seq` (a part ends there: a read may count rows by ranges).
PARTS = """
parts AS (
    SELECT g.holder_id, g.from_seq, g.to_seq, true AS inherited
    FROM record_segments g
    WHERE g.space_id = $1 AND g.session_id = $2
  UNION ALL
    SELECT $2::uuid, COALESCE((SELECT l.until_seq FROM session_lineages l
                               WHERE l.space_id = $1 AND l.session_id = $2), 0) + 1,
           COALESCE((SELECT o.last_seq FROM sessions o WHERE o.space_id = $1 AND o.id = $2),
                    9223372036854775807::bigint), false
)"""

# A fork's row locks (DESIGN §4.4): its source and the holders of the source's
# segments, in ONE pass in id order, as every other locker of several sessions
# takes them (a Transact's named sessions, a trim's set, the erasure job's
# readers): the holders below the source FOR KEY SHARE (`LOCK_HOLDERS_BELOW`),
# then the source (`LOCK_SOURCE`), then the holders above it (`LOCK_HOLDERS_REST`).
# Holders first and the source after, a fork holding a holder's key share waited
# for its source while a Transact holding the source FOR UPDATE waited for the
# key share (a deadlock). A key share waits only for a FOR UPDATE: a Transact's
# named session, a trim's checked one, the erasure job's batch (claimed SKIP
# LOCKED, after its readers: it never waits for a fork while holding one).
# The source's segments are stable once it is locked (every release, trim or
# compaction of them locks it FOR NO KEY UPDATE): the holders above it are read
# then, and a holder below it that a release made in the meantime (the first
# statement read the list unlocked) is locked last, out of order; the rare
# deadlock that may close is the unit of work's to retry.
#
# Each holder is one primary-key probe of `sessions` whatever the statistics: a set
# condition (`s.id = ANY (ARRAY(...))`) let the planner scan the space's sessions
# when its statistics called the space small (a big space grown since the last
# ANALYZE: 60,000 tuples a statement for a space of 30,000), and a fork must cost
# the same however big its space. The holders ($2's segments, at most
# `SEGMENT_CAP`) are read first in id order; the nested loop locks them in its
# outer side's order.
_HOLDERS = """
SELECT l.id
FROM (SELECT DISTINCT g.holder_id AS id FROM record_segments g
      WHERE g.space_id = $1 AND g.session_id = $2 AND {which}
      ORDER BY 1) h
CROSS JOIN LATERAL (
    SELECT s.id FROM sessions s
    WHERE s.space_id = $1 AND s.id = h.id
    FOR KEY SHARE OF s
) l
"""
LOCK_HOLDERS_BELOW = _HOLDERS.format(which="g.holder_id < $2")
LOCK_HOLDERS_REST = _HOLDERS.format(which="g.holder_id <> $2 AND g.holder_id <> ALL ($3::uuid[])")

# How many segments a child of source $2 would have before any compaction:
# the source's, plus its own part unless its last segment is its own rows just
# below it (read without a lock: `inherit` rechecks what it decides from it).
CHILD_WIDTH = """
SELECT count(*) + CASE WHEN bool_or(g.holder_id = $2 AND g.to_seq = COALESCE(l.until_seq, 0))
                       THEN 0 ELSE 1 END AS width
FROM record_segments g
LEFT JOIN session_lineages l ON l.space_id = $1 AND l.session_id = $2
WHERE g.space_id = $1 AND g.session_id = $2
"""

# FOR SHARE: no release can repoint the source's segments (it locks the
# readers FOR NO KEY UPDATE) until this fork has copied them and committed.
_LOCK_SOURCE = """
SELECT s.last_seq, COALESCE(l.until_seq, 0) AS own_after
FROM sessions s
LEFT JOIN session_lineages l ON l.space_id = s.space_id AND l.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
FOR {mode} OF s
"""
LOCK_SOURCE = _LOCK_SOURCE.format(mode="SHARE")
# A source whose children would pass the cap is compacted first, once for all
# its forks: FOR NO KEY UPDATE, so no other fork copies its segments meanwhile
# (forks of it wait; forks of its forks, which only key-share it, do not).
LOCK_SOURCE_TO_COMPACT = _LOCK_SOURCE.format(mode="NO KEY UPDATE")

# The newest record of the view at or below seq $3 (with $4, the newest that is
# not a tool result).
LAST_AT = f"""
WITH {PARTS}
SELECT x.seq, x.role, x.calls, x.cumulative
FROM parts p
CROSS JOIN LATERAL (
    SELECT seq, role, tool_calls AS calls, token_cumulative AS cumulative
    FROM records
    WHERE space_id = $1 AND session_id = p.holder_id
      AND seq >= p.from_seq AND seq <= p.to_seq AND seq <= $3
      AND (NOT $4 OR role <> 'tool')
    ORDER BY seq DESC
    LIMIT 1
) x
ORDER BY x.seq DESC
LIMIT 1
"""

# The tool records of the view after seq $3 through seq $4 (one tool group).
TOOL_IDS = f"""
WITH {PARTS}
SELECT x.tool_call_id
FROM parts p
CROSS JOIN LATERAL (
    SELECT tool_call_id
    FROM records
    WHERE space_id = $1 AND session_id = p.holder_id
      AND seq >= p.from_seq AND seq <= p.to_seq AND seq > $3 AND seq <= $4
      AND role = 'tool'
) x
"""

# $1 space, $2 child, $3 source, $4 cut, $5 the cumulative estimate at the cut,
# $6 the source's own cut (its own rows are after it). The child must be new:
# no record ever appended (last_seq 0) and no lineage. The source's own part
# becomes a segment from its first own row still there (a trim of the source
# may have removed a prefix of it; a segment over seqs with no row would break
# `PARTS`'s promise, and reads would count those seqs as rows ahead), and none
# when no own row is left at or below the cut. A function of plain statements
# (migration 0034), each routed to the space's worker on Citus (as one statement
# with INSERTs as CTEs, Citus planned it recursively, through the coordinator).
INHERIT = """
SELECT made, segments FROM stello_inherit_records($1, $2, $3, $4, $5, $6)
"""

# The child's list past the cap, compacted (migration 0013); rows copied.
COMPACT = """
SELECT stello_compact_segments($1, $2, $3)
"""

SESSION_STATE = """
SELECT last_seq, EXISTS (SELECT FROM session_lineages l
                         WHERE l.space_id = $1 AND l.session_id = $2) AS has_lineage
FROM sessions WHERE space_id = $1 AND id = $2 AND provisional_until IS DISTINCT FROM 'infinity'
"""


@dataclass(frozen=True, slots=True)
class _Last:
    seq: int
    role: str
    call_ids: frozenset[str]
    cumulative: int


class LineageRepository:
    """The lineage statements, on a unit of work's connection (inside a Transact)."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def inherit(
        self, space_id: uuid.UUID, session_id: uuid.UUID, source_id: uuid.UUID, until: int | None
    ) -> int:
        """Give `session_id` the records of `source_id` through `until` by reference; the cut.

        Raises:
            NotFound: the source (or the session) is not in the space.
            FailedPrecondition: the session already has records or a lineage.
        """
        wide = await self._con.fetchval(CHILD_WIDTH, space_id, source_id) > SEGMENT_CAP
        below = [r["id"] for r in await self._con.fetch(LOCK_HOLDERS_BELOW, space_id, source_id)]
        lock = LOCK_SOURCE_TO_COMPACT if wide else LOCK_SOURCE
        source = await self._con.fetchrow(lock, space_id, source_id)
        if source is None:
            raise session_not_found(source_id, "source session")
        await self._con.fetch(LOCK_HOLDERS_REST, space_id, source_id, below)
        if wide:
            # The source's list to one segment under the cap (same view, rows copied
            # into the source), so this fork and every later one fit without copying.
            await self._con.execute(COMPACT, space_id, source_id, SEGMENT_CAP - 1)
        last_seq: int = source["last_seq"]
        cut = last_seq if until is None else min(until, last_seq)
        last = await self._last_at(space_id, source_id, cut)
        if last is not None:
            cut = await self._closed_cut(space_id, source_id, last)
            if cut != last.seq:
                last = await self._last_at(space_id, source_id, cut)
        cumulative = last.cumulative if last is not None else 0
        made = await self._con.fetchrow(
            INHERIT, space_id, session_id, source_id, cut, cumulative, source["own_after"]
        )
        assert made is not None  # aggregates answer one row
        if not made["made"]:
            await self._refuse(space_id, session_id)
        if made["segments"] > SEGMENT_CAP:
            # The source's list grew between the unlocked width and its lock (a release
            # split a segment): this child is compacted instead.
            await self._con.execute(COMPACT, space_id, session_id, SEGMENT_CAP)
        return cut

    async def _last_at(
        self, space_id: uuid.UUID, session_id: uuid.UUID, seq: int, *, skip_tools: bool = False
    ) -> _Last | None:
        """The newest record at or below `seq` (with `skip_tools`, that is not a tool result)."""
        row = await self._con.fetchrow(LAST_AT, space_id, session_id, seq, skip_tools)
        if row is None:
            return None
        calls: list[dict[str, str]] | None = row["calls"]
        ids = frozenset(c["id"] for c in calls) if calls else frozenset()
        return _Last(row["seq"], row["role"], ids, row["cumulative"])

    async def _closed_cut(self, space_id: uuid.UUID, source_id: uuid.UUID, last: _Last) -> int:
        """The cut moved below a tool group still open at `last` (else `last`'s seq)."""
        if last.role == "assistant" and last.call_ids:
            return last.seq - 1  # calls with no results yet
        if last.role != "tool":
            return last.seq
        caller = await self._last_at(space_id, source_id, last.seq, skip_tools=True)
        if caller is None or caller.role != "assistant" or not caller.call_ids:
            return last.seq  # orphan tool results stay (context assembly drops them)
        answered = await self._con.fetch(TOOL_IDS, space_id, source_id, caller.seq, last.seq)
        if caller.call_ids - {r["tool_call_id"] for r in answered}:
            return caller.seq - 1
        return last.seq

    async def _refuse(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        row = await self._con.fetchrow(SESSION_STATE, space_id, session_id)
        if row is None:
            raise session_not_found(session_id)
        raise FailedPrecondition(
            f"session {session_id} already has records or inherited ones "
            f"(last seq {row['last_seq']}); only a new session can inherit",
            reason=SESSION_NOT_EMPTY,
        )
