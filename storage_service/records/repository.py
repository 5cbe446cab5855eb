"""SQL of a session's records, read through its view (DESIGN §3, §4.3, §4.4).

A record's seq is assigned under the session's row lock, with its token estimate
and the cumulative one (`sessions.last_seq`, `sessions.token_total`, migration
0006). Every read goes over the session's view (`PARTS`,
`storage_service.records.lineage`), one index range per part. The window's
probes (`first_after`, `reaching`, `caller_before`) are one index lookup each
whatever the history's length: the token columns turn "the newest records within
a budget" into the first record whose cumulative estimate reaches (total -
budget), found on the ``records_tokens`` index. Reads treat provisional sessions
as absent; writes accept them. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from stello.stored import reply_erasure
from stello.stored.events import Outbox
from storage_service.models import MAX_SEQ, NewRecord, RecordQuery, StoredRecord, ToolCall
from storage_service.records.lineage import PARTS
from storage_service.sessions.repository import session_event

# Seqs are assigned under the session's row lock, taken by the function's UPDATE and
# held to the end of the statement's transaction: concurrent appends queue on it and
# get contiguous ranges. No row (unknown session) means nothing is inserted. The token
# columns (migration 0006) are counted under the same lock: each record's estimate,
# and the cumulative one continuing the session's total. `$9`: the statement is its
# whole transaction (AppendRecords on its own) and takes the event's position in it
# (the space's row stays locked until it commits), as `stello.stored.events.Outbox.flush`
# does at a transaction's end; a provisional session takes no position and writes no
# event. A function of plain statements (migration 0034): on Citus each is routed to
# the space's worker, and a call that is its own transaction is delegated there whole.
APPEND_RECORDS = """
SELECT seq, created_at
FROM stello_append_records($1, $2, $3::text[], $4::text[], $5::text[], $6::text[],
                           $7::timestamptz[], $8::text[], $9::boolean)
"""

# One row per visible session (NULL record columns when nothing matches), no
# row at all when the session is absent or provisional. The walk goes over the
# session's view (`PARTS`: inherited segments, then its own records; DESIGN
# §4.4), one index range per part it needs: a part whose parts ahead of it in
# the walk's direction already hold $6 + $7 + 1 seqs of the range ($3, $4)
# (`ahead`, counted from the parts' ranges) is never probed, unless a role
# filters the rows. It takes $7 + 1 records (the extra one
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
            FROM (
                SELECT q.*,
                       sum(GREATEST(0, LEAST(q.to_seq, $4::bigint - 1)
                                       - GREATEST(q.from_seq, $3::bigint + 1) + 1))
                           OVER (ORDER BY q.from_seq {direction}
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead
                FROM parts q
            ) p
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
            WHERE p.ahead IS NULL OR $5::text IS NOT NULL OR p.ahead <= $6::bigint + $7
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

# The seq through which TrimRecords removes records from the view (the
# newest record older than the newest `keep_recent` ($3); NULL with no more
# records than that), how many records of the view it removes, and the first of
# them. Counted from the parts' ranges, not read: a view's seqs are contiguous
# (`PARTS`), from its first segment's first seq (or, with no segment, its first
# own record: one probe, LATERAL, as a trim may have removed a prefix of its own
# rows; as a join ordered by seq it was planned as a sort of them all, three times)
# through `last_seq`. So a trim reads no record of the view, however many it
# removes or however deep the chain of forks it ends (it read every one to count
# them: 2,048 tuples at the end of a chain of 2,000 forks).
TRIM_CUT = f"""
WITH {PARTS}, bounds AS (
    SELECT COALESCE(
               (SELECT min(p.from_seq) FROM parts p WHERE p.inherited),
               (SELECT f.seq FROM parts p
                CROSS JOIN LATERAL (
                    SELECT r.seq FROM records r
                    WHERE r.space_id = $1 AND r.session_id = $2
                      AND r.seq >= p.from_seq AND r.seq <= p.to_seq
                    ORDER BY r.seq
                    LIMIT 1
                ) f
                WHERE NOT p.inherited
                ORDER BY f.seq
                LIMIT 1)) AS first_seq,
           (SELECT p.to_seq FROM parts p WHERE NOT p.inherited) AS last_seq
)
SELECT CASE WHEN last_seq - first_seq + 1 > $3 THEN last_seq - $3 END AS through,
       GREATEST(last_seq - $3 - first_seq + 1, 0) AS removed, first_seq
FROM bounds
"""

# The view stops at `through`; rows a fork still reads go to an heir first
# (migration 0009). The caller locked the session and its readers first, in one
# id-ordered pass (`LOCK_FOR_TRIM`, migration 0023).
RELEASE = """
SELECT stello_release_records($1, ARRAY[$2::uuid], $3)
"""

# Every probe goes over the session's view (`PARTS`, DESIGN §4.4): one index
# probe per part, the parts being its inherited segments and its own records.

# The first record after a seq, with the cumulative estimate before it: in
# the first part that reaches past the seq (its rows are contiguous), one probe.
FIRST_AFTER = f"""
WITH {PARTS}
SELECT x.seq, x.before
FROM (SELECT * FROM parts WHERE to_seq > $3 ORDER BY from_seq LIMIT 1) p
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
# is one descent of records_tokens (cumulative, seq) whatever the statistics; it
# alone says `token_cumulative >= 0`, the index's predicate (migration 0027), so
# that no read of a seq range (the parts' probes here, TRIM_CUT's) can take that
# index instead of the primary key and read the whole view.
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
      AND token_cumulative >= 0
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
class Mark:
    """A record's seq and the cumulative estimate of the records before it."""

    seq: int
    before: int


def _bounds(query: RecordQuery) -> tuple[int, int]:
    """The page's exclusive seq bounds, in (0, MAX_SEQ]: seqs start at 1, and the
    statement computes `after + 1` and `before - 1`, which overflowed bigint at the int64
    extremes a client may send (INTERNAL, not the empty page)."""
    after = 0 if query.after_seq is None else min(max(query.after_seq, 0), MAX_SEQ - 1)
    before = MAX_SEQ if query.before_seq is None else min(max(query.before_seq, 1), MAX_SEQ)
    return after, before


def _mark(row: asyncpg.Record | None) -> Mark | None:
    return None if row is None else Mark(row["seq"], row["before"])


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


class RecordRepository:
    """The records statements, on a unit of work's connection and outbox."""

    __slots__ = ("_con", "_outbox")

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self._outbox = outbox

    async def append(
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
            APPEND_RECORDS,
            space_id,
            session_id,
            [r.role for r in records],
            [r.content for r in records],
            [_calls_json(r.tool_calls) for r in records],
            [r.tool_call_id for r in records],
            [r.created_at for r in records],
            [None if r.metadata is None else json.dumps(r.metadata) for r in records],
            alone,
        )
        if not rows:
            return None
        stored = sorted((row["seq"], row["created_at"]) for row in rows)
        if not alone:
            event = session_event(
                "records_appended", session_id, first_seq=stored[0][0], last_seq=stored[-1][0]
            )
            self._outbox.add(space_id, event)
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

    async def page(
        self, space_id: uuid.UUID, session_id: uuid.UUID, query: RecordQuery, max_bytes: int
    ) -> tuple[list[StoredRecord], bool] | None:
        """The records `query` selects within `max_bytes` (at least one), ascending seq, and
        whether the walk left records; None when the session is not visible."""
        rows = await self._con.fetch(
            LIST_RECORDS_NEWEST if query.newest_first else LIST_RECORDS_OLDEST,
            space_id,
            session_id,
            *_bounds(query),
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

    async def trim(self, space_id: uuid.UUID, session_id: uuid.UUID, keep: int) -> int:
        """Remove all but the newest `keep` records from the view; how many went.

        The summaries that covered them no longer match: the caller clears the cache in
        the same transaction (`storage_service.records.service.trim`).
        """
        row = await self._con.fetchrow(TRIM_CUT, space_id, session_id, keep)
        assert row is not None  # an aggregate answers one row
        removed = int(row["removed"])
        if removed:
            await self._con.execute(RELEASE, space_id, session_id, row["through"])
            await reply_erasure.erase_record_replies(self._con, space_id, session_id)
            event = session_event(
                "records_trimmed", session_id, first_seq=row["first_seq"], last_seq=row["through"]
            )
            self._outbox.add(space_id, event)
        return removed

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
