"""Migration 0049 starts the search backfill again: records written before it are found
without their tatweel ("كتب" finds "كـتـب") and by the plain spelling of their Quranic words
("فيه" finds "فِيهِۦ") once the job has reached them; labels (their index built again) and
metadata values (their rows written again) at once. The database is migrated through 0048,
where the old rows are written, then migrated on."""

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

BEFORE = "0048_search_yo_and_vowel_marks"

_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]
__all__ = ["_storage_server"]  # the storage server whose own backfill waits an hour

_direct_database_url = database_through(BEFORE)  # the release before 0049


OLD = ("كـتـب الولد", "plain words only", "فِيهِۦ هُدًۭى", "كَتَبَ الوَلَدُ")


async def test_old_records_are_found_without_tatweel_and_marks_once_the_job_reached_them(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Before the job, an old record is not found by the plain word of its stretched or
    Quranic spelling; after it, it is, marked on the word as written, and the job rewrote
    only the rows whose vector changed (not the harakat alone, which 0048 read already)."""
    sid = await make_session()
    await append(stub, space, sid, *(rec(content) for content in OLD))
    assert (await migrated(pool))[0] == "0049_search_tatweel_and_quranic_marks"
    assert found(await search(stub, space, "كتب")) == {(str(sid), 4)}
    assert await search(stub, space, "فيه") == []
    assert await job(pool, 10).run_once() == 2
    hits = {hit.seq: hit for hit in await search(stub, space, "كتب")}
    assert set(hits) == {1, 4}
    assert marked(hits[1]) == ["كـتـب"]
    hits = {hit.seq: hit for hit in await search(stub, space, "فيه")}
    assert set(hits) == {3}
    assert marked(hits[3]) == ["فِيهِۦ"]
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (4, 2, True)


async def test_old_labels_and_values_are_found_once_migrated(
    space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, stub: Stub
) -> None:
    """A label and a metadata value written before 0049 are found by their plain spelling
    right after it, with no job: the label index is built again and the value's row is
    written again (its value unchanged)."""
    labelled = await make_session(label="مـكـتـبـة المدينة")
    valued = await make_session(label="other")
    await tag(pool, space.id, valued, city="القـاهـرة")
    for query in ("مكتبة", "القاهرة"):
        assert await session_ids(stub, space, query) == [], query
    await migrated(pool)
    assert await session_ids(stub, space, "مكتبة") == [str(labelled)]
    assert await session_ids(stub, space, "القاهرة") == [str(valued)]
    value = await pool.fetchval(
        "SELECT value FROM session_metadata WHERE space_id = $1 AND session_id = $2",
        space.id,
        valued,
    )
    assert value == "القـاهـرة"
