"""DeleteSubtree's locks read the subtree, not the space, whatever the statistics.

The hide locks the subtree (`LOCK_SUBTREE`) and then the children committed under
it meanwhile (`LOCK_MISSED`): a walk down `sessions_parent` and a lock of each
session by its primary key, in id order. When the statistics of `sessions` called
the space small (it grew by 10,000 since the last ANALYZE, as a big tenant among
many small ones does), both were planned as hash joins over every session of the
space, once per level of the subtree and once for the lock: 240,802 tuples to lock
a subtree of 100 three levels deep (now 400). Tuples read are counted in
PostgreSQL's statistics (pg_stat), not time, under custom and generic plans (the
`fresh` fixture).
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from tests.support.fresh import GENERIC_PLAN_READS, FreshDatabase, grown_after_analyze
from tests.tree.seed import COLUMNS
from tree_service.erasure.repository import LOCK_MISSED
from tree_service.unit import TreeTx

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

GROWN = 10_000
"""Sessions added past the statistics: a read of the space reads at least that many, far past
every bound below (30,000 until CI's time asked for less: the seeding was most of the time)."""
SIZE = 100


async def grown_with_subtree(fresh: FreshDatabase) -> uuid.UUID:
    """A root with SIZE - 1 descendants (ten children each, two levels below it) in a
    space of 10,000 more sessions than the statistics know of; the root."""
    space = fresh.space.id
    root = uuid.uuid4()
    rows: list[tuple[object, ...]] = [(space, root, None, root, 0, 0, "subtree")]
    parents = [root]
    while len(rows) < SIZE:
        parent = parents[(len(rows) - 1) // 10]
        child = uuid.uuid4()
        depth = 1 if parent == root else 2
        rows.append((space, child, parent, root, depth, (len(rows) - 1) % 10, "below"))
        parents.append(child)
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, space, GROWN)
        await con.copy_records_to_table("sessions", records=rows, columns=COLUMNS)
    return root


async def test_a_subtree_lock_reads_its_subtree_not_the_space(fresh: FreshDatabase) -> None:
    """`LOCK_SUBTREE` of a subtree of 100 reads a few tuples of `sessions` per session."""
    space = fresh.space.id
    root = await grown_with_subtree(fresh)

    async def lock(con: asyncpg.Connection) -> list[uuid.UUID]:
        return await TreeTx(con).subtrees.lock_subtree(space, root)

    read, locked = await fresh.reads("sessions", lambda: fresh.in_transaction(lock))
    assert len(locked) == SIZE and locked == sorted(locked)
    assert read <= 6 * SIZE, f"{read} tuples of sessions read to lock {SIZE}"


async def test_the_missed_lock_reads_the_missed_not_the_space(fresh: FreshDatabase) -> None:
    """`LOCK_MISSED` under a root whose 99 descendants were all missed reads a few tuples
    of `sessions` per session it locks."""
    space = fresh.space.id
    root = await grown_with_subtree(fresh)

    async def lock(con: asyncpg.Connection) -> list[uuid.UUID]:
        return list(await con.fetchval(LOCK_MISSED, space, [root]) or ())

    read, locked = await fresh.reads("sessions", lambda: fresh.in_transaction(lock))
    assert len(locked) == SIZE - 1 and locked == sorted(locked)
    assert read <= 6 * SIZE, f"{read} tuples of sessions read to lock {SIZE - 1}"


async def test_the_hide_reads_its_subtree_not_the_space(fresh: FreshDatabase) -> None:
    """The hide (`hide_subtree`: HIDE_SUBTREE, HIDE_REFS, UNSOURCE, LOCK_MISSED) of a locked
    subtree of 100 reads a few tuples of `sessions` per session it hides."""
    space = fresh.space.id
    root = await grown_with_subtree(fresh)

    async def hide(con: asyncpg.Connection) -> list[uuid.UUID]:
        tx = TreeTx(con)
        locked = await tx.subtrees.lock_subtree(space, root)
        return await tx.subtrees.hide_subtree(space, root, locked)

    read, hidden = await fresh.reads("sessions", lambda: fresh.in_transaction(hide))
    assert len(hidden) == SIZE and hidden[0] == root
    assert read <= 12 * SIZE, f"{read} tuples of sessions read to hide {SIZE}"
