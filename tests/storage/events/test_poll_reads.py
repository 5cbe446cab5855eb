"""A poll of the space's events (WatchSpace's poller) reads the events after its position,
not the space's history: a page of the primary key (space_id, position) from there (20
tuples of `space_events` for 10 events, after 200 or 20,000). Tuples read are counted in
PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import pytest

from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.storage.events.test_purge_reads import EVENTS
from tests.support.fresh import GENERIC_PLAN_READS, FreshDatabase

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

NEW = 10


async def test_a_poll_reads_the_same_after_200_or_20000_events(fresh: FreshDatabase) -> None:
    """A poll for the 10 newest events, after 20,000 older ones, reads a few tuples of
    `space_events` per event answered, as after 200."""
    space = fresh.space.id
    storage = await fresh.start(storage_app)
    reads = []
    async with storage.channel(fresh.space.key) as channel:
        stub = storage_pb2_grpc.SessionStorageStub(channel)
        for older in (200, 20_000):
            async with fresh.pool.acquire() as con:
                await con.execute("DELETE FROM space_events WHERE space_id = $1", space)
                await con.execute("DELETE FROM space_positions WHERE space_id = $1", space)
                await con.execute(EVENTS, space, older + NEW, 0)
                await con.execute("ANALYZE space_events")
            request = storage_pb2.ReadEventsRequest(
                space_id=fresh.space.sid, after_position=older, limit=100
            )

            async def poll(request: storage_pb2.ReadEventsRequest = request) -> int:
                return len((await stub.ReadEvents(request)).events)

            read, found = await fresh.reads("space_events", poll, warm=True)
            assert found == NEW
            reads.append(read)
    small, large = reads
    assert large <= 5 * NEW, f"{small} tuples of space_events after 200, {large} after 20,000"
