"""Retention judges a root's subtree by index probes, whatever its size (issue #38).

In a database of its own (its tests count every tuple any connection reads of
`sessions`): in the run's shared database, the background rounds of the test servers
(erasure, sweeps) went on erasing what earlier tests left, and one CI run under load
counted 76 tuples for a dry run that reads 6.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.auth import KeyStore
from tests.support.fixtures import database_fixtures, new_space
from tests.support.history import RowReads
from tests.tree.conftest import TreeClient
from tests.tree.test_retention import apply, put_policy

pytestmark = pytest.mark.sql

_direct_database_url, _database_url, _settings, _pool, _keys = database_fixtures("module")

SUBTREE = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label)
SELECT $1, gen_random_uuid(), $2, $2, 1, i, 'kid' FROM generate_series(1, $3) i
"""


# $2 roots without children: a table of many small trees, whose statistics make
# the planner think a subtree small (it ran "is one active" as a hashed subplan
# over every active session of the space, once per root judged).
ROOTS_ALONE = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
SELECT $1, g.id, g.id, 0, 'alone' FROM (SELECT gen_random_uuid() AS id
                                        FROM generate_series(1, $2)) g
"""


async def judged_reads(
    tree: TreeClient, pool: asyncpg.Pool, database_url: str, children: int
) -> int:
    """Tuples of `sessions` read by a dry run judging one root with `children` children:
    the fewest of three dry runs (the table's counters are the database's: a background
    round of a test server, a sweep or an erasure, may read `sessions` meanwhile, as one
    CI run saw: 114 tuples once, where the run alone reads 6)."""
    root = (await tree.create(label="root")).id
    await pool.execute(SUBTREE, tree.space.id, uuid.UUID(root), children)
    await pool.execute("ANALYZE sessions")
    await put_policy(tree, archive_after_days=30, delete_after_days=90)
    counter = await asyncpg.connect(database_url)
    read: list[int] = []
    try:
        reads = RowReads(counter, "sessions")
        for _ in range(3):
            before = await reads.count()
            reply = await apply(tree, dry_run=True)
            read.append(await reads.count() - before)
            assert list(reply.actions) == [] and reply.done
    finally:
        await counter.close()
    return min(read)


class TestIndexServed:
    @pytest.mark.plain_postgres(
        "counts tuples in pg_stat_user_tables, which a Citus coordinator does not keep"
    )
    async def test_judging_a_subtree_reads_the_same_whatever_its_size(
        self,
        tree: TreeClient,
        other_tree: TreeClient,
        pool: asyncpg.Pool,
        direct_database_url: str,
        keys: KeyStore,
    ) -> None:
        """Judging a root whose subtree holds 20,000 sessions reads about as many tuples of
        `sessions` as judging one with 2: each fact of a subtree is an index probe
        (sessions_root_activity, _archived, _pinned), never a walk of it, nor a scan of
        the table (5,000 sessions of a third space lie before theirs: on main the planner
        checked a big subtree's activity with a scan from the table's start, and a small
        space's facts with scans of the whole table; with the third space's 30,000 lone
        roots, "is one of them active" was a hashed subplan over the whole space)."""
        filler = await new_space(keys)
        root = uuid.uuid4()
        await pool.execute(
            "INSERT INTO sessions (space_id, id, root_id, sibling_index, label)"
            " VALUES ($1, $2, $2, 0, 'filler')",
            filler.id,
            root,
        )
        await pool.execute(SUBTREE, filler.id, root, 5_000)
        await pool.execute(ROOTS_ALONE, filler.id, 30_000)
        small = await judged_reads(other_tree, pool, direct_database_url, 2)
        big = await judged_reads(tree, pool, direct_database_url, 20_000)
        assert big <= small + 10, f"{big} tuples for 20,000 sessions, {small} for 2"
        assert small <= 30, small
