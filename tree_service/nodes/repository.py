"""The nodes' SQL: a visible session's node, a level of them, the walks up a chain.

`NodeReads` runs each read on the pool (a walk in a transaction of its own, under
`WALK_PLANS`); `NodeStatements` runs the node reads a unit of work needs on its
connection (`tree_service.unit.TreeTx.nodes`).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import asyncpg

from stello.db.pool import fetch, in_transaction
from tree_service.models import STATUSES, Node, SessionFilter, Status, Summary, TreeEntry
from tree_service.nodes import listing
from tree_service.nodes.listing import LISTING_PLANS, PAIR_MATCHES, list_statement
from tree_service.sql import NODE_COLUMNS, UNLINKED_NODE_COLUMNS

GET_NODE = f"""
SELECT {NODE_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# GET_NODE without the children and refs (`without_links`).
GET_UNLINKED_NODE = f"""
SELECT {UNLINKED_NODE_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

# GetNode with include_config: the node and its stored config (NULL when never
# written) in one statement, so a joined view reads the tree once.
GET_NODE_WITH_CONFIG = f"""
SELECT {NODE_COLUMNS}, c.config,
       (SELECT jsonb_object_agg(m.key, m.value) FROM session_metadata m
        WHERE m.space_id = $1 AND m.session_id = s.id) AS metadata
FROM sessions s
LEFT JOIN session_configs c ON c.space_id = $1 AND c.session_id = s.id
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
"""

LIST_ROOTS = f"""
SELECT {NODE_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.parent_id IS NULL AND s.provisional_until IS NULL
ORDER BY s.created_at, s.id
"""

# $3: a session to leave out (GetSiblings), or NULL.
LIST_CHILDREN = f"""
SELECT {NODE_COLUMNS}
FROM sessions s
WHERE s.space_id = $1 AND s.parent_id = $2 AND s.provisional_until IS NULL
  AND ($3::uuid IS NULL OR s.id <> $3)
ORDER BY s.sibling_index
"""

# One row when the session is visible: its parent (NULL for a root).
VISIBLE_PARENT = """
SELECT parent_id
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""

# The walks up a chain (ANCESTRY, ANCESTOR_PAGE) read one row per step by primary
# key and carry every column they answer, so no join back to `sessions` follows
# them: a step is a LATERAL lookup with LIMIT 1, which the planner cannot turn
# into a hash join over the space, whatever its statistics say (a space
# bulk-loaded and never analyzed read all of its rows per GetAncestors). They
# run after WALK_PLANS, in the same transaction.

# The session (n = 0) then its ancestors, nearest first, as topology nodes.
ANCESTRY = f"""
WITH RECURSIVE s (n, id, parent_id, depth, sibling_index, label, status, source_session_id) AS (
    SELECT 0, v.id, v.parent_id, v.depth, v.sibling_index, v.label, v.status,
           v.source_session_id
    FROM sessions v
    WHERE v.space_id = $1 AND v.id = $2 AND v.provisional_until IS NULL
  UNION ALL
    SELECT s.n + 1, p.id, p.parent_id, p.depth, p.sibling_index, p.label, p.status,
           p.source_session_id
    FROM s
    CROSS JOIN LATERAL (
        SELECT a.id, a.parent_id, a.depth, a.sibling_index, a.label, a.status,
               a.source_session_id
        FROM sessions a
        WHERE a.space_id = $1 AND a.id = s.parent_id
        LIMIT 1
    ) p
)
SELECT {NODE_COLUMNS}
FROM s
ORDER BY s.n
"""

# ListAncestors: $2 where the walk starts (the session, or the last ancestor of
# the previous page: n = 0), $3 the ancestors to read (n = 1..$3), $4 the
# session itself, which must still be visible (else no row at all). A start
# other than the session must be of the session's tree and above it (a root
# and a depth checked by key: a token naming a session of another tree, or one
# not above the session, gives no row either; proving the start on the
# session's own branch would walk the pages before this one). A page reads its
# own rows only.
ANCESTOR_PAGE = """
WITH RECURSIVE chain (n, id, parent_id, depth, sibling_index, label, status, turn_count,
                      source_session_id) AS (
    SELECT 0, s.id, s.parent_id, s.depth, s.sibling_index, s.label, s.status, s.turn_count,
           s.source_session_id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
      AND EXISTS (SELECT 1 FROM sessions v
                  WHERE v.space_id = $1 AND v.id = $4 AND v.provisional_until IS NULL
                    AND (v.id = s.id OR (v.root_id = s.root_id AND v.depth > s.depth)))
  UNION ALL
    SELECT chain.n + 1, p.id, p.parent_id, p.depth, p.sibling_index, p.label, p.status,
           p.turn_count, p.source_session_id
    FROM chain
    CROSS JOIN LATERAL (
        SELECT a.id, a.parent_id, a.depth, a.sibling_index, a.label, a.status, a.turn_count,
               a.source_session_id
        FROM sessions a
        WHERE a.space_id = $1 AND a.id = chain.parent_id
        LIMIT 1
    ) p
    WHERE chain.n < $3
)
SELECT id, parent_id, depth, sibling_index, label, status, turn_count, source_session_id
FROM chain
ORDER BY n
"""

# Before a walk, in its transaction only (SET LOCAL): plans that read `sessions`
# by index and join by nested loop, so the children and refs of each node are
# index lookups too, however wrong the statistics (a parent_id that looks
# shared by the whole space would otherwise make each a scan of it). JIT off: before
# PostgreSQL 18 each disabled node a plan cannot avoid adds 10^10 to its cost, past
# jit_above_cost, and compiling costs more than the walk.
WALK_PLANS = """
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off;
SET LOCAL jit = off
"""

# The key ListAncestors tokens are signed with (global: one per deployment).
TOKEN_KEY = "SELECT secret FROM token_keys WHERE purpose = 'page_tokens'"


STATUS_OF: dict[str, Status] = {s: s for s in STATUSES}
"""A stored status as the models type it."""


def to_node(row: asyncpg.Record) -> Node:
    """A topology node from a row selected with the node columns."""
    return Node(
        id=row["id"],
        parent_id=row["parent_id"],
        children=tuple(row["children"]),
        refs=tuple(row["refs"]),
        depth=row["depth"],
        index=row["sibling_index"] or 0,
        label=row["label"],
        source_session_id=row["source_session_id"],
        status=STATUS_OF[row["status"]],
    )


def to_summary(row: asyncpg.Record) -> Summary:
    """A ListAll summary from a row of the listing statements."""
    return Summary(
        id=row["id"],
        parent_id=row["parent_id"],
        label=row["label"],
        status=STATUS_OF[row["status"]],
        turn_count=row["turn_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_active_at=row["last_active_at"],
        pinned=row["pinned"],
        metadata=row["metadata"] or {},
    )


class NodeReads:
    """The topology reads, each on the pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def node(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node | None:
        """A visible session's node, or None."""
        rows = await fetch(self._pool, GET_NODE, space_id, session_id)
        return to_node(rows[0]) if rows else None

    async def node_with_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, Any, dict[str, str]] | None:
        """A visible session's node, its stored config JSON (None when never written) and
        its metadata, or None, in one statement."""
        rows = await fetch(self._pool, GET_NODE_WITH_CONFIG, space_id, session_id)
        if not rows:
            return None
        return to_node(rows[0]), rows[0]["config"], rows[0]["metadata"] or {}

    async def roots(self, space_id: uuid.UUID) -> list[Node]:
        """Every visible root, by (created_at, id)."""
        return [to_node(r) for r in await fetch(self._pool, LIST_ROOTS, space_id)]

    async def ancestry(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The visible session then its ancestors nearest first; [] when not visible."""
        rows = await self._walk(ANCESTRY, space_id, session_id)
        return [to_node(r) for r in rows]

    async def _walk(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """The rows of a walk up a chain, planned under WALK_PLANS (see WALK_PLANS)."""

        async def walk(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await con.execute(WALK_PLANS)
            return list(await con.fetch(query, *args))

        return await in_transaction(self._pool, walk)

    async def visible(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Whether the session is visible (one probe of its key)."""
        return bool(await fetch(self._pool, VISIBLE_PARENT, space_id, session_id))

    async def token_key(self) -> bytes:
        """The key page tokens are signed with (migration 0031: one per deployment)."""
        rows = await fetch(self._pool, TOKEN_KEY)
        if not rows:  # the row is made by the migration that makes the table
            raise RuntimeError("token_keys has no 'page_tokens' row: run `stello migrate`")
        return cast(bytes, rows[0]["secret"])

    async def ancestor_page(
        self, space_id: uuid.UUID, session_id: uuid.UUID, start: uuid.UUID, limit: int
    ) -> list[TreeEntry] | None:
        """`start` then up to `limit` of its ancestors, nearest first; None when the session
        is not visible, or `start` is not it nor a visible session of its tree above it."""
        rows = await self._walk(ANCESTOR_PAGE, space_id, start, limit, session_id)
        if not rows:
            return None
        return [
            TreeEntry(
                r["id"],
                r["parent_id"],
                r["depth"],
                r["sibling_index"] or 0,
                r["label"],
                STATUS_OF[r["status"]],
                r["turn_count"],
                r["source_session_id"],
            )
            for r in rows
        ]

    async def summaries(
        self,
        space_id: uuid.UUID,
        status: Status | None,
        filters: SessionFilter,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None,
    ) -> list[Summary]:
        """Up to `limit` visible sessions that pass `status` and `filters`, by (created_at,
        id), after the key `after` (tree_service.nodes.listing: each filter an index range)."""
        if len(filters.metadata) > 1:
            filters = await self._rarest_first(space_id, filters, 2 * limit)
        query, args = list_statement(space_id, status, filters, limit, after)
        if status is None and filters == SessionFilter():
            rows = await fetch(self._pool, query, *args)
        else:

            async def planned(con: asyncpg.Connection) -> list[asyncpg.Record]:
                await con.execute(LISTING_PLANS)
                return list(await con.fetch(query, *args))

            rows = await in_transaction(self._pool, planned)
        return [to_summary(r) for r in rows]

    async def _rarest_first(
        self, space_id: uuid.UUID, filters: SessionFilter, cap: int
    ) -> SessionFilter:
        """`filters` with its metadata pairs ordered by how many sessions hold each (counted
        up to `cap`), the rarest first: the listing is driven by the first."""
        counts = []
        for key, value in filters.metadata:
            rows = await fetch(self._pool, PAIR_MATCHES, space_id, key, value, cap)
            counts.append(int(rows[0][0]))
        order = sorted(range(len(counts)), key=counts.__getitem__)
        return replace(filters, metadata=tuple(filters.metadata[i] for i in order))

    async def by_prefix(
        self, space_id: uuid.UUID, low: uuid.UUID, high: uuid.UUID, limit: int
    ) -> list[Summary]:
        """Up to `limit` visible sessions with ids in [low, high], by id."""
        rows = await fetch(self._pool, listing.RESOLVE_PREFIX, space_id, low, high, limit)
        return [to_summary(r) for r in rows]


class NodeStatements:
    """The node reads of one unit of work, on its connection."""

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def node(
        self, space_id: uuid.UUID, session_id: uuid.UUID, *, linked: bool = True
    ) -> Node | None:
        """A visible session's node (without its children and refs unless `linked`), or
        None."""
        query = GET_NODE if linked else GET_UNLINKED_NODE
        row = await self._con.fetchrow(query, space_id, session_id)
        return to_node(row) if row else None

    async def visible_parent(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool, uuid.UUID | None]:
        """(visible, parent_id) of a session."""
        row = await self._con.fetchrow(VISIBLE_PARENT, space_id, session_id)
        return (True, row["parent_id"]) if row else (False, None)

    async def children(
        self, space_id: uuid.UUID, parent_id: uuid.UUID, without: uuid.UUID | None = None
    ) -> list[Node]:
        """The visible children of a session by index, `without` left out."""
        rows = await self._con.fetch(LIST_CHILDREN, space_id, parent_id, without)
        return [to_node(r) for r in rows]
