"""A SearchRecords page costs what the page holds, not what the word's matches are
(the index `records_newest`).

A NEWEST page read every match through `records_search` and sorted them (a word in 1 record
of 7 over 20,000 records: 2,857 matches read for a page of 20); it now reads the space's
records newest first and checks the word on each, stopping at the page, the same in a space
ten times larger. A word whose matches are all old is served by the GIN plan after a
bounded probe, never by a read of the whole space. RELEVANCE ranks the newest
RELEVANCE_CANDIDATES matches at the walk's start, not every match. Tuples read are counted
in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.search.repository import (
    NEWEST_PROBE_FIRST,
    NEWEST_PROBE_ROWS,
    RELEVANCE_CANDIDATES,
)
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import no_autovacuum_of_records, records_read_by
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
RELEVANCE = common_pb2.SEARCH_ORDER_RELEVANCE
BASE = datetime(2026, 1, 1, tzinfo=UTC)
SESSIONS = 10
EVERY = 7  # "kettle" in record i when i % EVERY == 0
OLD = 30  # "oldword" in the OLD oldest records

# Records first..last-1 of space $1: record i is session $4[i % 10]'s seq i / 10 + 1,
# created i seconds after BASE ($5); "kettle" in every 7th, "oldword" in the 30 oldest.
SEED = """
INSERT INTO records (space_id, session_id, seq, role, content, created_at,
                     token_estimate, token_cumulative)
SELECT $1, ($4::uuid[])[i % 10 + 1], i / 10 + 1, 'user',
       'record number ' || i || CASE WHEN i % 7 = 0 THEN ' kettle' ELSE '' END
         || CASE WHEN i < 30 THEN ' oldword' ELSE '' END,
       $5::timestamptz + i * interval '1 second', 1, i / 10 + 1
FROM generate_series($2::int, $3::int - 1) AS i
"""
LAST_SEQ = """
UPDATE sessions SET last_seq = (SELECT max(seq) FROM records r
                                WHERE r.space_id = $1 AND r.session_id = sessions.id)
WHERE space_id = $1 AND id = ANY ($2::uuid[])
"""


class Space:
    """Ten sessions: a root with four children (the third hidden, as DeleteSubtree's hiding
    transaction leaves it) and five lone roots; record i is session i % 10's."""

    def __init__(self, sessions: list[uuid.UUID], hidden: uuid.UUID) -> None:
        self.sessions = sessions
        self.hidden = hidden
        self.size = 0

    def expected(self, word: str, *, tree: bool = False) -> list[tuple[str, int]]:
        """The hits of `word`, newest first, in the whole space or in the root's tree."""
        hits = []
        for i in reversed(range(self.size)):
            session = self.sessions[i % SESSIONS]
            if session == self.hidden or (tree and i % SESSIONS >= 5):
                continue
            if (word == "kettle" and i % EVERY == 0) or (word == "oldword" and i < OLD):
                hits.append((str(session), i // SESSIONS + 1))
        return hits


async def space_of(make_session: MakeSession, pool: asyncpg.Pool, space: TestSpace) -> Space:
    root = await make_session(label="root")
    kids = [await make_session(parent=root, label=f"kid {k}") for k in range(4)]
    lone = [await make_session(label=f"lone {k}") for k in range(5)]
    async with pool.acquire() as con:
        await con.execute(
            "UPDATE sessions SET provisional_until = 'infinity' WHERE space_id = $1 AND id = $2",
            space.id,
            kids[2],
        )
    return Space([root, *kids, *lone], kids[2])


async def grow(pool: asyncpg.Pool, space: TestSpace, seeded: Space, size: int) -> None:
    async with pool.acquire() as con:
        await con.execute(SEED, space.id, seeded.size, size, seeded.sessions, BASE)
        await con.execute(LAST_SEQ, space.id, seeded.sessions)
        await con.execute("ANALYZE records")
    seeded.size = size


async def page(stub: Stub, space: TestSpace, query: str, **fields: Any) -> Any:
    return await stub.SearchRecords(
        storage_pb2.SearchRecordsRequest(space_id=space.sid, query=query, **fields)
    )


def keys(reply: Any) -> list[tuple[str, int]]:
    return [(h.session_id, h.seq) for h in reply.hits]


@pytest.mark.plain_postgres(
    "counts the tuples read in the statistics of the database it connects to; on Citus "
    "the coordinator reads none, the workers' shards do"
)
async def test_a_common_word_s_page_reads_the_same_in_a_space_ten_times_larger(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A NEWEST page of 20 of a word in 1 record of 7 reads the same tuples of `records`
    (heap and indexes) over 2,000 and over 20,000 records (285 and 2,857 matches), fewer
    than its matches, and its second page about as many; the hits are the newest visible ones. A
    word in the 30 oldest records is found by a bounded probe and the GIN plan, never a read
    of the space."""
    seeded = await space_of(make_session, pool, space)
    counter = await asyncpg.connect(direct_database_url)
    reads: list[int] = []
    try:
        async with no_autovacuum_of_records(counter):
            for size in (2_000, 20_000):
                await grow(pool, space, seeded, size)
                await page(stub, space, "kettle")  # the server's connections warmed
                read, reply = await records_read_by(
                    counter, page(stub, space, "kettle", page_size=20)
                )
                assert keys(reply) == seeded.expected("kettle")[:20]
                reads.append(read[0])
            # A later page starts at its position in the index: about what the first read.
            token = reply.next_page_token
            read, reply = await records_read_by(
                counter, page(stub, space, "kettle", page_size=20, page_token=token)
            )
            assert keys(reply) == seeded.expected("kettle")[20:40]
            reads.append(read[0])
            read, reply = await records_read_by(counter, page(stub, space, "oldword", page_size=20))
            old = read[0]
    finally:
        await counter.close()
    assert keys(reply) == seeded.expected("oldword")[:20]
    small, large, later = reads
    assert large <= small + 5, reads
    # Its rows hold the word as often as the first page's (within a few); a scan from the
    # newest, filtering the first page's rows out, would read about twice as many.
    assert later < large * 3 // 2, reads
    assert large < len(seeded.expected("kettle")), reads
    # The probes' rows (heap and index) and the GIN plan's matches (index, heap, record).
    assert old <= 2 * (NEWEST_PROBE_FIRST + NEWEST_PROBE_ROWS) * 21 + 4 * OLD, old


@pytest.mark.parametrize("scope", ["space", "tree"])
async def test_newest_pages_walk_the_hits_once_while_records_are_appended(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, scope: str
) -> None:
    """Five pages of 50 of a common word, in the space and in a root's tree, are the
    newest visible hits in order, each once, while newer records saying it are appended
    between pages (newer than the walk's position: not in it)."""
    seeded = await space_of(make_session, pool, space)
    await grow(pool, space, seeded, 5_000)
    tree = {"root_id": str(seeded.sessions[0])} if scope == "tree" else {}
    seen: list[tuple[str, int]] = []
    token = ""
    for n in range(5):
        reply = await page(stub, space, "kettle", page_size=50, page_token=token, **tree)
        seen += keys(reply)
        token = reply.next_page_token
        assert token
        await append(stub, space, seeded.sessions[n % 2], rec(f"a new kettle {n}"))
    assert seen == seeded.expected("kettle", tree=scope == "tree")[:250]


async def test_relevance_ranks_the_newest_matches_of_the_walk_s_start(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """RELEVANCE ranks the RELEVANCE_CANDIDATES newest matches: an older record is not
    among them however well it ranks, and a walk sees each candidate once, best first,
    while records that would rank first are appended between its pages (written after its
    first page: not in the walk)."""
    sid = await make_session()
    count = RELEVANCE_CANDIDATES + 100
    async with pool.acquire() as con:
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content, created_at,"
            " token_estimate, token_cumulative)"
            " SELECT $1, $2, i, 'user', CASE WHEN i = 1 THEN 'teapot teapot teapot teapot'"
            "   WHEN i % 3 = 0 THEN 'teapot teapot and ' || i ELSE 'a teapot of ' || i END,"
            "   $4::timestamptz + i * interval '1 second', 1, i"
            " FROM generate_series(1, $3::int) AS i",
            space.id,
            sid,
            count,
            datetime.now(UTC) - timedelta(days=1),
        )
        await con.execute(
            "UPDATE sessions SET last_seq = $3 WHERE space_id = $1 AND id = $2",
            space.id,
            sid,
            count,
        )
    seen: list[tuple[int, float]] = []
    token = ""
    while True:
        reply = await page(stub, space, "teapot", page_size=100, page_token=token, order=RELEVANCE)
        seen += [(h.seq, h.rank) for h in reply.hits]
        token = reply.next_page_token
        if not token:
            break
        await append(stub, space, sid, rec("teapot teapot teapot teapot teapot"))
    seqs = [seq for seq, _ in seen]
    assert sorted(seqs) == list(range(count - RELEVANCE_CANDIDATES + 1, count + 1))
    assert [rank for _, rank in seen] == sorted((rank for _, rank in seen), reverse=True)
    assert seqs[0] % 3 == 0  # the best ranked of the candidates first
