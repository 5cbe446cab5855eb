"""A batch of retention's roots deep in a space reads its roots, not those before it.

The batch's cursor was `($2 IS NULL OR (created_at, id) > ($2, $3))`: a plan that knows
no parameter (a pooler's long-lived connection, `force_generic_plan`) cannot start its
walk of the roots there, and read the space's roots from the first, for every batch of a
round: 460 tuples of `sessions` after 200 roots, 4,270 after 2,000. The batch after a
cursor is a statement of its own now: 60 and 60. Tuples read are counted in PostgreSQL's
statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from tests.support.fresh import GENERIC_PLAN_READS, LONE_ROOTS, FreshDatabase
from tree_service.retention.repository import Cursor, RetentionStatements

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

BATCH = 10
# The (created_at, id) of the space's $2-th root, in the batches' order.
NTH_ROOT = """
SELECT created_at, id FROM sessions
WHERE space_id = $1 AND parent_id IS NULL
ORDER BY created_at, id
OFFSET $2 - 1 LIMIT 1
"""


async def test_a_batch_reads_the_same_after_200_or_2000_roots(fresh: FreshDatabase) -> None:
    """The batch of 10 roots after the 2,000th reads a few tuples of `sessions` per root."""
    space = fresh.space.id
    reads = []
    for before in (200, 2_000):
        async with fresh.pool.acquire() as con:
            await con.execute("DELETE FROM sessions WHERE space_id = $1", space)
            await con.execute(LONE_ROOTS, space, before + BATCH)
            await con.execute("ANALYZE sessions")
            row = await con.fetchrow(NTH_ROOT, space, before)
        assert row is not None
        cursor = Cursor(row["created_at"], row["id"])

        async def batch(con: asyncpg.Connection, cursor: Cursor = cursor) -> list[uuid.UUID]:
            roots = await RetentionStatements(con).roots(space, cursor, BATCH)
            return [root.id for root in roots]

        async def counted(cursor: Cursor = cursor) -> list[uuid.UUID]:
            return await fresh.in_transaction(lambda con: batch(con, cursor))

        read, found = await fresh.reads("sessions", counted)
        assert len(found) == BATCH
        reads.append(read)
    small, large = reads
    assert large <= 20 * BATCH, f"{small} tuples of sessions after 200 roots, {large} after 2,000"
