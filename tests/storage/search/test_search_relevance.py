"""A RELEVANCE page of SearchRecords reads what its candidates need, not every match.

RELEVANCE ranks the RELEVANCE_CANDIDATES newest visible matches of its scope written up to
the walk's horizon. They were found by reading every match of the word from the GIN and
sorting them by their keys (a word in 1 record of 3 over 50,000 records: 16,667 matches
for a page of 20); they are now found as NEWEST finds a page: the scope's records newest
first with the word checked on each (a session's view part by part), a bounded number of
them, and the GIN only for a word those probes (or, before them, a sample of the space's
newest records and a bounded count of its matches) found rare. The ranked set is the same:
walks are compared with the plain answer (the newest visible matches by SQL, ranked).
Tuples read are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from stello.common.v1 import common_pb2
from storage_service.records.lineage import PARTS
from storage_service.search import repository
from storage_service.search.repository import NEWEST_PROBE_FIRST, RELEVANCE_CANDIDATES
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_search import no_autovacuum_of_records, records_read_by
from tests.storage.search.test_search_newest import (
    BASE,
    LAST_SEQ,
    Space,
    Stub,
    keys,
    page,
    space_of,
)
from tests.storage.search.test_search_view import View, grow_elsewhere, view_of
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

COUNTS_TUPLES = pytest.mark.plain_postgres(
    "counts the tuples read in the statistics of the database it connects to; on Citus "
    "the coordinator reads none, the workers' shards do"
)

RELEVANCE = common_pb2.SEARCH_ORDER_RELEVANCE
OLD = 1_200  # "oldword" in the OLD oldest records
EBB = 6_000  # "ebb" in every one of the EBB oldest records

# Records first..last-1 of space $1: record i is session $4[i % 10]'s seq i / 10 + 1,
# created i seconds after BASE ($5); "dusk" in 1 of 3 (once, twice or three times: ranks
# differ), "kettle" in 1 of 37, "zanzibar" in 1 of 1,009, "oldword" in the OLD oldest,
# "ebb" in 1 of 50 and in every record of the EBB oldest, "wren" in 1 of 150.
SEED = """
INSERT INTO records (space_id, session_id, seq, role, content, created_at,
                     token_estimate, token_cumulative)
SELECT $1, ($4::uuid[])[i % 10 + 1], i / 10 + 1, 'user',
       'record number ' || i
         || CASE WHEN i % 3 = 0 THEN repeat(' dusk', i % 4 + 1) ELSE '' END
         || CASE WHEN i % 37 = 0 THEN ' kettle' ELSE '' END
         || CASE WHEN i % 1009 = 0 THEN ' zanzibar' ELSE '' END
         || CASE WHEN i < $6 THEN ' oldword' ELSE '' END
         || CASE WHEN i % 50 = 0 OR i < $7 THEN ' ebb' ELSE '' END
         || CASE WHEN i % 150 = 0 THEN ' wren' ELSE '' END,
       $5::timestamptz + i * interval '1 second', 1, i / 10 + 1
FROM generate_series($2::int, $3::int - 1) AS i
"""

# The plain answer: the $4 newest visible matches of word $2 in space $1 (in root $3's
# tree, or the whole space when NULL), with their ranks.
_NEWEST_MATCHES = """
SELECT r.created_at, r.session_id, r.seq, ts_rank(r.search_vector, q) AS rank
FROM to_tsquery('english'::regconfig, $2) q, records r
JOIN sessions s ON s.space_id = $1 AND s.id = r.session_id
WHERE r.space_id = $1 AND r.search_vector @@ q
  AND s.provisional_until IS NULL AND ($3::uuid IS NULL OR s.root_id = $3)
ORDER BY r.created_at DESC, r.session_id DESC, r.seq DESC
LIMIT $4
"""
# The same in session $2's view (its parts whose holder is visible), word $3.
_VIEW_NEWEST_MATCHES = f"""
WITH {PARTS.strip()}
SELECT r.created_at, r.session_id, r.seq, ts_rank(r.search_vector, q) AS rank
FROM to_tsquery('english'::regconfig, $3) q, parts p
JOIN sessions s ON s.space_id = $1 AND s.id = p.holder_id AND s.provisional_until IS NULL
JOIN records r ON r.space_id = $1 AND r.session_id = p.holder_id
              AND r.seq BETWEEN p.from_seq AND p.to_seq
WHERE r.search_vector @@ q
ORDER BY r.created_at DESC, r.session_id DESC, r.seq DESC
LIMIT $4
"""


async def seeded(pool: asyncpg.Pool, space: TestSpace, seen: Space, size: int) -> None:
    """The space grown to `size` records of SEED."""
    async with pool.acquire() as con:
        await con.execute(SEED, space.id, seen.size, size, seen.sessions, BASE, OLD, EBB)
        await con.execute(LAST_SEQ, space.id, seen.sessions)
        await con.execute("ANALYZE records")
    seen.size = size


async def ranked(
    pool: asyncpg.Pool,
    space: TestSpace,
    word: str,
    *,
    root: uuid.UUID | None = None,
    session: uuid.UUID | None = None,
) -> list[tuple[str, int]]:
    """The plain answer: the RELEVANCE_CANDIDATES (as the server reads it now) newest
    visible matches of `word` in the scope, best ranked first, then newest."""
    candidates = repository.RELEVANCE_CANDIDATES
    query = word
    async with pool.acquire() as con:
        if session is not None:
            rows = await con.fetch(_VIEW_NEWEST_MATCHES, space.id, session, query, candidates)
        else:
            rows = await con.fetch(_NEWEST_MATCHES, space.id, query, root, candidates)
    order: list[tuple[float, datetime, uuid.UUID, int]] = [
        (r["rank"], r["created_at"], r["session_id"], r["seq"]) for r in rows
    ]
    order.sort(reverse=True)
    return [(str(s), seq) for _, _, s, seq in order]


async def walk(
    stub: Stub, space: TestSpace, word: str, writer: uuid.UUID, size: int, **scope: Any
) -> list[tuple[str, int]]:
    """A RELEVANCE walk of `word` in pages of `size`, a record that would rank first appended
    to `writer` between pages (written after the walk's first page: not in it)."""
    seen: list[tuple[str, int]] = []
    token = ""
    n = 0
    while True:
        reply = await page(
            stub, space, word, page_size=size, page_token=token, order=RELEVANCE, **scope
        )
        seen += keys(reply)
        token = reply.next_page_token
        if not token:
            return seen
        await append(stub, space, writer, rec(f"{word} {word} {word} {word} {word} {n}"))
        n += 1


@COUNTS_TUPLES
async def test_a_common_word_s_relevance_page_reads_the_same_in_a_space_ten_times_larger(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A RELEVANCE page of 20 of a word in 1 record of 3 (3 of 10 in visible sessions)
    reads the same tuples of `records` (heap and indexes) over 5,000 and over 50,000
    records (1,667 and 16,667 matches): the space's newest records until it has its
    RELEVANCE_CANDIDATES (about 3,333 records), not every match; its second page too. The
    hits are the plain answer's."""
    seen = await space_of(make_session, pool, space)
    counter = await asyncpg.connect(direct_database_url)
    reads: list[int] = []
    try:
        async with no_autovacuum_of_records(counter):
            for size in (5_000, 50_000):
                await seeded(pool, space, seen, size)
                expected = await ranked(pool, space, "dusk")
                await page(stub, space, "dusk", order=RELEVANCE)  # connections warmed
                read, reply = await records_read_by(
                    counter, page(stub, space, "dusk", page_size=20, order=RELEVANCE)
                )
                assert keys(reply) == expected[:20]
                reads.append(read[0])
            token = reply.next_page_token
            second = page(stub, space, "dusk", page_size=20, page_token=token, order=RELEVANCE)
            read, reply = await records_read_by(counter, second)
            assert keys(reply) == expected[20:40]
            reads.append(read[0])
    finally:
        await counter.close()
    small, large, later = reads
    assert large <= small + 5, reads
    assert later <= small + 5, reads
    # Each record read until the candidates are found (index and heap), then the page's
    # records; never the 16,667 matches.
    assert large <= 2 * (RELEVANCE_CANDIDATES * 10 // 3 + 100) + 2 * 21, reads


@COUNTS_TUPLES
async def test_a_session_s_relevance_page_reads_the_same_when_the_rest_of_the_space_grows(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A RELEVANCE page of 20 in one session's view (60 inherited records and 1,000 of its
    own) reads the same tuples of `records` when the other sessions of the space hold 2,000
    and 20,000 records (285 and 2,857 matches of the word elsewhere): the view's records,
    part by part, never the space's matches; the hits are the plain answer's."""
    seen = await view_of(stub, make_session, pool, space)
    scope = {"session_id": str(seen.child)}
    counter = await asyncpg.connect(direct_database_url)
    reads: list[int] = []
    try:
        async with no_autovacuum_of_records(counter):
            for size in (2_000, 20_000):
                await grow_elsewhere(pool, space, seen, size)
                expected = await ranked(pool, space, "kettle", session=seen.child)
                await page(stub, space, "kettle", order=RELEVANCE, **scope)  # warmed
                read, reply = await records_read_by(
                    counter, page(stub, space, "kettle", page_size=20, order=RELEVANCE, **scope)
                )
                assert keys(reply) == expected[:20]
                reads.append(read[0])
    finally:
        await counter.close()
    assert reads[1] <= reads[0] + 5, reads
    # The view's 1,060 records (index and heap) and the page's records, read once.
    assert reads[1] <= 2 * (60 + 1_000) + 2 * 21, reads


SPACE_WORDS = ["dusk", "kettle", "ebb", "zanzibar", "oldword", "nowhere"]


@pytest.mark.parametrize("scope", ["space", "tree"])
@pytest.mark.parametrize("word", SPACE_WORDS)
async def test_relevance_walks_rank_the_plain_answer_s_candidates(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    scope: str,
    word: str,
) -> None:
    """With 100 candidates (probes of 1,000 and 20,000 records) over 10,000 records, a
    RELEVANCE walk in pages of 9 is the plain answer (the newest visible matches of the
    scope, ranked), each once, whatever the word: in 1 of 3 records (the first probe),
    in 1 of 37 (its 271 matches counted against a twentieth of the records the second
    probe would read, RELEVANCE_GIN_MATCH_COST: more than the space's ~200, the second
    probe; fewer than the tree's ~500, the GIN), in 1 of 50 of the newest and in the 6,000
    oldest (the second probe: the GIN holds more), in 10 (the GIN), in the 1,200 oldest
    (the GIN: the probes find none), in none; in the space and in a root's tree (a hidden
    child's records left out), while records that would rank first are appended between
    its pages. No word is counted before the first probe: the space's sessions hold more
    records than it reads (RELEVANCE_SAMPLE)."""
    monkeypatch.setattr(repository, "RELEVANCE_CANDIDATES", 100)
    seen = await space_of(make_session, pool, space)
    await seeded(pool, space, seen, 10_000)
    root = seen.sessions[0] if scope == "tree" else None
    expected = await ranked(pool, space, word, root=root)
    fields = {"root_id": str(root)} if root else {}
    assert await walk(stub, space, word, seen.sessions[0], 9, **fields) == expected
    if scope == "space":
        assert len(expected) == {"zanzibar": 9, "nowhere": 0}.get(word, 100)


async def test_a_rare_word_s_relevance_walk_in_a_small_space_is_the_gin_s_plain_answer(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
) -> None:
    """A RELEVANCE walk in pages of 3 of a word in 1 record of 150 over 3,000 records (in
    none of the sample of the space's newest, in a space whose sessions hold fewer records
    than the first probe reads, and fewer matches than a twentieth of them: the GIN serves
    every page, no probe) is the plain answer, each once, while records that would rank
    first are appended between its pages."""
    seen = await space_of(make_session, pool, space)
    await seeded(pool, space, seen, 3_000)
    expected = await ranked(pool, space, "wren")
    assert len(expected) == 20  # records 0, 150, .. 2,850: all the root's
    assert await walk(stub, space, "wren", seen.sessions[0], 3) == expected


@pytest.mark.parametrize("word", ["kettle", "dusk", "oldword"])
async def test_a_session_s_relevance_walks_rank_the_plain_answer_s_candidates(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    word: str,
) -> None:
    """With 20 candidates (probes of 200 and 4,000 records per part of the view), a
    RELEVANCE walk in one session's view (two parts, their times interleaved) in pages of 3
    is the plain answer, each once: a word in 1 of 7 of the view's records, one in the
    inherited records and the child's older half, one in 2 of them; never the parent's
    records after the fork nor the rest of the space's."""
    candidates = 20
    monkeypatch.setattr(repository, "RELEVANCE_CANDIDATES", candidates)
    seen: View = await view_of(stub, make_session, pool, space)
    await grow_elsewhere(pool, space, seen, 2_000)
    expected = await ranked(pool, space, word, session=seen.child)
    walked = await walk(stub, space, word, seen.child, 3, session_id=str(seen.child))
    assert walked == expected
    assert len(expected) == min(candidates, len(seen.expected(word)))
    assert NEWEST_PROBE_FIRST * candidates < 1_000  # the child's own part is not read whole


async def first_page_read(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
    records: int,
    word: str,
) -> tuple[tuple[int, int, int], list[tuple[str, int]], list[tuple[str, int]]]:
    """In a space seeded with `records` (`seeded`), what a RELEVANCE page of 20 of `word`
    read of `records` (`records_read_by`, its connections warmed first), the page's hits
    and the plain answer's."""
    seen = await space_of(make_session, pool, space)
    counter = await asyncpg.connect(direct_database_url)
    try:
        async with no_autovacuum_of_records(counter):
            await seeded(pool, space, seen, records)
            expected = await ranked(pool, space, word)
            await page(stub, space, "dusk", order=RELEVANCE)  # connections warmed
            read, reply = await records_read_by(
                counter, page(stub, space, word, page_size=20, order=RELEVANCE)
            )
    finally:
        await counter.close()
    return read, keys(reply), expected


@COUNTS_TUPLES
async def test_a_mid_frequency_word_s_relevance_page_reads_its_matches_not_the_space(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 100 candidates, a RELEVANCE page of 20 of a word in 1 record of 150 over 10,000
    records (67 matches, fewer than the candidates): the first probe (the 1,000 newest
    records) finds it common enough for a second one, which would read the whole space to
    find them all; the GIN holds fewer matches than a twentieth of what that probe would
    read (about 15,000 at the share the first probe saw; RELEVANCE_GIN_MATCH_COST: counted
    first, at most that many), so they are read from it. The tuples read from `records`
    (heap and indexes) are the first probe's and a small multiple of the matches, not the
    space's 10,000 records; the hits are the plain answer's."""
    monkeypatch.setattr(repository, "RELEVANCE_CANDIDATES", 100)
    read, hits, expected = await first_page_read(
        stub, space, make_session, pool, direct_database_url, 10_000, "wren"
    )
    assert hits == expected[:20]
    matches = 10_000 // 150 + 1
    # The first probe's 1,000 records (index and heap, read, then counted to tell whether
    # they were all of the space's), then the matches counted and read through the GIN
    # (index and heap, twice: within 6 tuples a match), and the page's records; never the
    # space's other 9,000 records (the second probe read the whole space).
    first_probe = 4 * NEWEST_PROBE_FIRST * 100
    assert read[0] <= first_probe + 6 * matches + 2 * 21, read[0]


@COUNTS_TUPLES
async def test_a_small_space_s_relevance_page_reads_its_matches_not_the_space(
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    """A RELEVANCE page of 20 of a word in 1 record of 37 in a space of 5,000 records (136
    matches, far fewer than the RELEVANCE_CANDIDATES; the first probe would read the whole
    space to find them all) reads from `records` (heap and indexes) a small sample of the
    space's newest records, then (its sessions holding fewer records than the first probe
    reads) its matches, counted, then read through the GIN, and the page's records: about
    its matches, not the space's 5,000 records; the hits are the plain answer's."""
    read, hits, expected = await first_page_read(
        stub, space, make_session, pool, direct_database_url, 5_000, "kettle"
    )
    assert hits == expected[:20]
    matches = 5_000 // 37 + 1
    # The sample (index and heap), each match counted then read through the GIN (index
    # and heap, twice, and its vector by its row: within 6 tuples a match), and the page's
    # records; never the space's other records.
    sample = 2 * RELEVANCE_CANDIDATES // NEWEST_PROBE_FIRST
    assert read[0] <= sample + 6 * matches + 2 * 21, read[0]
