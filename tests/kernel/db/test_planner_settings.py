"""The planner settings the services set for one transaction (SET LOCAL: a plan without
sorts, or without scans of a whole table) never make a statement JIT-compiled: before
PostgreSQL 18 a node those settings disable, where no plan avoids it, adds 10^10 to the
plan's cost, past jit_above_cost, and compiling took ~300 ms of a search page that ran
in under 1 ms (PostgreSQL 15, a session's view: ci2's 28 s test)."""

from __future__ import annotations

import asyncpg
import pytest

from storage_service.search.repository import VIEW_SETTINGS
from tree_service.nodes.repository import WALK_PLANS
from tree_service.trees.repository import tree_settings

pytestmark = pytest.mark.sql

# A table without an index: its rows can only be read by a sequential scan, sorted only by
# a sort, joined to itself only by a join of one of the three kinds. Each query has an
# expression to compile (a filter, a join's condition): EXPLAIN shows JIT only where it
# would compile something.
TABLE = "CREATE TEMP TABLE planned (x int, y int) ON COMMIT DROP"
NEEDS_A_SORT = "SELECT x FROM planned WHERE y > 0 ORDER BY y"
NEEDS_A_SCAN = "SELECT a.x FROM planned a JOIN planned b ON a.y = b.x + 1"


async def jit_planned(pool: asyncpg.Pool, settings: str, query: str) -> bool:
    """Whether `query`, planned in a transaction after `settings`, would be JIT-compiled."""
    async with pool.acquire() as con, con.transaction():
        await con.execute(TABLE)
        await con.execute(settings)
        # jit_above_cost and the rest as the server's defaults: only `settings` differ.
        plan = await con.fetchval(f"EXPLAIN (FORMAT JSON) {query}")  # json decoded
    return "JIT" in plan[0]


@pytest.mark.parametrize(
    ("block", "query"),
    [
        (VIEW_SETTINGS, NEEDS_A_SORT),
        (tree_settings(60_000), NEEDS_A_SORT),
        (WALK_PLANS, NEEDS_A_SCAN),
    ],
    ids=["search-view", "get-tree", "walk"],
)
async def test_a_plan_with_a_disabled_node_is_not_compiled(
    pool: asyncpg.Pool, block: str, query: str
) -> None:
    """A statement that needs a node the block disables is planned without JIT."""
    assert not await jit_planned(pool, block, query)
