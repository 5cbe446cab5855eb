"""A page of orphaned jobs probes each job's session by its key, whatever the statistics.

ListOrphanedJobs keeps the jobs of visible sessions. That check was an EXISTS, which the
planner made a join over every session of the space when the statistics of `sessions`
called the space small (analyzed with one session among 2,000 small spaces, then grown by
30,000: autovacuum off, as before the next analyze) and those of `background_jobs` showed
its many orphans. Tuples read are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import asyncpg
import pytest

from storage_service.jobs.repository import JobRepository, OrphanedJob
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    FreshDatabase,
    grown_after_analyze,
)

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

PAGE = 100

# A stopped run (an orphan) for $2 of the sessions of space $1.
STOPPED = """
INSERT INTO background_jobs (space_id, session_id, kind, status)
SELECT space_id, id, 'summary', 'stopped' FROM sessions WHERE space_id = $1 LIMIT $2
"""


async def test_a_page_of_orphans_probes_each_session(fresh: FreshDatabase) -> None:
    """A page of 100 of a space's 20,000 orphaned jobs, in a space of 30,000 sessions that
    the statistics of `sessions` call small, reads about two tuples of `sessions` per job
    listed, not the space."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, space, 30_000)
        await con.execute(STOPPED, space, 20_000)
        await con.execute("ANALYZE background_jobs")

    async def page(con: asyncpg.Connection) -> list[OrphanedJob]:
        return await JobRepository(con).orphaned(space, PAGE)

    read, orphans = await fresh.reads("sessions", lambda: fresh.in_transaction(page))
    assert len(orphans) == PAGE
    assert read <= 2 * PAGE + 20, f"{read} tuples of sessions read for a page of {PAGE}"
