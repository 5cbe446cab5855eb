"""A page of orphaned jobs probes each job's session by its key, whatever the statistics.

ListOrphanedJobs keeps the jobs of visible sessions. That check was an EXISTS, which the
planner made a join over every session of the space when the statistics of `sessions`
called the space small (analyzed with one session among 2,000 small spaces, then grown by
30,000: autovacuum off, as before the next analyze) and those of `background_jobs` showed
its many orphans. The jobs themselves are read on an index of the space's unfinished runs
(migration 0026): the primary key, which the planner took for a space that statistics
called small, held all of its finished jobs. Tuples read are counted in PostgreSQL's
statistics (pg_stat), not time, under custom and generic plans.
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
TABLES = ["sessions", "background_jobs"]
UNANALYZED = TABLES  # the `fresh` fixture leaves them to the test (tests/support/fresh.py)

# A stopped run (an orphan) for $2 of the sessions of space $1.
STOPPED = """
INSERT INTO background_jobs (space_id, session_id, kind, status)
SELECT space_id, id, 'summary', 'stopped' FROM sessions WHERE space_id = $1 LIMIT $2
"""


# A run in status $1 for every session of the crowd spaces (`grown_after_analyze`).
CROWD_JOBS = """
INSERT INTO background_jobs (space_id, session_id, kind, status)
SELECT space_id, id, 'summary', $1 FROM sessions WHERE label = 'crowd'
"""

# A run for every lone root of space $1: $2 stopped, $3 expired, $4 live, the others done.
SPACE_JOBS = """
INSERT INTO background_jobs (space_id, session_id, kind, status, token, expires_at)
SELECT $1, id, 'summary',
       CASE WHEN n <= $2 THEN 'stopped' WHEN n <= $2 + $3 + $4 THEN 'running' ELSE 'done' END,
       CASE WHEN n > $2 AND n <= $2 + $3 + $4 THEN gen_random_uuid() END,
       CASE WHEN n > $2 AND n <= $2 + $3 THEN now() - interval '1 minute'
            WHEN n > $2 + $3 AND n <= $2 + $3 + $4 THEN now() + interval '1 hour' END
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n
      FROM sessions WHERE space_id = $1 AND label = 'root') r
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


@pytest.mark.parametrize("everywhere", [False, True], ids=["space", "everywhere"])
async def test_a_few_orphans_among_many_jobs_are_read_alone(
    fresh: FreshDatabase, everywhere: bool
) -> None:
    """The 10 orphans (5 stopped, 5 expired) of a space whose 30,000 sessions each ran a
    job (10 live, the others done), more than the statistics of `background_jobs` know of,
    are listed reading a few tuples of it per orphan: in the space, not its jobs nor the
    10,000 stopped runs of 2,000 other spaces (it read 60,000); in every space (the other
    spaces' runs done), not the finished jobs."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, space, 30_000)
        await con.execute(CROWD_JOBS, "done" if everywhere else "stopped")
        await con.execute("ANALYZE background_jobs")
        await con.execute(SPACE_JOBS, space, 5, 5, 10)

    async def page(con: asyncpg.Connection) -> list[OrphanedJob]:
        return await JobRepository(con).orphaned(None if everywhere else space, PAGE)

    reads, orphans = await fresh.reads_of(TABLES, lambda: fresh.in_transaction(page))
    assert [o.space_id for o in orphans] == [space] * 10
    # 40: each orphan and live run of the space read in the index and the heap.
    assert reads["background_jobs"] <= 60, f"{reads} read for 10 orphans"
    assert reads["sessions"] <= 40, f"{reads} read for 10 orphans"  # 20
