"""Large topologies written straight into the database with COPY (never 100,000 RPCs)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

COLUMNS = ["space_id", "id", "parent_id", "root_id", "depth", "sibling_index", "label"]

STAMPED = [*COLUMNS, "created_at", "updated_at", "last_active_at"]

FIRST_ROWS = 1000
"""`seed_topology` copies this many rows before the first ANALYZE (and the rest after)."""


async def seed_topology(
    pool: asyncpg.Pool, space_id: uuid.UUID, parents: Sequence[int | None]
) -> list[uuid.UUID]:
    """COPY one visible session per entry; `parents[i]` is the position of i's parent (< i)."""
    ids = [uuid.uuid4() for _ in parents]
    depth: list[int] = []
    root: list[uuid.UUID] = []
    next_index: dict[int, int] = {}
    rows = []
    for i, parent in enumerate(parents):
        if parent is None:
            depth.append(0)
            root.append(ids[i])
            index = 0
        else:
            depth.append(depth[parent] + 1)
            root.append(root[parent])
            index = next_index.get(parent, 0)
            next_index[parent] = index + 1
        rows.append(
            (
                space_id,
                ids[i],
                None if parent is None else ids[parent],
                root[i],
                depth[i],
                index,
                f"n{i}",
            )
        )
    async with pool.acquire() as con:
        # One time for every row, as one COPY gave them (its transaction's now()): the
        # roots of one seeding are ordered by id alone, and are older than what comes after.
        stamp = await con.fetchval("SELECT now()")
        stamped = [(*row, stamp, stamp, stamp) for row in rows]
        # A few rows first, then statistics, then the rest. The planner takes a table's
        # rows to be its density at the last VACUUM or ANALYZE (rows per page) times its
        # pages now: a table emptied and vacuumed keeps its pages at a density of zero, so
        # it stays "empty" however much is copied in, and the COPY's checks are planned for
        # an empty table (the 200,000-session tree of bench/bench_delete.py, after a first
        # tree was erased: the COPY ran for over 30 minutes; now seconds). A test's own
        # database, never vacuumed, is unaffected.
        for part in (stamped[:FIRST_ROWS], stamped[FIRST_ROWS:]):
            if part:
                await con.copy_records_to_table("sessions", records=part, columns=STAMPED)
                # As after any bulk load: fresh statistics invalidate plans cached while
                # the table was tiny (a cached seq-scan foreign-key check makes a
                # 10,000-row subtree delete take seconds instead of a quarter of one).
                await con.execute("ANALYZE sessions")
    return ids


def chain(length: int) -> list[int | None]:
    """A single line: each session the child of the one before."""
    return [None, *range(length - 1)]


def fanout_tree(size: int, fanout: int) -> list[int | None]:
    """A complete `fanout`-ary tree of `size` sessions in breadth-first positions."""
    return [None, *((i - 1) // fanout for i in range(1, size))]
