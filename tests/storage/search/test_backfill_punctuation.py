"""Migration 0038 starts the search backfill again: records written before it (in a space
whose 0035 pass had finished, or that 0035 never listed) are found by the words of
"JIRA-4411" or "example.com" once the job has reached them. The database is migrated
through 0037, where the old rows are written, then migrated on."""

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
from tests.storage.search.test_search import found, search
from tests.storage.search.test_search_tags import Stub
from tests.support.fixtures import MakeSession, TestSpace, database_fixtures
from tests.support.migrated import database_through

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres("migrates a database of its own from an older schema"),
]

BEFORE = "0037_interrupted_tokens"

_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]
__all__ = ["_storage_server"]  # the storage server whose own backfill waits an hour

_direct_database_url = database_through(BEFORE)  # the release before 0038


OLD = ("login fails since JIRA-4411 was merged", "plain words only", "see example.com now")


async def test_old_records_are_found_by_their_words_once_the_job_reached_them(
    stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Before the job, old records are not found by "4411" or "example.com"; after it,
    they are, and the job rewrote only the rows whose words changed."""
    sid = await make_session()
    await append(stub, space, sid, *(rec(content) for content in OLD))
    assert (await migrated(pool))[0] == "0038_search_punctuation"
    for query in ("4411", "example.com"):
        assert await search(stub, space, query) == [], query
    assert await job(pool, 10).run_once() == 2
    assert found(await search(stub, space, "4411")) == {(str(sid), 1)}
    assert found(await search(stub, space, "example.com")) == {(str(sid), 3)}
    row = await pass_of(pool, space.id)
    assert (row["rows_read"], row["rows_rewritten"], row["finished"]) == (3, 2, True)
