"""The newest complete summary is read by its key, not past every catch-up summary after it.

A catch-up summary (`lossy`) stands until a background fold replaces it by a complete one
at the same seq; while folds do not run (none configured, or failing), every catch-up adds
one. GetCompressionCache's `complete_only` and GetSession's `progress` (its `complete_seq`)
walked the session's summaries from the newest down to the first complete one: 402 and 203
tuples of `compression_caches` read behind 200 catch-up summaries, 4,002 and 2,003 behind
2,000. Both now probe `compression_caches_complete` (migration 0047): 2 and 4 behind 2,000
(201 and 203 behind 200, where the statistics make a walk of so small a table as cheap).
Tuples read are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.support.fresh import LONE_ROOTS, FreshDatabase

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "counts the tuples read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    ),
]

# Catch-up summaries of session $2 at seqs $3 + 1 .. $3 + $4.
LOSSY = """
INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq, lossy)
SELECT $1, $2, 'catch-up ' || i, $3 + i, true FROM generate_series(1, $4) i
"""
COMPLETE = """
INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq, lossy)
VALUES ($1, $2, 'complete', 1, false)
"""
# The session's last seq past its summaries (a summary covers records it has).
LAST_SEQ = "UPDATE sessions SET last_seq = 100000 WHERE space_id = $1 AND id = $2"


async def test_the_complete_summary_reads_the_same_behind_200_or_2000_catch_ups(
    fresh: FreshDatabase,
) -> None:
    """Behind 2,000 catch-up summaries GetCompressionCache(complete_only) and
    GetSession(progress) read a few tuples of `compression_caches`, no more than behind
    200."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        session: uuid.UUID = (await con.fetch(LONE_ROOTS, space, 1))[0]["id"]
        await con.execute(LAST_SEQ, space, session)
        await con.execute(COMPLETE, space, session)
    storage = await fresh.start(storage_app)
    ids = {"space_id": fresh.space.sid, "session_id": str(session)}
    async with storage.channel(fresh.space.key) as channel:
        stub = storage_pb2_grpc.SessionStorageStub(channel)

        async def complete() -> Any:
            request = storage_pb2.GetCompressionCacheRequest(
                space_id=ids["space_id"], session_id=ids["session_id"], complete_only=True
            )
            return (await stub.GetCompressionCache(request)).cache.covered_until_seq

        async def progress() -> Any:
            request = storage_pb2.GetSessionRequest(progress=True, **ids)
            return (await stub.GetSession(request)).progress.complete_summary_covered_until_seq

        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "complete_only": complete,
            "progress": progress,
        }
        reads: dict[str, list[int]] = {name: [] for name in calls}
        for after, more in ((1, 200), (201, 1_800)):
            async with fresh.pool.acquire() as con:
                await con.execute(LOSSY, space, session, after, more)
                await con.execute("ANALYZE compression_caches")
            for name, call in calls.items():
                await call()  # past the first connections' own reads
                read, seq = await fresh.reads("compression_caches", call)
                assert seq == 1, name
                reads[name].append(read)
    assert all(large <= min(small, 10) for small, large in reads.values()), reads
