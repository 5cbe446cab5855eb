"""What one BeginTurn, one ListRecords page and one TrimRecords of 20 records read at the
end of a chain of forks 1, 100 and 2,000 deep (DESIGN §4.4, issue #34): tuples of
`records` and `record_segments` counted in PostgreSQL's statistics (`RowReads`), not
time, in the state that once made the planner read a whole view (a table of many small
sessions, every page all-visible: migrations 0027, 0028), the trim under generic plans
(the release's per-row checks: migration 0029). The chain is built in process
with storage's own fork statement (`LineageRepository.inherit`, the compaction included)
and one record appended per level by SQL, so 2,000 levels take seconds, not RPCs."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service.records.lineage import SEGMENT_CAP
from tests.storage.records.test_lineage import end_turn, listed, trim
from tests.storage.turns.test_turn_window import begin
from tests.support.fixtures import MakeSession, TestSpace, database_fixtures
from tests.support.history import RowReads, append_one, fork_chain, small_sessions

pytestmark = [pytest.mark.sql, pytest.mark.slow]

# A database of this module's own: its VACUUMs and its counts read this test's rows, not
# every row the run wrote before it (after the gateway's history suite, CI's order, the
# same test took 278 s instead of 15: its VACUUMs went over millions of records).
_direct_database_url, _database_url, _settings, _pool, _keys = database_fixtures("module")

Stub = storage_pb2_grpc.SessionStorageStub

ALL_VISIBLE = "SELECT relallvisible = relpages FROM pg_class WHERE oid = 'records'::regclass"
_ALTER = "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I {}', current_database()); END $$"
GENERIC_PLANS = _ALTER.format("SET plan_cache_mode = force_generic_plan")
PLANS_AS_BEFORE = _ALTER.format("RESET plan_cache_mode")

SMALL = 30_000
"""Sessions of 3 records each beside the chains: as in a database that many tests or
tenants share, the statistics make every session look a few rows long, and the planner
weighs each probe's indexes as if any would read one row."""


async def chain(dsn: str, make_session: MakeSession, space: TestSpace, depth: int) -> uuid.UUID:
    """A root with 60 records, then `depth` forks of forks, each adding one record; the
    last one."""
    root = await make_session()
    con = await asyncpg.connect(dsn)
    try:
        for _ in range(60):
            await append_one(con, space.id, root)
        tip = await fork_chain(con, space.id, root, depth)
        await con.execute("VACUUM ANALYZE records, record_segments")
    finally:
        await con.close()
    return tip


async def all_visible(dsn: str) -> None:
    """Vacuum `records` until every page of it is all-visible, then analyze: the state in
    which the planner costs an Index Only Scan at no heap fetch at all, as after
    autovacuum in a quiet database. A view's probes by seq took `records_tokens` then
    (an Index Only Scan that read every row of every part, migration 0027). A vacuum
    right after the writes may leave a few pages to a later one."""
    con = await asyncpg.connect(dsn)
    try:
        for _ in range(50):
            await con.execute("VACUUM records")
            if await con.fetchval(ALL_VISIBLE):
                break
            await asyncio.sleep(0.1)
        await con.execute("ANALYZE records, record_segments")
    finally:
        await con.close()


@pytest.mark.plain_postgres(
    "counts the rows read in the statistics of the database it connects to; on Citus the "
    "coordinator reads none, the workers' shards do"
)
@pytest.mark.timeout(300)  # the chains: about 60 s on PostgreSQL 15 alone, 120 s under CI's load
async def test_a_turn_and_a_page_read_the_same_at_depth_1_100_and_2000(
    stub: Stub,
    space: TestSpace,
    other_space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    direct_database_url: str,
) -> None:
    async with pool.acquire() as con:
        await small_sessions(con, other_space.id, SMALL, 3)
    tips = {
        depth: await chain(direct_database_url, make_session, space, depth)
        for depth in (1, 100, 2_000)
    }
    await all_visible(direct_database_url)
    async with pool.acquire() as con:
        segments = await con.fetchval(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM record_segments WHERE space_id = $1"
            " GROUP BY session_id) c",
            space.id,
        )
    assert segments <= SEGMENT_CAP
    counter = await asyncpg.connect(direct_database_url)
    reads: dict[int, dict[str, int]] = {}
    try:
        for depth, tip in tips.items():
            counted = {}
            for table in ("records", "record_segments"):
                rows = RowReads(counter, table)
                before = await rows.count()
                turn = await end_turn(stub, space, await begin(stub, space, tip, window=400))
                counted[f"turn {table}"] = await rows.count() - before
                before = await rows.count()
                page = await listed(stub, space, tip, limit=50, newest_first=True)
                counted[f"page {table}"] = await rows.count() - before
                assert len(page) == 50 and page[-1].seq == 60 + depth
                assert turn.records[-1].seq == 60 + depth and len(turn.records) >= 10
            tables = {table: RowReads(counter, table) for table in ("records", "record_segments")}
            # The trim under generic plans, as a storage connection's statements (and the
            # release function's) turn after a few calls: the counts end every backend,
            # so the services' pools reconnect with the database's setting.
            await counter.execute(GENERIC_PLANS)
            before_trim = {table: await rows.count() for table, rows in tables.items()}
            assert await trim(stub, space, tip, keep=40 + depth) == 20  # the oldest 20
            for table, rows in tables.items():
                counted[f"trim {table}"] = await rows.count() - before_trim[table]
            await counter.execute(PLANS_AS_BEFORE)
            reads[depth] = counted
    finally:
        await counter.execute(PLANS_AS_BEFORE)
        await counter.close()
    # A statement over a view reads its segments (an index entry and a row each) and
    # probes at most SEGMENT_CAP + 1 parts; a BeginTurn runs at most five such statements
    # (first_after, reaching, the page, caller_before and its page), a TrimRecords two
    # (the cut and what it removes) and the release of the segments. Depth costs at most
    # that, never a row per level.
    bound = 5 * 2 * (SEGMENT_CAP + 1)
    for depth in (100, 2_000):
        for what, count in reads[depth].items():
            assert count <= reads[1][what] + bound, (depth, what, repr(reads))
    assert reads[100] == reads[2_000] or all(
        abs(reads[100][w] - reads[2_000][w]) <= bound for w in reads[100]
    ), reads
