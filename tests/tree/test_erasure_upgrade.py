"""Migration 0050 hands the sessions hidden before it to the erasure job.

Before 0050 the job found its work by scanning for hidden sessions
(`provisional_until = 'infinity'`); since, it reads the chunks each hide writes
(`session_erasures`). A database with a delete in flight at the upgrade keeps
its hidden sessions: the migration writes their chunks (per space and depth), and
the job erases them, children before parents. The database is migrated through
0049, where the delete is hidden as that release did, then migrated on."""

from __future__ import annotations

from typing import cast

import asyncpg
import pytest

from stello.db.migrate import migrate
from tests.support.fixtures import TestSpace, database_fixtures
from tests.support.migrated import database_through
from tests.tree.seed import chain, fanout_tree, seed_topology
from tree_service.erasure.job import EraseRepository

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres("migrates a database of its own from an older schema"),
]

BEFORE = "0049_search_tatweel_and_quranic_marks"

_database_url, _settings, _pool, _keys = database_fixtures("function")[1:]
_direct_database_url = database_through(BEFORE)

# The hide of the release before 0050: the subtree below $2 (its root kept) and a
# chain below it, no chunk written.
OLD_HIDE = """
UPDATE sessions SET provisional_until = 'infinity' WHERE space_id = $1 AND id <> ALL ($2::uuid[])
"""
LEFT = "SELECT id FROM sessions WHERE space_id = $1 ORDER BY id"
CHUNKS = "SELECT min_depth, cardinality(ids) AS size FROM session_erasures WHERE space_id = $1"


async def test_sessions_hidden_before_0050_are_erased_after_it(
    space: TestSpace, pool: asyncpg.Pool
) -> None:
    """2,500 hidden sessions of a tree (its root kept) and a 30-deep chain: after the
    migration, the job erases every one of them (none held back for want of a chunk, no
    parent before its children), and leaves no chunk."""
    tree = await seed_topology(pool, space.id, fanout_tree(2_501, 3))
    line = await seed_topology(pool, space.id, chain(30))
    kept = [tree[0], line[0]]
    await pool.execute(OLD_HIDE, space.id, kept)
    async with pool.acquire() as con:
        applied = await migrate(cast(asyncpg.Connection, con))
    assert applied[0] == "0050_hide_is_hot"
    chunks = await pool.fetch(CHUNKS, space.id)
    assert sum(c["size"] for c in chunks) == 2_500 + 29
    assert max(c["size"] for c in chunks) == 1000  # the widest level, in two chunks
    erased = 0
    repo = EraseRepository(pool)
    while batch := await repo.erase_batch(100, wait=True):
        erased += batch
    assert erased == 2_529
    assert [r["id"] for r in await pool.fetch(LEFT, space.id)] == sorted(kept)
    assert await pool.fetch(CHUNKS, space.id) == []
