"""Writing a change's events reads one row of `sessions` per event, whatever the statistics.

The outbox's flush keeps a provisional session's events only once it is visible. That
check was an EXISTS, which the planner ran as a hashed subplan over every visible session
of the space when its statistics said the space was small: here a space analyzed with one
session among 2,000 small spaces, which then grew to 30,001 (autovacuum off, as before the
next analyze). Tuples read are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import pytest

from stello.stored.events import Outbox
from storage_service.sessions.repository import session_event
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    LONE_ROOTS,
    FreshDatabase,
    grown_after_analyze,
)

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]


async def test_a_flush_probes_each_session(fresh: FreshDatabase) -> None:
    """Two events of a visible session, in a space of 30,001 sessions that its statistics
    call small, read a few tuples of `sessions` (one probe of the key each), and both are
    written."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        session = (await con.fetch(LONE_ROOTS, space, 1))[0]["id"]
        await grown_after_analyze(con, space, 10_000)

    async def flush() -> None:
        outbox = Outbox()
        outbox.add(space, session_event("session_updated", session))
        outbox.add(space, session_event("memory_put", session))
        await fresh.in_transaction(outbox.flush)

    read, _ = await fresh.reads("sessions", flush)
    async with fresh.pool.acquire() as con:
        kept = await con.fetchval("SELECT count(*) FROM space_events WHERE space_id = $1", space)
    assert kept == 2
    assert read <= 10, f"{read} tuples of sessions read to keep 2 events"
