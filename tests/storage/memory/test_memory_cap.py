"""What a space's shared memory may hold and what reading its index costs (DESIGN §4.5).

A space holds at most `max_shared_memory_entries` entries (a new slug past it is
RESOURCE_EXHAUSTED SHARED_MEMORY_FULL, nothing written), and its count is one
row the writes keep: a turn that shows the index, and a ListSharedMemory page,
read that row and their own entries, never the whole space (tuples counted).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial

import asyncpg
import grpc
import pytest

from stello.errors import error_info_reason
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from storage_service.config import StorageSettings
from tests.storage.helpers import rpc_error
from tests.storage.memory.test_shared_memory import listed, remove, upsert
from tests.support.fixtures import MakeSession, ServerStarter, TestSpace
from tests.support.history import RowReads
from tests.support.rows import space_rows

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
CAP = 3
SEEDED = 5_000
SHOWN = 20


@pytest.fixture(name="capped")
async def _capped(start_server: ServerStarter, space: TestSpace) -> AsyncIterator[Stub]:
    """A stub on a storage server whose spaces hold at most `CAP` entries."""
    config = StorageSettings(max_shared_memory_entries=CAP)
    server = await start_server(partial(create_app, config=config))
    async with server.channel(space.key) as channel:
        yield storage_pb2_grpc.SessionStorageStub(channel)


class TestCap:
    async def test_a_new_slug_past_the_cap_is_refused_and_writes_nothing(
        self, capped: Stub, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """At the cap a new slug is RESOURCE_EXHAUSTED naming the cap, and no row (entry,
        count or event) changes; replacing an entry is allowed, and a removal makes room."""
        for i in range(CAP):
            await upsert(capped, space, f"e{i}")
        before = await space_rows(pool, space.id)
        error = await rpc_error(upsert(capped, space, "one-too-many"))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info_reason(error) == "SHARED_MEMORY_FULL"
        assert f"holds {CAP} shared memory entries" in (error.details() or "")
        assert await space_rows(pool, space.id) == before
        replaced = await upsert(capped, space, "e0", "new summary")
        assert not replaced.created
        assert await remove(capped, space, "e1")
        assert (await upsert(capped, space, "e3")).created
        page = await listed(capped, space)
        assert [e.slug for e in page.entries] == ["e0", "e2", "e3"]
        assert page.total_count == CAP

    async def test_concurrent_new_slugs_stop_at_the_cap(
        self, capped: Stub, space: TestSpace
    ) -> None:
        """Of 12 concurrent upserts of new slugs exactly `CAP` are stored, the rest refused,
        and the count agrees with the entries."""
        results = await asyncio.gather(
            *(upsert(capped, space, f"k{i}") for i in range(12)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(refused) == 12 - CAP
        assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        page = await listed(capped, space)
        assert len(page.entries) == page.total_count == CAP


async def seed_entries(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, space_id: uuid.UUID, count: int
) -> None:
    """COPY `count` entries into the space, with the count row the writes would keep."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [
        (space_id, f"slug-{i:05d}", f"summary {i}", f"body {i}", at, at, uuid.uuid4())
        for i, at in ((i, start + timedelta(seconds=i)) for i in range(count))
    ]
    columns = ["space_id", "slug", "summary", "body", "created_at", "updated_at", "entry_id"]
    await con.copy_records_to_table("shared_memory", records=rows, columns=columns)
    await con.execute(
        "INSERT INTO shared_memory_counts (space_id, entries) VALUES ($1, $2)", space_id, count
    )
    await con.execute("ANALYZE shared_memory")


@pytest.mark.plain_postgres(
    "counts the rows read in the statistics of the database it connects to; on Citus the "
    "coordinator reads none, the workers' shards do"
)
class TestCost:
    async def test_a_turn_reads_the_index_not_the_space(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        direct_database_url: str,
    ) -> None:
        """With 5,000 entries a turn showing 20 reads about 20 entries' tuples (the count
        from its row), and a ListSharedMemory page of 10 about 10, not the space."""
        sid = await make_session()
        async with pool.acquire() as con:
            await seed_entries(con, space.id, SEEDED)
        request = storage_pb2.BeginTurnRequest(
            space_id=space.sid,
            session_id=str(sid),
            ttl_s=30,
            window=storage_pb2.TurnWindow(window_tokens=100_000),
            memory_index=storage_pb2.MemoryIndexWindow(max_entries=SHOWN, max_tokens=10_000),
        )
        counter = await asyncpg.connect(direct_database_url)
        try:
            reads = RowReads(counter, "shared_memory")
            before = await reads.count()
            reply = await stub.BeginTurn(request)
            turn_read = await reads.count() - before
            before = await reads.count()
            page = await listed(stub, space, page_size=10)
            page_read = await reads.count() - before
        finally:
            await counter.close()
        assert [e.slug for e in reply.turn.memory_index] == [f"slug-{i:05d}" for i in range(SHOWN)]
        assert reply.turn.memory_total == SEEDED
        assert page.total_count == SEEDED and len(page.entries) == 10
        assert turn_read <= 2 * SHOWN + 10, f"a turn read {turn_read} shared memory tuples"
        assert page_read <= 2 * 11 + 10, f"a page read {page_read} shared memory tuples"
