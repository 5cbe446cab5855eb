"""A SearchRecords page scoped to one session's view costs what the page needs, not every
match of the space.

The view (its own records and those it inherits through lineage segments, `PARTS`) is read
newest first, part by part, and the word checked on each row, stopping at the page; a word
that probe does not fill the page with is served from the view's records, never from the
GIN's matches of the whole space. Tuples read are counted in PostgreSQL's statistics
(pg_stat), not time.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from stello.common.v1 import common_pb2
from storage_service.search.repository import NEWEST_PROBE_FIRST
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, inherit
from tests.storage.search.test_search import no_autovacuum_of_records, records_read_by
from tests.storage.search.test_search_newest import LAST_SEQ as LAST_SEQ_FROM_RECORDS
from tests.storage.search.test_search_newest import Stub, keys, page
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

BASE = datetime(2026, 1, 1, tzinfo=UTC)
CUT = 60  # the child inherits the parent's seqs 1..CUT
OWN = 1_000  # the child's own records, seqs CUT + 1 .. CUT + OWN

# Records of session $2 of space $1, seqs $3.., their contents $4, created at BASE ($6) +
# $5 seconds.
INSERT = """
INSERT INTO records (space_id, session_id, seq, role, content, created_at,
                     token_estimate, token_cumulative)
SELECT $1, $2, $3 + i - 1, 'user', t, $6::timestamptz + ($5::float8[])[i] * interval '1 second',
       1, $3 + i - 1
FROM unnest($4::text[]) WITH ORDINALITY AS u (t, i)
"""
LAST_SEQ = "UPDATE sessions SET last_seq = $3 WHERE space_id = $1 AND id = $2"

# The rest of the space: records first..last-1 of $4's sessions, newer than the view's,
# "kettle" in every 7th, "oldword" in every 50th.
ELSEWHERE = """
INSERT INTO records (space_id, session_id, seq, role, content, created_at,
                     token_estimate, token_cumulative)
SELECT $1, ($4::uuid[])[i % 9 + 1], i / 9 + 1, 'user',
       'elsewhere ' || i || CASE WHEN i % 7 = 0 THEN ' kettle' ELSE '' END
         || CASE WHEN i % 50 = 0 THEN ' oldword' ELSE '' END,
       $5::timestamptz + (100000 + i) * interval '1 second', 1, i / 9 + 1
FROM generate_series($2::int, $3::int - 1) AS i
"""


class View:
    """A parent of 200 records, a child inheriting its first CUT and holding OWN of its own
    (their times not in seq order, many alike: a record's time is its writer's), and nine other
    sessions holding the rest of the space, all newer."""

    def __init__(self, parent: uuid.UUID, child: uuid.UUID, others: list[uuid.UUID]) -> None:
        self.parent = parent
        self.child = child
        self.others = others
        self.size = 0
        # (created_at offset, session, seq, content) of each record of the child's view.
        self.records: list[tuple[float, uuid.UUID, int, str]] = []

    def expected(self, word: str) -> list[tuple[str, int]]:
        """The view's hits of `word`, newest first (created_at, session, seq)."""
        hits = [(at, str(s), seq) for at, s, seq, text in self.records if word in text.split()]
        hits.sort(reverse=True)
        return [(s, seq) for _, s, seq in hits]


def _text(seq: int, *, rare: bool, dusk: bool) -> str:
    """Record `seq`'s content: "kettle" in every 7th, "oldword" when `rare`, "dusk" when
    `dusk`."""
    words = [f"record {seq}"]
    words += ["kettle"] * (seq % 7 == 0) + ["oldword"] * rare + ["dusk"] * dusk
    return " ".join(words)


async def _write(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    space: TestSpace,
    session: uuid.UUID,
    records: list[tuple[float, uuid.UUID, int, str]],
) -> None:
    contents = [text for _, _, _, text in records]
    times = [at for at, _, _, _ in records]
    await con.execute(INSERT, space.id, session, records[0][2], contents, times, BASE)
    await con.execute(LAST_SEQ, space.id, session, records[-1][2])


async def view_of(
    stub: Stub, make_session: MakeSession, pool: asyncpg.Pool, space: TestSpace
) -> View:
    parent = await make_session(label="parent")
    child = await make_session(parent=parent, label="child")
    others = [await make_session(label=f"other {k}") for k in range(9)]
    seen = View(parent, child, others)
    # "dusk" in every inherited record and in the child's own older than 500 s: the
    # child's newest records do not hold it, the parent's (all older) do.
    # Times in steps of 50 s: many records of each session, and of both, at one time
    # (the order then goes by session, then seq).
    inherited = [
        (at, parent, s, _text(s, rare=s == 2, dusk=True))
        for s in range(1, CUT + 1)
        for at in [float(s * 10 // 50 * 50)]
    ]
    # The child's own records interleave with the inherited ones in time, out of seq order.
    own = [
        (at, child, s, _text(s, rare=s == CUT + 10, dusk=at < 500))
        for s in range(CUT + 1, CUT + OWN + 1)
        for at in [float((s * 37) % OWN // 50 * 50)]
    ]
    # The parent goes on after the fork: not in the child's view.
    later = [
        (5000.0 + s, parent, s, _text(s, rare=True, dusk=True)) for s in range(CUT + 1, 2 * CUT + 1)
    ]
    async with pool.acquire() as con:
        await _write(con, space, parent, inherited)
    assert await inherit(stub, space, child, parent, until=CUT) == CUT
    async with pool.acquire() as con:
        await _write(con, space, child, own)
        await _write(con, space, parent, later)
    seen.records = inherited + own
    return seen


async def grow_elsewhere(pool: asyncpg.Pool, space: TestSpace, seen: View, size: int) -> None:
    """The other sessions to `size` records, and the parent's records after the fork to a
    tenth of that (newer than the view's: a read of its part passes them first)."""
    async with pool.acquire() as con:
        await con.execute(ELSEWHERE, space.id, seen.size, size, seen.others, BASE)
        await con.execute(LAST_SEQ_FROM_RECORDS, space.id, seen.others)
        first = 2 * CUT + seen.size // 10 + 1
        later = [
            (5000.0 + s, seen.parent, s, _text(s, rare=True, dusk=True))
            for s in range(first, 2 * CUT + size // 10 + 1)
        ]
        await _write(con, space, seen.parent, later)
        await con.execute("ANALYZE records")
    seen.size = size


@pytest.mark.plain_postgres(
    "counts the tuples read in the statistics of the database it connects to; on Citus "
    "the coordinator reads none, the workers' shards do"
)
async def test_a_session_s_page_reads_the_same_when_the_rest_of_the_space_grows_ten_times(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A NEWEST page of 20 in one session's view (two parts: 60 inherited records and 1,000
    of its own) reads the same tuples of `records` (heap and indexes) when the other
    sessions of the space hold 2,000 and 20,000 records, and its parent 260 and 2,060 (all
    newer than the view's, skipped inside the index) (285 and 2,857 matches of the common
    word elsewhere, 40 and 400 of the rare one): a common word's page the first probe's rows
    of each part (NEWEST_PROBE_FIRST per row of the page), not the view; a rare word's (2
    in the view) no more than the view's records, read a few times; the hits are the view's
    newest."""
    seen = await view_of(stub, make_session, pool, space)
    scope = {"session_id": str(seen.child)}
    counter = await asyncpg.connect(direct_database_url)
    common: list[int] = []
    heap: list[int] = []  # the common word's heap blocks
    rare: list[int] = []
    try:
        async with no_autovacuum_of_records(counter):
            for size in (2_000, 20_000):
                await grow_elsewhere(pool, space, seen, size)
                await page(stub, space, "kettle", **scope)  # the server's connections warmed
                read, reply = await records_read_by(
                    counter, page(stub, space, "kettle", page_size=20, **scope)
                )
                assert keys(reply) == seen.expected("kettle")[:20]
                common.append(read[0])
                heap.append(read[1])
                read, reply = await records_read_by(
                    counter, page(stub, space, "oldword", page_size=20, **scope)
                )
                assert keys(reply) == seen.expected("oldword")
                rare.append(read[0])
    finally:
        await counter.close()
    assert common[1] <= common[0] + 5, common
    # The parent's later records are skipped inside the index, never fetched (its pages
    # passed over are the cost of those records: they sort first in the part's order).
    assert heap[1] <= heap[0] + 2, heap
    assert rare[1] <= rare[0] + 5, rare
    # The first probe's rows of each of the view's two parts (index and heap), not the
    # view's 1,060 records.
    assert common[1] <= 2 * 2 * NEWEST_PROBE_FIRST * 21, common
    # Each of the view's rows at most twice (index and heap) in each of the statement's
    # reads: the probes and the read of the view.
    assert rare[1] <= 3 * 2 * (CUT + OWN), rare


@pytest.mark.parametrize(
    ("word", "order"), [("kettle", "newest"), ("dusk", "newest"), ("kettle", "relevance")]
)
async def test_a_session_s_pages_walk_its_view_s_hits_once_while_records_are_appended(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    word: str,
    order: str,
) -> None:
    """Pages of 25 of a common word in one session's view ("dusk": not in the child's newest
    records, in every older inherited one) are its view's hits in order
    (its own and its inherited records, their times out of seq order and many alike), each
    once, none of
    the parent's records after the fork nor the rest of the space's, while records saying
    it are appended to the child and the parent between pages (newer than the walk's
    position, or written after a RELEVANCE walk's first page: not in it)."""
    seen = await view_of(stub, make_session, pool, space)
    await grow_elsewhere(pool, space, seen, 2_000)
    fields: dict[str, Any] = {"session_id": str(seen.child)}
    if order == "relevance":
        fields["order"] = common_pb2.SEARCH_ORDER_RELEVANCE
    walked: list[tuple[str, int]] = []
    token = ""
    n = 0
    while True:
        reply = await page(stub, space, word, page_size=25, page_token=token, **fields)
        walked += keys(reply)
        token = reply.next_page_token
        if not token:
            break
        await append(stub, space, (seen.child, seen.parent)[n % 2], rec(f"a new {word} {n}"))
        n += 1
    expected = seen.expected(word)
    if order == "relevance":
        # Every hit ranks alike: (rank, key) order is the NEWEST order.
        assert sorted(walked) == sorted(expected)
    assert walked == expected, (len(walked), len(expected))
