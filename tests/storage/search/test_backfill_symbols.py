"""Migration 0043 starts the search backfill again: records written before it are found by
their emoji and symbols ("🚀", "€") once the job has reached them; labels (their index built
again) and metadata values (their rows written again) at once. The database is migrated
through 0042, where the old rows are written, then migrated on."""

from __future__ import annotations

import asyncpg
import pytest

from tests.storage.helpers import rec
from tests.storage.records.test_lineage import append
from tests.storage.search.test_backfill import (
    _storage_server,
    job,
    migrated,
    pass_of,
)
from tests.storage.search.test_search import found, marked, search, session_ids, tag
from tests.storage.search.test_search_tags import Stub
from tests.support.fixtures import MakeSession, TestSpace, database_fixtures
from tests.support.migrated import database_through

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres("migrates a database of its own from an older schema"),
]

BEFORE = "0042_search_accents"

_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]
__all__ = ["_storage_server"]  # the storage server whose own backfill waits an hour

_direct_database_url = database_through(BEFORE)  # the release before 0043


OLD = ("deploy 🚀 done", "plain words only", "costs 12€ a month")


async def test_old_records_are_found_by_their_symbols_once_the_job_reached_them(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Before the job, old records are not found by "🚀" or "€"; after it, they are, marked on
    the symbol, and the job rewrote only the rows whose vector changed."""
    sid = await make_session()
    await append(stub, space, sid, *(rec(content) for content in OLD))
    assert (await migrated(pool))[0] == "0043_search_symbols"
    for query in ("🚀", "€"):
        assert await search(stub, space, query) == [], query
    assert await job(pool, 10).run_once() == 2
    hits = await search(stub, space, "deploy 🚀")
    assert found(hits) == {(str(sid), 1)}
    assert marked(hits[0]) == ["deploy", "🚀"]
    assert found(await search(stub, space, "€")) == {(str(sid), 3)}
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (3, 2, True)


async def test_old_labels_and_values_are_found_once_migrated(
    space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, stub: Stub
) -> None:
    """A label and a metadata value written before 0043 are found by their symbols right
    after it, with no job: the label index is built again and the value's row is written
    again (its value unchanged)."""
    labelled = await make_session(label="Launch 🚀")
    valued = await make_session(label="other")
    await tag(pool, space.id, valued, rating="★★★")
    assert await session_ids(stub, space, "🚀") == []
    assert await session_ids(stub, space, "★") == []
    await migrated(pool)
    assert await session_ids(stub, space, "🚀") == [str(labelled)]
    assert await session_ids(stub, space, "★") == [str(valued)]
    value = await pool.fetchval(
        "SELECT value FROM session_metadata WHERE space_id = $1 AND session_id = $2",
        space.id,
        valued,
    )
    assert value == "★★★"
