"""The event purge reads the events it deletes, not every event the spaces hold: each
space's oldest events on `space_events_created` (space_id, created_at).

Tuples read are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import pytest

from storage_service.app import create_purger
from storage_service.config import StorageSettings
from tests.support.fresh import GENERIC_PLAN_READS, FreshDatabase

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

# $2 events of space $1 after its last position, $3 days old; the space's position follows.
EVENTS = """
WITH last AS (
    INSERT INTO space_positions AS p (space_id, last_position) VALUES ($1, $2)
    ON CONFLICT (space_id) DO UPDATE SET last_position = p.last_position + $2
    RETURNING p.last_position
)
INSERT INTO space_events (space_id, position, kind, created_at)
SELECT $1, last.last_position - $2 + i, 'session_updated', now() - make_interval(days => $3)
FROM last, generate_series(1, $2) i
"""
OLD = 10


async def purge_reads(fresh: FreshDatabase, recent: int) -> int:
    """The tuples of `space_events` one purge reads, with OLD events past retention and
    `recent` within it; it must delete the OLD."""
    async with fresh.pool.acquire() as con:
        await con.execute("DELETE FROM space_events")
        await con.execute(EVENTS, fresh.space.id, OLD, 3)
        await con.execute(EVENTS, fresh.space.id, recent, 0)
        await con.execute("ANALYZE space_events")
    purger = create_purger(fresh.pool, StorageSettings(event_retention_s=86_400))
    read, purged = await fresh.reads("space_events", purger.run_once)
    assert purged == OLD
    return read


async def test_a_purge_reads_what_it_deletes(fresh: FreshDatabase) -> None:
    """A purge of 10 old events beside 20,000 recent ones reads a few tuples per event it
    deletes (30), as beside 200 (210: a scan of that small a table is the cheaper plan)."""
    small = await purge_reads(fresh, 200)
    large = await purge_reads(fresh, 20_000)
    assert large <= 5 * OLD, f"{small} tuples of space_events read at 200, {large} at 20,000"
