"""A page deep in ListSharedMemory reads its entries, not the pages before it (STYLE §17).

Its statement said `($2 IS NULL OR (created_at, slug) > ($2, $3))`: a plan that knows no
parameter (a pooler's long-lived connection, `force_generic_plan`) cannot start its walk of
`shared_memory_order` at the page's position, and read the space's entries from the
first: 420 tuples of `shared_memory` for the last page after 200 entries, 4,204 after
2,000. The page after a key is a statement of its own now: 20 and 20. Tuples read are
counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.support.fresh import FreshDatabase

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "counts the tuples read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    ),
]

LAST = 10
BASE = datetime(2026, 1, 1, tzinfo=UTC)
# $2 entries of space $1, in order, and the space's count.
ENTRIES = """
WITH added AS (
    INSERT INTO shared_memory (space_id, slug, summary, body, created_at, updated_at, entry_id)
    SELECT $1, 'e' || lpad(i::text, 6, '0'), 's', 'b', $3::timestamptz + make_interval(secs => i),
           now(), gen_random_uuid()
    FROM generate_series(1, $2) i
    RETURNING 1
)
INSERT INTO shared_memory_counts (space_id, entries) SELECT $1, count(*) FROM added
ON CONFLICT (space_id) DO UPDATE SET entries = EXCLUDED.entries
"""


async def test_the_last_page_reads_the_same_after_200_or_2000(fresh: FreshDatabase) -> None:
    """The last page (10 entries) after 2,000 entries reads a few tuples of `shared_memory`
    per entry answered."""
    space = fresh.space.id
    storage = await fresh.start(storage_app)
    reads = []
    async with storage.channel(fresh.space.key) as channel:
        stub = storage_pb2_grpc.SessionStorageStub(channel)

        async def token_after(count: int) -> str:
            token = ""
            for _ in range(count // 200):
                request = storage_pb2.ListSharedMemoryRequest(
                    space_id=fresh.space.sid, page_size=200, page_token=token
                )
                token = (await stub.ListSharedMemory(request)).next_page_token
            return token

        for before in (200, 2_000):
            async with fresh.pool.acquire() as con:
                await con.execute("DELETE FROM shared_memory WHERE space_id = $1", space)
                await con.execute(ENTRIES, space, before + LAST, BASE)
                await con.execute("ANALYZE shared_memory")
            last = storage_pb2.ListSharedMemoryRequest(
                space_id=fresh.space.sid, page_size=LAST + 1, page_token=await token_after(before)
            )

            async def page(last: storage_pb2.ListSharedMemoryRequest = last) -> int:
                return len((await stub.ListSharedMemory(last)).entries)

            read, found = await fresh.reads("shared_memory", page, warm=True)
            assert found == LAST
            reads.append(read)
    small, large = reads
    assert large <= 5 * LAST, f"{small} tuples of shared_memory after 200, {large} after 2,000"
