"""GetTree's SQL: the forest (or a subtree) as rows, read within a bound.

`TreeRowReads.tree_rows` reads the rows in one transaction under `tree_settings`;
past its bound a probe of one row tells a database that does not answer
(UNAVAILABLE) from a tree too large to read in time.
"""

from __future__ import annotations

import uuid
from operator import itemgetter
from typing import cast

import asyncpg

from stello.db.pool import in_transaction
from stello.errors import Unavailable
from tree_service import sql
from tree_service.models import ROW_ID, ROW_TOP_AT, TreeReadTooLong, TreeRow, TreeRows

# GetTree below a depth limit, or of one subtree: one recursive CTE, no path
# arrays (quadratic on deep chains); the caller builds the pre-order, and the
# reply's bytes from these columns (ids as text: PostgreSQL's uuid_out costs less
# than a UUID object and its str() per node). {top} picks the top session(s), their
# created_at in `top_at` (NULL below them: the caller orders the tops by (top_at,
# id)); $2 max levels below the top (NULL = all); $3 row cap (the limit stops the
# recursion early). Each level's children are read by a LATERAL lookup per parent,
# so the rows read are the rows answered whatever the planner believes about the
# space (see tree_settings).
_TREE = """
WITH RECURSIVE tree AS (
    SELECT s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.turn_count,
           s.source_session_id, s.created_at AS top_at, 0 AS level
    FROM sessions s
    WHERE s.space_id = $1 AND s.provisional_until IS NULL AND {top}
  UNION ALL
    SELECT c.id, c.parent_id, c.depth, c.sibling_index, c.label, c.status, c.turn_count,
           c.source_session_id, NULL::timestamptz, tree.level + 1
    FROM tree
    CROSS JOIN LATERAL (
        SELECT k.id, k.parent_id, k.depth, k.sibling_index, k.label, k.status, k.turn_count,
               k.source_session_id
        FROM sessions k
        WHERE k.space_id = $1 AND k.parent_id = tree.id AND k.provisional_until IS NULL
        ORDER BY k.sibling_index
    ) c
    WHERE $2::int4 IS NULL OR tree.level < $2
)
SELECT id::text, parent_id::text, depth, sibling_index, label, status, turn_count,
       source_session_id::text, top_at
FROM tree
LIMIT $3
"""

# Run first in GetTree's transaction (SET LOCAL: PgBouncer transaction mode keeps working).
# A plan is made for each call (a generic one cached while the space was small would scan
# the whole space once per level: quadratic on a chain, minutes after a bulk load), the
# children of a node are one (space_id, parent_id) index range each, found in sibling order
# (no sort: the planner, which may believe the space holds one row, cannot pick another
# index), and a statement timeout bounds what is left (milliseconds, an integer the
# service computes: a SET takes no parameter). SET LOCAL statements, not set_config():
# on Citus they reach the worker that runs the walk (the database's default
# citus.propagate_set_commands = 'local', stello.distribution.plan), which otherwise plans it
# from statistics taken while the shard was small (10 s for 2,001 rows of a chain, measured).
# JIT off: before PostgreSQL 18 a sort no plan avoids adds 10^10 to the plan's cost, past
# jit_above_cost, and compiling costs more than the walk (tests/kernel/db/test_planner_settings.py).
_TREE_SETTINGS = """
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL enable_sort = off;
SET LOCAL jit = off;
SET LOCAL statement_timeout = {timeout_ms:d}
"""


def tree_settings(timeout_ms: int) -> str:
    """GetTree's settings for its transaction, the timeout in milliseconds."""
    return _TREE_SETTINGS.format(timeout_ms=timeout_ms)


# After a GetTree read ran past its bound: whether the space's sessions answer at all
# (one row, by the primary key's prefix) within the probe's own bound. A database that
# does not (a Citus worker frozen or out of reach, a lock held on the table) is told
# apart from a tree too large to read in time.
PROBE_SPACE = "SELECT 1 FROM sessions WHERE space_id = $1 LIMIT 1"


# The whole forest, no depth limit ($2 row cap): the visible sessions of the space,
# one read of its index range in no order (the caller builds the pre-order, tops
# where `top_at` is set), columns as _TREE's. They are the forest itself, no walk
# needed (a walk costs a lookup per session: 3x the read of 10,000, measured): a
# provisional session has no children (CREATE_SESSION takes a visible parent), a
# hidden one is hidden with its whole subtree (LOCK_SUBTREE, LOCK_MISSED), so every
# visible session's ancestors are visible. A session whose parent was missing all
# the same would be left out of the answer by the walk (it hangs off no top).
_WHOLE = """
SELECT s.id::text, s.parent_id::text, s.depth, s.sibling_index, s.label, s.status,
       s.turn_count, s.source_session_id::text,
       CASE WHEN s.parent_id IS NULL THEN s.created_at END AS top_at
FROM sessions s
WHERE s.space_id = $1 AND s.provisional_until IS NULL{within}
LIMIT $2
"""

FOREST = _WHOLE.format(within="")

# A root's whole tree ($3 the root), as FOREST reads a space's: the visible sessions of
# the root (one root_id index range). No row when $3 is no visible root: the caller
# walks its subtree with SUBTREE then (a parent never changes, so root_id is exact).
ROOT_TREE = _WHOLE.format(within=" AND s.root_id = $3")

# Every root of the space and their subtrees, to $2 levels below the roots.
FOREST_TO_DEPTH = _TREE.format(top="s.parent_id IS NULL")

# $4: the top session.
SUBTREE = _TREE.format(top="s.id = $4")


PROBE_MIN_S = 1.0
"""The shortest bound of the probe that follows a GetTree read past its own (one row)."""


def to_tree_rows(rows: list[asyncpg.Record]) -> TreeRows:
    """The tree statements' rows split into the tops by (created_at, id) and the rest (hot:
    100,000s of rows). Ids are text: their order is the uuid order PostgreSQL sorts by."""
    tops: list[TreeRow] = []
    below: list[TreeRow] = []
    # Positional access, records kept as they came (a Record reads as a TreeRow): this
    # loop runs once per node.
    for row in cast(list[TreeRow], rows):
        (below if row[ROW_TOP_AT] is None else tops).append(row)
    tops.sort(key=itemgetter(ROW_TOP_AT, ROW_ID))
    return TreeRows(tops, below)


class TreeRowReads:
    """GetTree's reads, on the pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def tree_rows(
        self,
        space_id: uuid.UUID,
        root_id: uuid.UUID | None,
        max_depth: int | None,
        cap: int,
        *,
        timeout_s: float,
    ) -> TreeRows:
        """Up to `cap` rows of the forest (or of `root_id`'s subtree).

        Raises:
            TreeReadTooLong: the read ran past `timeout_s`.
        """

        async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await con.execute(tree_settings(max(1, int(timeout_s * 1000))))
            if max_depth is None:  # all of it: one read, no walk (FOREST)
                if root_id is None:
                    return list(await con.fetch(FOREST, space_id, cap))
                whole = await con.fetch(ROOT_TREE, space_id, cap, root_id)
                if whole:
                    return list(whole)
            if root_id is not None:  # not a root, or a depth limit: walk down from the top
                return list(await con.fetch(SUBTREE, space_id, max_depth, cap, root_id))
            return list(await con.fetch(FOREST_TO_DEPTH, space_id, max_depth, cap))

        try:
            rows = await in_transaction(self._pool, work)
        except asyncpg.QueryCanceledError as exc:
            probe_s = max(timeout_s, PROBE_MIN_S)
            if not await self._answers(space_id, probe_s):
                raise Unavailable(
                    f"the database did not answer a read of this space within {probe_s:g} s "
                    "(a database node slow or out of reach, or the table locked); "
                    "retry the call"
                ) from exc
            raise TreeReadTooLong(str(exc)) from exc
        return to_tree_rows(rows)

    async def _answers(self, space_id: uuid.UUID, timeout_s: float) -> bool:
        """Whether one row of the space's sessions is read within `timeout_s`."""

        async def probe(con: asyncpg.Connection) -> None:
            await con.execute(sql.statement_timeout(int(timeout_s * 1000)))
            await con.fetchval(PROBE_SPACE, space_id)

        try:
            await in_transaction(self._pool, probe)
        except (asyncpg.QueryCanceledError, Unavailable):
            return False
        return True
