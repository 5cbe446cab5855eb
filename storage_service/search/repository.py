"""SQL of SearchRecords and SearchSessions (the GIN indexes of migrations 0019 and 0021, and
`records_newest`).

Every statement pins `records` and `sessions` by space_id in every scope. A NEWEST page of
the space or a tree reads the space's newest records and checks the query on each, a bounded
number of them (DESIGN §9, STYLE 17: its cost follows the page for a common word), then
the GIN index leading with space_id serves what that did not. A NEWEST page of a session's
view reads each part of the view newest first (`records_session_newest`, migration 0052),
a bounded number of rows, then the view's records (never the space's matches) when that did
not fill the page. RELEVANCE ranks a bounded number of the newest matches, found the same
way (the space's or the view's newest records, bounded; then the GIN, or the view's
records), the GIN taken before a probe of the space or a tree when it holds fewer matches
than that probe would read (a bounded count; before the first, only in a small space, for a
word a small sample of its newest records found rare). Keyset paging on the order's
columns.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from storage_service.records.lineage import PARTS

NEWEST_PROBE_FIRST = 10
"""Records the first probe of a NEWEST page reads at most per row it wants (the page and one
more), newest first through `records_newest` (migration 0051): a word in at least 1 of 10 of
the space's newest records fills the page from it."""

NEWEST_PROBE_ROWS = 200
"""Records the second probe reads at most per row wanted, when the first found the word in
at least 1 of NEWEST_PROBE_ROWS of the records it read (so this one should fill the page):
a word in 1 of 200 records or more is served newest first, its reads following the page and
not its matches. A rarer word (the first probe found too few), or one whose matches are
all old (the probes did not fill the page), is served by the GIN plan after the probes'
bounded reads: its matches, never the space."""

RELEVANCE_GIN_MATCH_COST = 20
"""Before its first probe (in a small space, a word its sample found rare: RELEVANCE_SAMPLE)
and its second, a RELEVANCE page counts the space's matches up to the records that probe
should read over this; fewer, the GIN serves the page. A match counted
(GIN_MATCHES_UP_TO) then read and sorted (_GIN_CANDIDATES) costs about 10 records read
newest first, the count about half of it (bench/bench_search.py, a 1% word over 1,000,000
records: ~4.8 us a match, ~0.4 us a record): with 20, the GIN is taken where it costs at
most half the probe, and a count that finds more costs at most about a third of the probe
(the price of asking, in a space too big for the GIN)."""

RELEVANCE_SAMPLE = 10
"""Candidates per record of the sample a RELEVANCE page of the space or a tree reads before
its first probe: 100 of the space's newest records for 1,000 candidates, a hundredth of what
that probe reads at most (NEWEST_PROBE_FIRST per candidate), 3% of what it reads for a word
in 1 record of 3 (its candidates found in ~3,333). When they are all read (the space holds
more), fewer than 1 of NEWEST_PROBE_FIRST of them hold the word (the first probe would not
find the candidates: it would read the whole space, or its bound) and the space is small
(its sessions, fewer than the count's bound, hold at most the first probe's records: it
would read them all), the space's matches are counted first (SAMPLED_MATCHES_UP_TO), up to
the first probe's records over RELEVANCE_GIN_MATCH_COST; fewer, the GIN serves the
candidates and no probe runs (a word in 1 of 100 records of a space of 10,000: its 100
matches, not the space). A word in more of the sample, as a common one, is probed without
being counted; so is any word of a bigger space, whose posting tree in the GIN, read whole
by a count whatever its bound, costs more than the first probe there."""

RELEVANCE_CANDIDATES = 1000
"""Matches a RELEVANCE walk ranks: the newest visible ones of its scope written up to its
first page (storage.proto, SearchRecords). Ranking is the dear part of a search (each
candidate's vector scored, its session looked up): bounded here. They are found as a NEWEST
page's rows are, each page of the walk (the same ones: the walk's horizon is fixed), with
RELEVANCE_CANDIDATES as the rows wanted: the scope's records up to the horizon newest first,
NEWEST_PROBE_FIRST per candidate, then NEWEST_PROBE_ROWS when the word looked common enough
(a word in 1 of 3 records: about 3,000 records read, however many its matches), then the
GIN's matches sorted by their keys (narrow rows) for a word rarer than that, or in a session's
view all its records up to the horizon. Before the first probe of a small space (its
sessions hold no more records than that probe reads) or a tree of it, a word in fewer than
1 of NEWEST_PROBE_FIRST records of a sample of the space's newest (RELEVANCE_SAMPLE) has
the space's matches up to the horizon counted through the GIN (SAMPLED_MATCHES_UP_TO), up
to that probe's records over RELEVANCE_GIN_MATCH_COST: fewer, the GIN serves the
candidates and no probe runs (a word in 1 of 100 records of a space of 10,000: the
sample's 100 records and its 100 matches, where the first probe read the whole space to
find them). Before the second probe, the space's matches are counted
(GIN_MATCHES_UP_TO), up to the records that probe should read (RELEVANCE_CANDIDATES over
the word's share of the first probe's records) over RELEVANCE_GIN_MATCH_COST: when they
are fewer, the GIN serves the candidates, the cheaper (a 1% word in a space of 100,000:
its 1,000 matches, not the space). Either way the reads are bounded by the probe's
records, never the space's size: at most a twentieth of them as matches counted, then the
probe's records or fewer matches read."""

# Shared by the statements below: $1 space, $2 session (the scope, or NULL), $3 the tsquery
# (its terms normalised by NORMALISED: SearchQuery.normalised), $4 root (or NULL), $5..$8 the
# position after which the page starts (created_at, session, seq, rank; NULL = the first
# page), $9 the page's size; $10 the probe's rows (NEWEST_PROBE_*) or the candidates
# (RELEVANCE), $11 the walk's horizon (RELEVANCE; NULL on its first page: now), $12 the
# probe's rows (RELEVANCE).
#
# `m` is the page's candidates in the page's order, each by its key, order's columns and
# row (narrow rows: no content), `s` its session. The session is looked up by its key, then
# the record's role and content by the row the match was read from (`ctid`: one heap
# fetch, the same row version in this statement's snapshot; by its key the planner may take
# records_tokens, which reads the whole session). Each LATERAL ... LIMIT 1 is not flattened
# into a join, which the planner would hash over every session or record of the space when
# it believes the space small.
#
# `readers` is the holder plus every other session reading the record through a
# segment: a fork that took a deleted source's records over keeps a segment
# naming itself as their holder, which is not a second reader.
_SEARCH = """
{ctes}
SELECT m.session_id, m.seq, r.role, m.created_at, r.content, m.label,
       m.rank, $3::tsquery::text AS terms, {horizon} AS horizon{ranked},
       1 + (SELECT count(*)
            FROM record_segments g
            JOIN sessions v ON v.space_id = $1 AND v.id = g.session_id
                           AND v.provisional_until IS NULL
            WHERE g.space_id = $1 AND g.holder_id = m.session_id
              AND g.session_id <> g.holder_id
              AND m.seq BETWEEN g.from_seq AND g.to_seq) AS readers
FROM ({matches}) m
CROSS JOIN LATERAL (
    SELECT r.role, r.content FROM records r WHERE r.ctid = m.row AND r.space_id = $1 LIMIT 1
) r
ORDER BY {page_order}
LIMIT $9
"""

# A match's session (or a view part's holder), visible and in the root's tree (the scope's
# sessions).
_VISIBLE = """CROSS JOIN LATERAL (
        SELECT s.label FROM sessions s
        WHERE s.space_id = $1 AND s.id = {session} AND s.provisional_until IS NULL
          AND ($4::uuid IS NULL OR s.root_id = $4)
        LIMIT 1
    ) s"""

_NEWEST = "created_at DESC, {m}session_id DESC, {m}seq DESC"
_AFTER = "({m}created_at, {m}session_id, {m}seq) < ($5, $6::uuid, $7::bigint)"

# NEWEST through the GIN: every match after the position, sorted by its key (OFFSET 0
# keeps it a subquery planned by itself, so the sessions are looked up in order and stop
# at the page). Without the fence the serial plan probed the session of every match before
# a top-N sort (10,000 matches: 10,000 probes, half the search's time). The cost follows
# the matches, never the space's records or sessions.
_GIN_MATCHES = """
    SELECT n.created_at, n.session_id, n.seq, n.row, coalesce($8::real, 0) * 0 AS rank, s.label
    FROM (
        SELECT r.created_at, r.session_id, r.seq, r.ctid AS row
        FROM records r
        WHERE r.space_id = $1 AND r.search_vector @@ $3::tsquery
          {scope}
          AND ($5::timestamptz IS NULL OR {after})
        ORDER BY r.{newest}
        OFFSET 0
    ) n
    {visible}
"""

# NEWEST through `records_newest`: the space's records after the position,
# newest first, at most $10 of them (the LIMIT of `w`: a bounded read however rare the word),
# the word checked on each; the sessions looked up for the rows that hold it, in order,
# until the page is full. A page of a common word reads about the page over the word's
# share of the records.
_PROBE_MATCHES = """
    SELECT w.created_at, w.session_id, w.seq, w.row, coalesce($8::real, 0) * 0 AS rank, s.label
    FROM (
        SELECT r.created_at, r.session_id, r.seq, r.ctid AS row, r.search_vector
        FROM records r
        WHERE r.space_id = $1 {scope}
          AND ($5::timestamptz IS NULL OR {after})
        ORDER BY r.{newest}
        LIMIT $10
    ) w
    {visible}
    WHERE w.search_vector @@ $3::tsquery
"""

# RELEVANCE: its candidates (`c`, each with its rank: the $10 newest visible matches of the
# scope written up to the horizon, found by one of the statements below), how many they are
# (`found`) and whether they are surely all of them (`complete`: else the caller reads
# further, as a NEWEST page short of its rows); then the page after the position in (rank,
# key) order. The ranked set is the same for every page of a walk (its horizon is the first
# page's time), so the walk sees each of them once.
_RANKED_MATCHES = """
    SELECT c.created_at, c.session_id, c.seq, c.row, c.label, c.rank, c.found,
           {complete} AS complete
    FROM (
        SELECT c.created_at, c.session_id, c.seq, c.row, c.label, c.rank,
               count(*) OVER () AS found
        FROM ({candidates}) c
    ) c
    WHERE $5::timestamptz IS NULL
       OR (c.rank, c.created_at, c.session_id, c.seq) < ($8::real, $5, $6::uuid, $7::bigint)
    ORDER BY c.rank DESC, c.{c_newest}
    OFFSET 0
"""

# RELEVANCE's candidates through the GIN (a word the probes found rare): its matches up to
# the horizon sorted by their keys (narrow rows), the sessions looked up in order until
# there are enough, then each one's vector by its row, ranked. Its matches, never the space.
_GIN_CANDIDATES = """
        SELECT c.created_at, c.session_id, c.seq, c.row, c.label,
               ts_rank(v.search_vector, $3::tsquery) AS rank
        FROM (
            SELECT n.created_at, n.session_id, n.seq, n.row, s.label
            FROM (
                SELECT r.created_at, r.session_id, r.seq, r.ctid AS row
                FROM records r
                WHERE r.space_id = $1 AND r.search_vector @@ $3::tsquery
                  {scope}
                  AND r.created_at <= {horizon}
                ORDER BY r.{newest}
                OFFSET 0
            ) n
            {visible}
            ORDER BY n.{n_newest}
            LIMIT $10
        ) c
        CROSS JOIN LATERAL (
            SELECT r.search_vector FROM records r WHERE r.ctid = c.row AND r.space_id = $1 LIMIT 1
        ) v
"""

# RELEVANCE's candidates through `records_newest`, as a NEWEST probe: the space's records
# up to the horizon, newest first, at most $12 of them, the word checked on each and the
# sessions looked up for the rows that hold it, in order, until there are $10 (each ranked
# by the vector its row was read with). A word in 1 record of 3 finds them in about 3,000
# records, whatever its matches. They are all of them when there are $10, or when the space
# holds fewer than $12 records up to the horizon (_PROBE_COMPLETE: all read; counted in the
# index only when there are fewer than $10, an OR's second arm), as a small space's are.
_PROBE_CANDIDATES = """
        SELECT w.created_at, w.session_id, w.seq, w.row, s.label,
               ts_rank(w.search_vector, $3::tsquery) AS rank
        FROM (
            SELECT r.created_at, r.session_id, r.seq, r.ctid AS row, r.search_vector
            FROM records r
            WHERE r.space_id = $1 {scope}
              AND r.created_at <= {horizon}
            ORDER BY r.{newest}
            LIMIT $12
        ) w
        {visible}
        WHERE w.search_vector @@ $3::tsquery
        ORDER BY w.{w_newest}
        LIMIT $10
"""

# RELEVANCE's candidates in a session's view ($2): the view's rows up to the horizon read
# part by part as a NEWEST page of the view reads them (`w`, _VIEW_ROWS, $12 rows per part
# at most, NULL: all), its sure hits (_SURE), the newest $10; all of them when there are $10
# or no part stopped at $12 (every row of the view up to the horizon read).
_VIEW_CANDIDATES = """
        SELECT w.created_at, w.session_id, w.seq, w.row, w.label, w.rank
        FROM w
        WHERE w.hit {sure}
        ORDER BY w.{w_newest}
        LIMIT $10
"""
_VIEW_COMPLETE = "c.found = $10 OR NOT EXISTS (SELECT FROM w e WHERE e.k = $12)"
_PROBE_COMPLETE = """c.found = $10 OR (
        SELECT count(*) FROM (
            SELECT FROM records r
            WHERE r.space_id = $1 AND r.created_at <= {horizon}
            ORDER BY r.{newest}
            LIMIT $12
        ) a) < $12"""

# How many matches of the word (the tsquery $2) space $1 holds up to the horizon ($3; NULL:
# now), counted up to $4 (RELEVANCE_GIN_MATCH_COST: _probed) through
# `records_search`, the heap read for at most $4 of them, never the space's other records
# (the index's posting list of the word in the space is read whole: a bitmap, compressed;
# the GIN plan under custom and generic plans, statistics fresh or stale). It is the GIN
# plan's count (_GIN_CANDIDATES reads every match of the space up to the horizon, in a
# tree's scope too: visibility is looked up after).
GIN_MATCHES_UP_TO = """
SELECT count(*) FROM (
    SELECT FROM records r
    WHERE r.space_id = $1 AND r.search_vector @@ $2::tsquery
      AND r.created_at <= coalesce($3::timestamptz, now())
    LIMIT $4
) m
"""

# RELEVANCE of the space or a tree, before its first probe: the space's $5 newest records
# up to the horizon ($3; NULL: now) read as the probe reads them (`records_newest`), the word
# (the tsquery $2) checked on each; when they are $5 (the space holds more), fewer than 1 of
# $6 (NEWEST_PROBE_FIRST) hold it, and the space is small (fewer than $4 sessions, by
# `sessions`' primary key, whose last_seq add up to at most $7, the first probe's records:
# the records they hold, or fewer), the space's matches up to the horizon counted up to $4
# as GIN_MATCHES_UP_TO counts them (each InitPlan run only when the conditions before it
# held); else NULL, not counted: a word common enough for the first probe, or a space it
# reads whole in fewer than $5 records, or one too big to know cheaply (the GIN's bitmap
# reads the space's posting tree, which grows with the space: ~4.7 ms for the 10,000
# matches of a space of 1,000,000 records, more than the first probe; measured by
# bench/bench_search.py).
SAMPLED_MATCHES_UP_TO = f"""
SELECT CASE WHEN s.records = $5 AND s.hits * $6 < $5 AND (
    SELECT count(*) < $4 AND coalesce(sum(z.last_seq), 0) <= $7 FROM (
        SELECT g.last_seq FROM sessions g WHERE g.space_id = $1 LIMIT $4
    ) z) THEN (
    {GIN_MATCHES_UP_TO}) END AS matches
FROM (
    SELECT count(*) AS records, count(*) FILTER (WHERE x.hit) AS hits
    FROM (
        SELECT r.search_vector @@ $2::tsquery AS hit
        FROM records r
        WHERE r.space_id = $1 AND r.created_at <= coalesce($3::timestamptz, now())
        ORDER BY r.created_at DESC, r.session_id DESC, r.seq DESC
        LIMIT $5
    ) x
) s
"""

# NEWEST in a session's view ($2), through `records_session_newest` (migration 0052): each
# part of the view (`parts`, at most SEGMENT_CAP + 1) whose holder is visible, its rows after
# the position newest first, at most $10 of them (NULL: all of them, the view's read), the
# word checked on each. The position in a part's order (its holder fixed): (created_at, seq)
# below ($5, the page's seq when the holder is the page's session, else past every seq when
# the holder sorts below it, before every seq when above), one range of the index; a NULL
# position is past every row. A part that gave $10 rows (its last one `k` = $10) may hold
# older ones unread: a hit is sure when it is not older than any of those parts' last rows
# (_SURE), and the page is the sure hits, so a page short of $9 is the
# view's whole rest only when no part stopped at $10 (else the caller reads further). The
# holder's rows outside the part's seqs (a parent's records after the fork) are skipped
# inside the index (their seq is in it), never fetched. The holders' visibility is looked
# up once per part, before its rows are read.
_VIEW_PROBE_MATCHES = """
    SELECT w.created_at, w.session_id, w.seq, w.row, coalesce($8::real, 0) * 0 AS rank, w.label
    FROM w
    WHERE w.hit {sure}
"""
# A sure hit of `w`: not older than the newest of the last rows of the parts that stopped at
# their rows (`k` = {rows}), found once (an uncorrelated subquery), not looked for again for
# each hit among `w`'s rows (a RELEVANCE probe reads thousands per part); any row is sure
# when no part stopped (no such row: NULL).
_SURE = """AND ((w.created_at, w.session_id, w.seq) >= (
        SELECT e.created_at, e.session_id, e.seq FROM w e
        WHERE e.k = {rows}
        ORDER BY e.created_at DESC, e.session_id DESC, e.seq DESC
        LIMIT 1)) IS NOT FALSE"""
_VIEW_ROWS = """,
w AS (
    SELECT x.created_at, x.session_id, x.seq, x.row, x.hit, x.rank, x.k, s.label
    FROM parts p
    {visible}
    CROSS JOIN LATERAL (
        SELECT y.created_at, y.session_id, y.seq, y.row,
               y.search_vector @@ $3::tsquery AS hit, {rank} AS rank,
               row_number() OVER (ORDER BY y.created_at DESC, y.seq DESC) AS k
        FROM (
            SELECT r.created_at, r.session_id, r.seq, r.ctid AS row, r.search_vector
            FROM records r
            WHERE r.space_id = $1 AND r.session_id = p.holder_id
              AND r.seq BETWEEN p.from_seq AND p.to_seq
              AND {bound}
            ORDER BY r.created_at DESC, r.seq DESC
            LIMIT {rows}
        ) y
    ) x
)"""

# The rows of a part a NEWEST page reads: those after the position.
_VIEW_AFTER = """(r.created_at, r.seq)
                  < (coalesce($5::timestamptz, 'infinity'),
                     CASE WHEN $5::timestamptz IS NULL OR p.holder_id < $6::uuid
                            THEN 9223372036854775807::bigint
                          WHEN p.holder_id = $6::uuid THEN $7::bigint
                          ELSE 0::bigint END)"""
_RANK_OF_HIT = (
    "CASE WHEN y.search_vector @@ $3::tsquery THEN ts_rank(y.search_vector, $3::tsquery) END"
)

_NO_VIEW = "AND $2::uuid IS NULL"
_HORIZON = "coalesce($11::timestamptz, now())"
_WITH_PARTS = f"WITH {PARTS.strip()}"
_FIELDS = {
    "scope": _NO_VIEW,
    "after": _AFTER.format(m="r."),
    "newest": _NEWEST.format(m="r."),
    "n_newest": _NEWEST.format(m="n."),
    "w_newest": _NEWEST.format(m="w."),
    "c_newest": _NEWEST.format(m="c."),
    "horizon": _HORIZON,
}


def _view_rows(*, relevance: bool) -> str:
    """The CTEs of a session's view: its parts, and `w`, the rows a page reads of each
    (NEWEST: after the position, $10 per part; RELEVANCE: up to the horizon, $12 per part,
    each hit ranked)."""
    rows = _VIEW_ROWS.format(
        visible=_VISIBLE.format(session="p.holder_id"),
        bound=f"r.created_at <= {_HORIZON}" if relevance else _VIEW_AFTER,
        rows="$12" if relevance else "$10",
        rank=_RANK_OF_HIT if relevance else "NULL::real",
    )
    return _WITH_PARTS + rows


def _newest(*, in_view: bool, plan: str) -> tuple[str, str]:
    """The CTEs and matches of a NEWEST plan ("probe", "gin": the space or a tree; "view")."""
    if in_view:
        return _view_rows(relevance=False), _VIEW_PROBE_MATCHES.format(
            sure=_SURE.format(rows="$10")
        )
    source = _PROBE_MATCHES if plan == "probe" else _GIN_MATCHES
    visible = _VISIBLE.format(session="w.session_id" if plan == "probe" else "n.session_id")
    return "", source.format(visible=visible, **_FIELDS)


def _ranked(*, in_view: bool, plan: str) -> tuple[str, str]:
    """The CTEs and matches of a RELEVANCE plan ("relevance probe", "relevance": the GIN's;
    "relevance" in a session's view)."""
    ctes = ""
    if in_view:
        ctes = _view_rows(relevance=True)
        candidates = _VIEW_CANDIDATES.format(sure=_SURE.format(rows="$12"), **_FIELDS)
        complete = _VIEW_COMPLETE
    elif plan == "relevance probe":
        visible = _VISIBLE.format(session="w.session_id")
        candidates = _PROBE_CANDIDATES.format(visible=visible, **_FIELDS)
        complete = _PROBE_COMPLETE.format(**_FIELDS)
    else:
        visible = _VISIBLE.format(session="n.session_id")
        candidates = _GIN_CANDIDATES.format(visible=visible, **_FIELDS)
        complete = "true"
    return ctes, _RANKED_MATCHES.format(candidates=candidates, complete=complete, **_FIELDS)


def _search(*, in_view: bool, plan: str) -> str:
    """The statement of one scope (a session's view or not) and plan ("probe", "gin" or
    "view": NEWEST; "relevance probe" or "relevance": RELEVANCE)."""
    relevance = plan.startswith("relevance")
    ctes, matches = (_ranked if relevance else _newest)(in_view=in_view, plan=plan)
    newest = "m." + _NEWEST.format(m="m.")
    return _SEARCH.format(
        ctes=ctes,
        matches=matches,
        page_order=f"m.rank DESC, {newest}" if relevance else newest,
        horizon=_HORIZON if relevance else "NULL::timestamptz",
        ranked=", m.found, m.complete" if relevance else "",
    )


SEARCH_RECORDS = {
    (in_view, plan): _search(in_view=in_view, plan=plan)
    for in_view, plan in (
        (False, "probe"),
        (False, "gin"),
        (True, "view"),
        (False, "relevance probe"),
        (False, "relevance"),
        (True, "relevance"),
    )
}
"""The statements of SearchRecords by (a session's view, plan): "probe" and "gin" NEWEST
of the space or a tree (parameters $1..$9, and the probe's rows $10), "view" NEWEST of a
session's view ($1..$10: the rows read per part, NULL for all); "relevance probe" and
"relevance" (the GIN's) RELEVANCE of the space or a tree ($1..$11, and the probe's rows
$12), "relevance" of a session's view ($1..$12: the rows read per part, NULL for all), each
row with its page's `found` candidates and whether they are `complete`. A session's view is
not searched through the GIN, whose matches are the whole space's (a search in a small
session of a big space would read every match of the space), nor by a probe of the space's
newest (mostly other sessions' records)."""

# $1 space, $2 the to_tsquery text ('simple'), $3 status (or NULL), $4/$5 the
# position (created_at, id; NULL = the first page), $6 the page's size. The
# sessions whose label matches (`sessions_label_search`, which holds the sessions
# being erased too since migration 0050: the probe tests visibility) and those with a
# metadata value that matches (`session_metadata_search`, migration 0021), each
# once (UNION); then each one's row by its key (the LATERAL ... LIMIT 1, as in
# SEARCH_RECORDS: not a join the planner would hash over every session of the
# space). `session_metadata` is the tree's table (it writes it); storage only
# reads it here, as it reads `sessions`.
SEARCH_SESSIONS = """
SELECT s.id, s.label, s.status, s.turn_count, s.created_at, s.updated_at, s.last_active_at,
       s.pinned
FROM (
    SELECT l.id FROM sessions l
    WHERE l.space_id = $1 AND stello_label_vector(l.label) @@ to_tsquery('simple'::regconfig, $2)
      AND l.provisional_until IS NULL
    UNION
    SELECT m.session_id FROM session_metadata m
    WHERE m.space_id = $1 AND m.value_vector @@ to_tsquery('simple'::regconfig, $2)
) AS hit
CROSS JOIN LATERAL (
    SELECT s.id, s.label, s.status, s.turn_count, s.created_at, s.updated_at,
           s.last_active_at, s.pinned
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = hit.id AND s.provisional_until IS NULL
      AND ($3::text IS NULL OR s.status = $3)
      AND ($4::timestamptz IS NULL OR (s.created_at, s.id) < ($4, $5::uuid))
    LIMIT 1
) s
ORDER BY s.created_at DESC, s.id DESC
LIMIT $6
"""

# Run first in a search's transaction, as SET LOCAL statements: PgBouncer's transaction
# mode keeps working, and on Citus they reach the worker that runs the search
# (citus.propagate_set_commands = 'local', stello.distribution.apply), which set_config() does
# not (docs/scaling.md, GetTree).
# - plan_cache_mode: a plan is made for each call. A generic plan knows neither the query's
#   words nor the page's position, and scans `records` instead of `records_search`
#   (seconds at 100,000 records, where the custom plan reads the matches: measured by
#   bench/bench_search.py).
# - max_parallel_workers_per_gather = 0: no parallel workers. The planner estimates a word
#   that its statistics do not list among a column's most common elements (any rare word)
#   at 0.5% of the rows, so a rare word's estimate grows with the space whatever its
#   matches: past ~1,000,000 records of a space it planned the 50 matches of a rare word
#   with two parallel workers, which read the same blocks but take ~12 ms to start, for a
#   search of ~1.2 ms (bench/bench_search.py: 5.9x at 10x the records with them, ~1x
#   without). A search's cost then follows its matches, as the index's reads do.
# - statement_timeout: each statement's longest time (milliseconds, an integer the service
#   computes: a SET takes no parameter): a search of words that most records hold, in a
#   big space, reads many; it is bounded, not left to hold a connection for minutes.
_SEARCH_SETTINGS = """
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL max_parallel_workers_per_gather = 0;
SET LOCAL statement_timeout = {timeout_ms:d}
"""

# Run after _SEARCH_SETTINGS in a search of a session's view, NEWEST or RELEVANCE (its other
# statements, the scope's root and the query's terms, sort nothing). A part is read in the
# page's order through `records_session_newest`, never sorted: the planner, which estimates a
# part's seq range at a row or two (a range between a row's values), took the primary key's
# range of the part and sorted it (the whole part read, for a page of it). The page's own
# sort (of the rows the probe kept; RELEVANCE's of its candidates, then by rank) stays: no
# plan is without it. Before PostgreSQL 18 that sort adds 10^10 to the plan's cost (a
# disabled node no plan avoids), past jit_above_cost: JIT off, or each page was compiled
# first (~300 ms on PostgreSQL 15, for a page read in under 1 ms).
VIEW_SETTINGS = """
SET LOCAL enable_sort = off;
SET LOCAL jit = off
"""

# The root of a visible session of the space (the scope of a search); no row when the session
# is not visible. A root's root_id is its own id.
VISIBLE_ROOT = """
SELECT root_id FROM sessions WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""


# Each `to_tsquery` text of $1, in order, as the English configuration normalises it (stems,
# its common words left out: "the" is '') and as 'simple' does (lowercased only).
NORMALISED = """
SELECT to_tsquery('english'::regconfig, t)::text AS english,
       to_tsquery('simple'::regconfig, t)::text AS simple
FROM unnest($1::text[]) WITH ORDINALITY AS u (t, i)
ORDER BY i
"""


@dataclass(frozen=True, slots=True)
class After:
    """Where a page starts: after this hit in the order."""

    created_at: datetime
    session_id: uuid.UUID
    seq: int
    rank: float | None
    horizon: datetime | None = None
    """RELEVANCE: the time of the walk's first page (its candidates were written up to it)."""


class SearchRepository:
    """The search statements, on a unit of work's connection."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def settings(self, timeout_s: float, *, view: bool = False) -> None:
        """Plan this transaction's statements for their parameters, without parallel
        workers, each for at most `timeout_s` (_SEARCH_SETTINGS); with `view` (a search of a
        session's view), without sorting a part (VIEW_SETTINGS)."""
        timeout_ms = max(1, int(timeout_s * 1000))
        settings = _SEARCH_SETTINGS.format(timeout_ms=timeout_ms)
        await self._con.execute(f"{settings};\n{VIEW_SETTINGS}" if view else settings)

    async def root_of(self, space_id: uuid.UUID, session_id: uuid.UUID) -> uuid.UUID | None:
        """The root of `session_id` (itself for a root), or None when it is not a visible
        session of the space."""
        root: uuid.UUID | None = await self._con.fetchval(VISIBLE_ROOT, space_id, session_id)
        return root

    async def normalised(self, texts: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """Each `to_tsquery` text as English and 'simple' normalise it (NORMALISED)."""
        rows = await self._con.fetch(NORMALISED, list(texts))
        return tuple((row["english"], row["simple"]) for row in rows)

    async def records(
        self,
        space_id: uuid.UUID,
        tsquery: str,
        *,
        session_id: uuid.UUID | None,
        root_id: uuid.UUID | None,
        relevance: bool,
        after: After | None,
        limit: int,
    ) -> list[asyncpg.Record]:
        """Up to `limit` hits after `after` in the order; each row's `horizon` is the walk's
        (RELEVANCE: `after.horizon`, or now on its first page)."""
        position = (
            space_id,
            session_id,
            tsquery,
            root_id,
            after.created_at if after else None,
            after.session_id if after else None,
            after.seq if after else None,
            after.rank if after else None,
            limit,
        )
        if relevance:
            horizon = after.horizon if after else None
            return await self._relevance((*position, RELEVANCE_CANDIDATES, horizon))
        if session_id is not None:
            view = SEARCH_RECORDS[(True, "view")]
            page = await self._probed(view, position, limit)
            return page if page is not None else list(await self._con.fetch(view, *position, None))
        page = await self._probed(SEARCH_RECORDS[(False, "probe")], position, limit)
        if page is not None:
            return page
        return list(await self._con.fetch(SEARCH_RECORDS[(False, "gin")], *position))

    async def _relevance(self, ranked: tuple[object, ...]) -> list[asyncpg.Record]:
        """A RELEVANCE page (`ranked`: the parameters $1..$11) whose candidates the probes
        found (the scope's newest records, or a session's view part by part), else the
        GIN's (the space or a tree: also when it holds fewer matches than the first probe
        would read, of a word rare in a sample, _sampled_few, or than the second probe would,
        _few_matches) or the whole view's read."""
        in_view = ranked[1] is not None
        probe = SEARCH_RECORDS[(in_view, "relevance" if in_view else "relevance probe")]
        if not in_view and await self._sampled_few(ranked):
            return list(await self._con.fetch(SEARCH_RECORDS[(False, "relevance")], *ranked))
        few = None if in_view else self._few_matches(ranked)
        page = await self._probed(probe, ranked, RELEVANCE_CANDIDATES, ranked=True, few=few)
        if page is not None:
            return page
        if in_view:
            return list(await self._con.fetch(probe, *ranked, None))
        return list(await self._con.fetch(SEARCH_RECORDS[(False, "relevance")], *ranked))

    async def _sampled_few(self, ranked: tuple[object, ...]) -> bool:
        """Whether the space holds fewer matches up to the walk's horizon than the first
        probe's records over RELEVANCE_GIN_MATCH_COST, counted (SAMPLED_MATCHES_UP_TO) only
        when the word is in fewer than 1 of NEWEST_PROBE_FIRST records of a sample of the
        space's newest (RELEVANCE_SAMPLE) and the space's sessions, fewer than that bound,
        hold no more records than the first probe reads: the GIN, the cheaper, then serves
        the candidates."""
        space_id, tsquery, wanted, horizon = ranked[0], ranked[2], ranked[9], ranked[10]
        assert isinstance(wanted, int)
        first = NEWEST_PROBE_FIRST * wanted
        limit = first // RELEVANCE_GIN_MATCH_COST
        sample = max(1, wanted // RELEVANCE_SAMPLE)
        count = await self._con.fetchval(
            SAMPLED_MATCHES_UP_TO,
            space_id,
            tsquery,
            horizon,
            limit,
            sample,
            NEWEST_PROBE_FIRST,
            first,
        )
        return count is not None and int(count) < limit

    def _few_matches(self, ranked: tuple[object, ...]) -> Callable[[int], Awaitable[bool]]:
        """Whether the space holds fewer than `limit` matches up to the walk's horizon
        (GIN_MATCHES_UP_TO: at most `limit` of them read)."""
        space_id, tsquery, horizon = ranked[0], ranked[2], ranked[10]

        async def few(limit: int) -> bool:
            count = await self._con.fetchval(GIN_MATCHES_UP_TO, space_id, tsquery, horizon, limit)
            return int(count) < limit

        return few

    async def _probed(
        self,
        probe: str,
        position: tuple[object, ...],
        wanted: int,
        *,
        ranked: bool = False,
        few: Callable[[int], Awaitable[bool]] | None = None,
    ) -> list[asyncpg.Record] | None:
        """A page read by `probe` within NEWEST_PROBE_FIRST rows per row `wanted` (a NEWEST
        page's rows, or RELEVANCE's candidates: `ranked`), then (when the word looked
        common enough) NEWEST_PROBE_ROWS; None when neither filled it (the caller's
        unbounded plan serves the page), or when `few` (RELEVANCE of the space or a tree)
        says the GIN holds fewer matches than the records the second probe should read
        (`wanted` over the word's share of the first probe's rows, all of them read: else
        it was complete) over RELEVANCE_GIN_MATCH_COST: the GIN's plan, the cheaper, then
        serves the same candidates."""
        first = NEWEST_PROBE_FIRST * wanted
        rows = await self._con.fetch(probe, *position, first)
        filled, found = _filled(rows, wanted, ranked=ranked)
        if filled:
            return list(rows)
        if found * NEWEST_PROBE_ROWS >= first:
            if few is not None and await few(first * wanted // found // RELEVANCE_GIN_MATCH_COST):
                return None
            rows = await self._con.fetch(probe, *position, NEWEST_PROBE_ROWS * wanted)
            if _filled(rows, wanted, ranked=ranked)[0]:
                return list(rows)
        return None

    async def sessions(
        self,
        space_id: uuid.UUID,
        tsquery: str,
        status: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[asyncpg.Record]:
        """Up to `limit` sessions whose label or a metadata value matches, newest first,
        after `after`."""
        return list(
            await self._con.fetch(
                SEARCH_SESSIONS,
                space_id,
                tsquery,
                status,
                after[0] if after else None,
                after[1] if after else None,
                limit,
            )
        )


def _filled(rows: list[asyncpg.Record], wanted: int, *, ranked: bool) -> tuple[bool, int]:
    """Whether a probe's page is the answer, and the matches it found: a NEWEST page's rows
    (the answer when there are `wanted`); a RELEVANCE page's candidates (`found`, the answer
    when `complete`; an empty page tells neither: the caller reads further)."""
    if not ranked:
        return len(rows) == wanted, len(rows)
    if not rows:
        return False, 0
    return bool(rows[0]["complete"]), int(rows[0]["found"])
