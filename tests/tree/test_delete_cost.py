"""DeleteSubtree's hide costs a few index entries per session, whatever `sessions` indexes.

The hide sets `provisional_until` to ERASING on every session of the subtree: no such
update is HOT, so each hidden row is written into every index whose predicate it meets.
The indexes that serve reads hold visible rows only (migration 0025); only the five
that must see every row take the hidden one. Speed itself is bench/bench_delete.py's.
"""

from __future__ import annotations

import json
from typing import cast

import asyncpg
import pytest

from tests.tree.conftest import TreeClient
from tests.tree.seed import fanout_tree, seed_topology
from tree_service.erasure.repository import HIDE_SUBTREE, LOCK_SUBTREE
from tree_service.unit import TreeTx

pytestmark = pytest.mark.sql

# The indexes a hidden session is written into: the primary key, the parent key's check
# and the subtree walks, the erasure job's; and, for a session with a source, the
# source key's. The sweep's holds no session being erased (the sweep leaves them).
MAINTENANCE = {
    "sessions_pkey": None,
    "sessions_parent": None,
    "sessions_erasing": "(provisional_until = 'infinity'::timestamp with time zone)",
    "sessions_source": "(source_session_id IS NOT NULL)",
    "sessions_provisional": (
        "((provisional_until IS NOT NULL)"
        " AND (provisional_until <> 'infinity'::timestamp with time zone))"
    ),
}

# The predicate of a read index (migration 0025): no session being erased.
VISIBLE = (
    "((provisional_until IS NULL) OR (provisional_until <> 'infinity'::timestamp with time zone))"
)

SESSIONS_INDEXES = """
SELECT c.relname AS name, pg_get_expr(i.indpred, i.indrelid) AS predicate
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'sessions'::regclass
ORDER BY c.relname
"""

# WAL records per hidden session (without a source) the hide's UPDATE may write: its
# heap row and an entry in each of three MAINTENANCE indexes, and a little for page
# splits. With every index whole (before migration 0025) it wrote 16.5.
RECORDS_PER_SESSION = 5.5


async def test_read_indexes_hold_visible_rows_only(pool: asyncpg.Pool) -> None:
    """Every index of `sessions` that serves reads has VISIBLE in its predicate, so a
    hidden row gets no entry in it; the others are the MAINTENANCE ones, as they are."""
    async with pool.acquire() as con:
        rows = await con.fetch(SESSIONS_INDEXES)
    maintenance = {r["name"]: r["predicate"] for r in rows if r["name"] in MAINTENANCE}
    assert maintenance == MAINTENANCE
    whole = [
        r["name"]
        for r in rows
        if r["name"] not in MAINTENANCE and VISIBLE not in (r["predicate"] or "")
    ]
    assert whole == []


@pytest.mark.plain_postgres("reads the WAL counters of EXPLAIN ANALYZE, which Citus wraps")
async def test_hide_writes_a_few_records_per_session(tree: TreeClient, pool: asyncpg.Pool) -> None:
    """The hide's UPDATE of a 2,000-session subtree writes at most RECORDS_PER_SESSION WAL
    records per session (heap and index entries), not one per index of `sessions`."""
    size = 2000
    ids = await seed_topology(pool, tree.space.id, fanout_tree(size, 10))
    async with pool.acquire() as con:
        hiding = con.transaction()
        await hiding.start()
        try:
            locked = await con.fetchval(LOCK_SUBTREE, tree.space.id, ids[0])
            assert len(locked) == size
            plan = await con.fetchval(
                f"EXPLAIN (ANALYZE, WAL, FORMAT JSON) {HIDE_SUBTREE}", tree.space.id, locked
            )
        finally:
            await hiding.rollback()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    records = int(plan[0]["Plan"]["WAL Records"])
    assert records / size <= RECORDS_PER_SESSION, records / size


async def test_a_round_past_the_probe_limit_is_hidden_as_a_set(
    tree: TreeClient, pool: asyncpg.Pool
) -> None:
    """A hide round bigger than `probes_max` (`HIDE_SUBTREE_SET`) hides what the probes
    (`HIDE_SUBTREE`) hide, in the same order, and leaves none of it visible."""
    size = 120
    ids = await seed_topology(pool, tree.space.id, fanout_tree(size, 5))
    answers = []
    for probes_max in (size, size - 1):  # by key, then as a set
        async with pool.acquire() as con:
            hiding = con.transaction()
            await hiding.start()
            try:
                repo = TreeTx(cast("asyncpg.Connection", con))  # a pooled one
                locked = await repo.subtrees.lock_subtree(tree.space.id, ids[0])
                answers.append(
                    await repo.subtrees.hide_subtree(
                        tree.space.id, ids[0], locked, probes_max=probes_max
                    )
                )
                visible = await con.fetchval(VISIBLE_OF, tree.space.id, ids)
            finally:
                await hiding.rollback()
        assert visible == 0
    assert answers[0] == answers[1]
    assert sorted(answers[0]) == sorted(ids) and answers[0][0] == ids[0]


VISIBLE_OF = """
SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY ($2::uuid[])
  AND provisional_until IS NULL
"""
