"""A batch of the erasure job reads its batch, not every session being erased in the space.

The job erases a big deletion in bounded batches (DESIGN §4.8), so each batch must cost the
same however many sessions wait behind it: a batch that read every hidden session of the
space made an erasure quadratic in its size. Its claim, its readers' lock and check and its
delete named the batch's ids as a set (`id = ANY (...)`); when the statistics of `sessions`
called the space small (it grew by 30,000 since the last ANALYZE, as a big tenant among many
small ones does), the planner scanned the space instead of probing each id, in five
statements: 300,708 tuples for a batch of 100, under custom and generic plans. Tuples read
are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.fresh import CROWD, GENERIC_PLAN_READS, FreshDatabase
from tree_service.erasure.job import erase_batch

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

BATCH = 100
HIDDEN = 30_000

# $2 roots of space $1 being erased (as a DeleteSubtree's hide leaves them: hidden, and
# in chunks of the job's work of 1,000), inserted so: an UPDATE hiding them would leave a
# dead version of each, whose index entries a probe also reads until a vacuum removes
# them, later under a busy server (an old snapshot elsewhere holds them back): up to 1,602
# tuples for a batch of 100 in a loaded CI pass.
HIDDEN_ROOTS = """
WITH hidden AS (
    INSERT INTO sessions (space_id, id, root_id, sibling_index, label, provisional_until)
    SELECT $1, g.id, g.id, 0, 'hidden', 'infinity'
    FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, $2)) g
    RETURNING id
)
INSERT INTO session_erasures (space_id, root_id, chunk, min_depth, ids)
SELECT $1, (array_agg(id ORDER BY id))[1], 0, 0, array_agg(id ORDER BY id)
FROM (SELECT id, (row_number() OVER () - 1) / 1000 AS part FROM hidden) h
GROUP BY part
"""


async def test_a_batch_reads_its_batch_not_the_space(fresh: FreshDatabase) -> None:
    """One batch of 100 in a space with 30,000 sessions being erased (more than the
    statistics know of) reads a few tuples of `sessions` per session erased (each is found,
    locked and deleted by key, and its foreign keys checked: 11)."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:  # as `grown_after_analyze`, the growth hidden
        await con.execute(CROWD, space, 2_000, 5)
        await con.execute("ANALYZE sessions")
        await con.execute(HIDDEN_ROOTS, space, HIDDEN)

    async def one_batch(con: asyncpg.Connection) -> int:
        return await erase_batch(con, BATCH, wait=False)

    read, erased = await fresh.reads("sessions", lambda: fresh.in_transaction(one_batch))
    assert erased == BATCH
    assert read <= 15 * BATCH, f"{read} tuples of sessions read to erase {BATCH}"
