"""The provisional sweep deletes its due sessions, not the space, whatever the statistics.

The sweep claims and deletes one space's due provisional sessions by primary key.
Its delete named them as a set (`id = ANY (...)`); when the statistics of
`sessions` called the space small (it grew by 10,000 since the last ANALYZE, as a
big tenant among many small ones does), the planner scanned the space instead of
probing each id: 61,000 tuples to sweep 100 (now 1,100), under custom and generic plans. Its
due read and its claims, which span spaces, read the provisional sessions of every space on
their index (`sessions_provisional`): the claim of each space all of them, and a generic
plan of the due read those still being created too. Tuples read are counted in
PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import pytest

from stello.db.pool import create_pool
from tests.support.fresh import GENERIC_PLAN_READS, FreshDatabase, grown_after_analyze
from tree_service.unit import TreeRepository

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

GROWN = 10_000
"""Sessions added past the statistics: a read of the space reads at least that many, far past
every bound below (30,000 until CI's time asked for less: the seeding was most of the time)."""
DUE_COUNT = 100

# $2 of the space's lone roots, due for the sweep.
DUE = """
UPDATE sessions SET provisional_until = now() - interval '1 hour'
WHERE space_id = $1 AND id IN (SELECT id FROM sessions WHERE space_id = $1 AND label = 'root'
                               LIMIT $2)
"""


async def sweep_reads(fresh: FreshDatabase) -> int:
    """The tuples of `sessions` one sweep of DUE_COUNT due sessions read (a pool of its
    own, as the tree service's sweeper has); it must sweep that many."""

    async def sweep() -> int:
        async with create_pool(fresh.dsn, fresh.settings) as pool:
            swept = await TreeRepository(pool).sweeps.sweep(0.0, DUE_COUNT, wait=False)
        assert swept is not None
        return len(swept)

    read, swept = await fresh.reads("sessions", sweep)
    assert swept == DUE_COUNT
    return read


async def test_a_sweep_reads_its_due_sessions_not_the_space(fresh: FreshDatabase) -> None:
    """A sweep of 100 due provisional sessions, in a space of 10,000 more sessions than
    the statistics know of, reads a few tuples of `sessions` each."""
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, fresh.space.id, GROWN)
        await con.execute(DUE, fresh.space.id, DUE_COUNT)

    read = await sweep_reads(fresh)
    async with fresh.pool.acquire() as con:
        left = await con.fetchval(
            "SELECT count(*) FROM sessions WHERE provisional_until IS NOT NULL"
        )
    assert left == 0
    # 1,100 (1,600 on PostgreSQL 15: each claim's key probe also meets the row's version
    # from before the test made it due).
    assert read <= 20 * DUE_COUNT, f"{read} tuples of sessions read to sweep {DUE_COUNT}"


# $2 of the space's lone roots still being created: provisional, not due for an hour.
IN_FLIGHT = """
UPDATE sessions SET provisional_until = now() + interval '1 hour'
WHERE space_id = $1 AND id IN (SELECT id FROM sessions WHERE space_id = $1 AND label = 'root'
                               AND provisional_until IS NULL LIMIT $2)
"""

# Every session of $1 crowd spaces (5 each), due for the sweep.
CROWD_DUE = """
UPDATE sessions SET provisional_until = now() - interval '1 hour'
WHERE space_id IN (SELECT space_id FROM sessions WHERE label = 'crowd'
                   GROUP BY space_id ORDER BY space_id LIMIT $1)
"""


async def test_a_sweep_reads_its_due_sessions_not_those_in_flight(fresh: FreshDatabase) -> None:
    """A sweep of 100 due provisional sessions of 20 spaces, beside 2,000 provisional
    sessions of another space not yet due (being created), reads a few tuples of `sessions`
    per session swept (1,360 to 1,600), not every provisional session per space claimed
    (84,286 custom, 88,246 generic)."""
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, fresh.space.id, GROWN)
        await con.execute(IN_FLIGHT, fresh.space.id, 2_000)
        await con.execute(CROWD_DUE, 20)

    read = await sweep_reads(fresh)
    assert read <= 20 * DUE_COUNT, f"{read} tuples of sessions read to sweep {DUE_COUNT}"
