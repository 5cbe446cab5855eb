"""What a HOT hide would cost: DeleteSubtree's hiding UPDATE as it is, against an update
of a column no index names, on full pages and on half-full ones (#33 item 2, a design
measured before it is built).

DeleteSubtree hides a subtree by setting `provisional_until` on each of its sessions
(tree_service/erasure/repository.py). That column is in index predicates (migration 0025),
so no such update is HOT: each hidden session is a new heap tuple and an entry in the
primary key, `sessions_parent` and `sessions_erasing` (the read indexes leave it out).
Answering a delete in about the same time at any size needs the hide's per-session write
to be as small as it can be: one heap tuple on the same page, no index entry (a HOT
update). That needs a column no index names (key, expression or predicate) and room on
the page for the new version.

One 10-ary tree of `--size` sessions (default 200,000) is seeded by COPY as
bench/bench_delete.py seeds it, then, each in a transaction rolled back:

- current: LOCK_SUBTREE, then HIDE_SUBTREE_SET (the statements the tree service runs);
- hot, full pages: `UPDATE ... SET hidden = true` of the same ids, a column added here
  that no index names, on the pages as COPY filled them (fillfactor 100);
- hot, half-full pages: the same after `fillfactor = 50` and a rewrite (VACUUM FULL).

Each prints its seconds, its WAL and how many of its updates were HOT, and its update's
time against the current one's (same run). What it showed here (2 cores, embedded
PostgreSQL 15): current 0.96 s lock + 3.91 s update, 150 MB WAL; full pages 12.55 s,
502 MB, no update HOT (each new version on another page, in every index: worse than
now); half-full pages 1.02 s, 16 MB, every update HOT. So a HOT hide pays only with room
kept on every page (fillfactor, and a rewrite of the pages written before it), and only if
no index names the marker: the read indexes' predicates, `sessions_provisional` (the
sweep's) and `sessions_erasing` (the job's) would have to go or move to other tables.

It alters the schema, so it always runs on its own embedded PostgreSQL (never on
STELLO_BENCH_DATABASE_URL). Not part of the test run.

    python bench/bench_hide_hot.py [--size 200000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import cast

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_delete import seeded
from harness import database, run_main

from stello.auth import KeyStore
from stello.db.pool import create_pool
from stello.settings import StelloSettings
from tree_service.erasure.repository import HIDE_SUBTREE_SET, LOCK_SUBTREE

# The subtree's ids, read and not locked.
WALK = """
WITH RECURSIVE subtree (id) AS (
    SELECT s.id FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
  UNION ALL
    SELECT c.id FROM subtree
    CROSS JOIN LATERAL (
        SELECT c.id FROM sessions c
        WHERE c.space_id = $1 AND c.parent_id = subtree.id OFFSET 0
    ) c
)
SELECT array_agg(id) FROM subtree
"""
HOT_HIDE = "UPDATE sessions SET hidden = true WHERE space_id = $1 AND id = ANY ($2::uuid[])"
HOT_COUNT = "SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'sessions'"


async def timed(con: asyncpg.Connection, label: str, sql: str, *args: object) -> float:
    """Run `sql`, print its seconds and WAL; its seconds."""
    wal_from = await con.fetchval("SELECT pg_current_wal_insert_lsn()")
    began = time.perf_counter()
    await con.execute(sql, *args)
    seconds = time.perf_counter() - began
    wal = await con.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)", wal_from)
    print(f"    {label:<8} {seconds:6.2f} s  WAL {float(wal) / 1e6:5.0f} MB", flush=True)
    return seconds


async def variant(con: asyncpg.Connection, name: str, space: uuid.UUID, root: uuid.UUID) -> float:
    """One way of hiding the tree, rolled back: its update's seconds."""
    print(f"  {name}", flush=True)
    hiding = con.transaction()
    await hiding.start()
    try:
        ids = await con.fetchval(WALK, space, root)
        if name == "current":
            await timed(con, "lock", LOCK_SUBTREE, space, root)
            seconds = await timed(con, "update", HIDE_SUBTREE_SET, space, ids)
        else:
            seconds = await timed(con, "update", HOT_HIDE, space, ids)
        print(f"    HOT updates: {await con.fetchval(HOT_COUNT)} of {len(ids):,}", flush=True)
        return seconds
    finally:
        await hiding.rollback()


async def main(size: int) -> None:
    os.environ.pop("STELLO_BENCH_DATABASE_URL", None)  # it alters the schema: its own server
    async with database() as dsn:
        settings = StelloSettings(database_url=dsn, db_pool_min_size=1, db_pool_max_size=2)
        async with create_pool(dsn, settings) as pool:
            print(f"{size:,} sessions", flush=True)
            space, _, root_text = await seeded(pool, KeyStore(pool), size)
            root = uuid.UUID(root_text)
            async with pool.acquire() as proxy:
                con = cast(asyncpg.Connection, proxy)
                current = await variant(con, "current", space, root)
                await con.execute("ALTER TABLE sessions ADD COLUMN hidden boolean")
                full = await variant(con, "hot, full pages", space, root)
                await con.execute("ALTER TABLE sessions SET (fillfactor = 50)")
                await con.execute("VACUUM FULL sessions")
                await con.execute("ANALYZE sessions")
                half = await variant(con, "hot, half-full pages", space, root)
    print("\nupdate's seconds against the current hide's (same run)")
    for name, seconds in (("full pages", full), ("half-full pages", half)):
        print(f"  {name:<16} {seconds / current:5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=200_000)
    run_main(main(parser.parse_args().size))
