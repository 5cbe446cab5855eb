"""The search backfill (migration 0035, storage_service/search/backfill.py): records written
before the migration are not found by their tag words until the job has reached them, then
are; a job stopped midway goes on from its saved cursor; a batch never touches another
space's rows. Each test has a database of its own, migrated through 0034, where it writes
the old rows (through AppendRecords, as the release before wrote them), then migrated on."""

from __future__ import annotations

import uuid
from typing import cast

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from stello.auth import KeyStore
from stello.db.migrate import migrate
from storage_service import create_app
from storage_service.config import StorageSettings
from storage_service.search.backfill import SearchBackfill
from storage_service.unit import Database
from tests.storage.conftest import StubFor
from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append, inherit, trim
from tests.storage.search.test_search import found, search
from tests.storage.search.test_search_tags import Stub
from tests.support.fixtures import (
    MakeSession,
    RunningServer,
    ServerStarter,
    TestSpace,
    database_fixtures,
    new_space,
)
from tests.support.migrated import database_through

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres("migrates a database of its own from an older schema"),
]

BEFORE = "0034_router_appends"

# Each test's database: `direct_database_url` below, the others on it (function scope).
_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]


_direct_database_url = database_through(BEFORE)  # the release before 0035


@pytest.fixture(name="storage_server")
async def _storage_server(start_server: ServerStarter) -> RunningServer:
    """The storage server, whose own backfill waits an hour (the tests drive a job)."""
    config = StorageSettings(search_backfill_interval_s=3600)
    return await start_server(lambda s, p, k: create_app(s, p, k, config))


OLD = (
    "<thinking>plan carefully</thinking>",
    "plain words only",
    '<div class="banner">hello</div>',
    "the pass\u200bword is long",
    "3 < 4 and 5 > 4",
)


async def write_old(stub: Stub, space: TestSpace, make_session: MakeSession) -> list[uuid.UUID]:
    """Three sessions holding OLD, written while the database lacks 0035."""
    sessions = [await make_session() for _ in range(3)]
    for sid in sessions:
        await append(stub, space, sid, *(rec(content) for content in OLD))
    return sessions


def job(pool: asyncpg.Pool, batch_rows: int) -> SearchBackfill:
    """A backfill of `batch_rows` records per batch, driven by the test."""
    return SearchBackfill(Database(pool), batch_rows, interval_s=3600)


async def migrated(pool: asyncpg.Pool) -> list[str]:
    """The migrations after BEFORE, applied on the test's database."""
    async with pool.acquire() as con:
        return await migrate(cast(asyncpg.Connection, con))


async def pass_of(pool: asyncpg.Pool, space_id: uuid.UUID) -> asyncpg.Record:
    """The space's row of `search_backfill`."""
    row = await pool.fetchrow(PASS, space_id)
    assert row is not None
    return row


PASS = """
SELECT after_session, after_seq, rows_read, rows_rewritten, finished_at IS NOT NULL AS finished
FROM search_backfill WHERE space_id = $1
"""


async def test_old_records_are_found_once_the_job_reached_them(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Before the job, old records are not found by their tag or marked words; after it,
    they are, and the job rewrote only the rows whose words changed."""
    sessions = await write_old(stub, space, make_session)
    assert (await migrated(pool))[0] == "0035_search_tags"
    for query in ("thinking", "banner", "password"):
        assert await search(stub, space, query) == [], query
    assert await job(pool, 4).run_once() == 9  # 3 rows of 5 in each session
    for query, seq in (("thinking", 1), ("banner", 3), ("password", 4)):
        assert found(await search(stub, space, query)) == {(str(s), seq) for s in sessions}
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (15, 9, True)
    assert await job(pool, 4).run_once() == 0  # nothing left: no space listed


async def test_a_new_job_goes_on_from_the_saved_cursor(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """A job stopped after one batch leaves its cursor; a new job (a restart) starts after
    it, never again from the first record."""
    sessions = sorted(await write_old(stub, space, make_session))
    await migrated(pool)
    first = await job(pool, 7).batch(space.id)
    assert first is not None and (first.read, first.finished) == (7, False)
    assert first.rewritten == 4  # rows 1, 3, 4 of the first session and 1 of the second
    row = await pass_of(pool, space.id)
    assert (row["after_session"], row["after_seq"], row["rows_read"]) == (sessions[1], 2, 7)
    again, registry = job(pool, 7), CollectorRegistry()
    again.metrics.register(registry)
    rest = await again.space(space.id)
    assert rest is not None and (rest.read, rest.rewritten, rest.finished) == (8, 5, True)
    assert registry.get_sample_value("stello_storage_search_backfill_rows_read_total") == 8
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (15, 9, True)
    assert found(await search(stub, space, "thinking")) == {(str(s), 1) for s in sessions}


async def test_a_batch_touches_its_own_space_only(
    stub_for: StubFor,
    stub: Stub,
    space: TestSpace,
    make_session: MakeSession,
    pool: asyncpg.Pool,
    keys: KeyStore,
) -> None:
    """A space's pass rewrites no row of another space: the other's records stay unfound
    until its own pass runs."""
    other = await new_space(keys)
    other_stub = stub_for(other.key)
    await write_old(stub, space, make_session)
    other_session = await make_session(space_id=other.id)
    await append(other_stub, other, other_session, rec("<thinking>theirs</thinking>"))
    await migrated(pool)
    done = await job(pool, 1000).space(space.id)
    assert done is not None and (done.read, done.finished) == (15, True)
    assert await search(other_stub, other, "thinking") == []
    assert (await pass_of(pool, other.id))["rows_read"] == 0
    await job(pool, 1000).space(other.id)
    assert found(await search(other_stub, other, "thinking")) == {(str(other_session), 1)}


async def test_rows_an_heir_takes_over_behind_the_cursor_are_found(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Rows a trim hands to an heir whose keys the pass went past are found by their tag
    words: the hand-over writes them anew (migration 0032's INSERT), with 0035's vector,
    so the pass need not come back for them."""
    source, heir = await make_session(), await make_session()
    await append(stub, space, source, *(rec(content) for content in OLD))
    await inherit(stub, space, heir, source)
    await migrated(pool)
    await pool.execute(PAST, space.id, max(source, heir))
    assert await search(stub, space, "thinking") == []  # the source's rows: the old vector
    assert await trim(stub, space, source, keep=0) == len(OLD)
    assert found(await search(stub, space, "thinking")) == {(str(heir), 1)}
    assert found(await search(stub, space, "password")) == {(str(heir), 4)}


# The space's pass placed after every key of the session $2 (as if it went past it).
PAST = """
UPDATE search_backfill SET after_session = $2, after_seq = 9223372036854775807
WHERE space_id = $1
"""
