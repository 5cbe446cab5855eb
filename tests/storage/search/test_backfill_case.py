"""Migration 0045 starts the search backfill again: records written before it are found by a
word typed in another case, or ending with the final sigma ("οδος" finds "οδος", whose old
vector read 'οδος' where the query now reads 'οδοσ'), and by their symbols ("🚀" is now
the long s and 'ym1f680', the old vector's 'sym1f680'), once the job has reached them; labels
(their index built again) and metadata values (their rows written again) at once. The database
is migrated through 0044, where the old rows are written, then migrated on."""

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

BEFORE = "0044_search_text_pieces"

_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]
__all__ = ["_storage_server"]  # the storage server whose own backfill waits an hour

_direct_database_url = database_through(BEFORE)  # the release before 0045


OLD = ("αθηνα και οδος", "plain words only", "deploy 🚀 done")


async def test_old_records_are_found_in_any_case_once_the_job_reached_them(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Before the job, an old record is not found by its own word ending with the final
    sigma, nor by its symbol; after it, it is, in any case, and the job rewrote only the rows
    whose vector changed."""
    sid = await make_session()
    await append(stub, space, sid, *(rec(content) for content in OLD))
    assert (await migrated(pool))[0] == "0045_search_case_and_terms"
    assert await search(stub, space, "οδος") == []
    assert await search(stub, space, "🚀") == []
    assert await job(pool, 10).run_once() == 2
    hits = await search(stub, space, "ΟΔΟΣ")
    assert found(hits) == {(str(sid), 1)}
    assert marked(hits[0]) == ["οδος"]
    assert found(await search(stub, space, "🚀")) == {(str(sid), 3)}
    assert await search(stub, space, "sym1f680") == []
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (3, 2, True)


async def test_old_labels_and_values_are_found_once_migrated(
    space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool, stub: Stub
) -> None:
    """A label and a metadata value written before 0045 are found by a word typed in another
    case, and by their symbols, right after it, with no job: the label index is built again
    and the value's row is written again (its value unchanged)."""
    labelled = await make_session(label="οδος αθηνας 🚀")
    valued = await make_session(label="other")
    await tag(pool, space.id, valued, street="Οδος Ερμου ★")
    for query in ("ΑΘΗΝΑΣ", "ερμου οδος", "🚀", "★"):
        assert await session_ids(stub, space, query) == [], query
    await migrated(pool)
    assert await session_ids(stub, space, "ΑΘΗΝΑΣ 🚀") == [str(labelled)]
    assert await session_ids(stub, space, "ερμου οδος ★") == [str(valued)]
    value = await pool.fetchval(
        "SELECT value FROM session_metadata WHERE space_id = $1 AND session_id = $2",
        space.id,
        valued,
    )
    assert value == "Οδος Ερμου ★"
