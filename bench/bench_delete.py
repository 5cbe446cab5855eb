"""Delete benchmark: a subtree of 1,000 / 20,000 / 200,000 sessions, before and after #33.

Measured in one run (DESIGN §9, ratios only): for each size, a fresh 10-ary tree is
seeded by COPY (each session with a record, a slot row and a config, as a used tree
has) and deleted twice over:

- before: the erasure as it was, one transaction that re-walks the subtree three
  times (LOCK_SUBTREE, RELEASE_SUBTREE, DELETE_SUBTREE) and deletes every row in it;
- after: the tree service's DeleteSubtree over gRPC (one transaction hides the
  subtree: the answer), then the erasure job's batches until nothing is left.

Prints, per size, the answer time of each, their ratio (after / before), and how
long the background erasure took. Not part of the test run.

    python bench/bench_delete.py [--sizes 1000,20000,200000]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts the
embedded PostgreSQL in a temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, run_main

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db import create_pool
from stello.server import create_server
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.tree.seed import fanout_tree, seed_topology  # the tests' COPY seeding, shared
from tree_service import create_app
from tree_service.app import create_service
from tree_service.config import TreeSettings

# The erasure before #33 (tree_service/sql.py at the time), run as it ran: one
# transaction, the subtree walked by each statement.
_SUBTREE = """
WITH RECURSIVE subtree (id) AS (
    SELECT s.id FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
  UNION ALL
    SELECT c.id FROM subtree JOIN sessions c ON c.space_id = $1 AND c.parent_id = subtree.id
)"""
BEFORE = (
    f"""{_SUBTREE}
SELECT count(*) FROM (SELECT s.id FROM sessions s JOIN subtree ON s.space_id = $1
                      AND s.id = subtree.id FOR UPDATE OF s) locked""",
    f"""{_SUBTREE}
SELECT stello_release_records($1, (SELECT array_agg(id) FROM subtree), NULL)""",
    """
WITH RECURSIVE subtree (id, level) AS (
    SELECT s.id, 0 FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
  UNION ALL
    SELECT c.id, subtree.level + 1
    FROM subtree JOIN sessions c ON c.space_id = $1 AND c.parent_id = subtree.id
), unsourced AS (
    UPDATE sessions f SET source_session_id = NULL FROM subtree
    WHERE f.space_id = $1 AND f.source_session_id = subtree.id
      AND NOT EXISTS (SELECT FROM subtree gone WHERE gone.id = f.id)
), erased AS (
    DELETE FROM sessions s USING subtree WHERE s.space_id = $1 AND s.id = subtree.id
    RETURNING s.id, subtree.level
)
SELECT id FROM erased ORDER BY level, id""",
)

BELONGINGS = """
INSERT INTO records (space_id, session_id, seq, role, content, token_estimate, token_cumulative)
SELECT $1, s.id, 1, 'user', 'hello', 2, 2 FROM sessions s WHERE s.space_id = $1;
INSERT INTO session_slots (space_id, session_id, memory)
SELECT $1, s.id, 'm' FROM sessions s WHERE s.space_id = $1;
INSERT INTO session_configs (space_id, session_id, config)
SELECT $1, s.id, '{"system_prompt": "p"}' FROM sessions s WHERE s.space_id = $1;
"""


async def seeded(pool: asyncpg.Pool, keys: KeyStore, size: int) -> tuple[uuid.UUID, str, str]:
    """A space holding one 10-ary tree of `size` sessions with their rows: (space, key, root)."""
    created = await keys.create_key(space=f"bench-delete-{uuid.uuid4().hex[:8]}")
    assert created.space_id is not None
    ids = await seed_topology(pool, created.space_id, fanout_tree(size, 10))
    async with pool.acquire() as con:
        for statement in BELONGINGS.strip().split(";\n"):
            await con.execute(statement.replace("$1", f"'{created.space_id}'::uuid"))
        await con.execute("VACUUM (ANALYZE)")
    return created.space_id, created.secret, str(ids[0])


async def before(pool: asyncpg.Pool, space: uuid.UUID, root: str) -> float:
    """Seconds of the old one-transaction erasure."""
    started = time.perf_counter()
    async with pool.acquire() as con, con.transaction():
        for statement in BEFORE:
            await con.fetch(statement, space, uuid.UUID(root))
    return time.perf_counter() - started


async def after(
    stub: tree_pb2_grpc.SessionTreeStub, pool: asyncpg.Pool, space: uuid.UUID, root: str
) -> tuple[float, float, int]:
    """Seconds until DeleteSubtree answered, seconds until the job had erased it all, ids."""
    started = time.perf_counter()
    reply = await stub.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(space_id=str(space), session_id=root), timeout=600
    )
    answered = time.perf_counter() - started
    service = create_service(pool)
    while await service.erase_hidden(wait=True):
        pass
    left = await pool.fetchval("SELECT count(*) FROM sessions WHERE space_id = $1", space)
    assert left == 0, left
    return answered, time.perf_counter() - started, len(reply.deleted_ids)


async def main(sizes: list[int]) -> None:
    async with database() as dsn:
        settings = StelloSettings(database_url=dsn, db_pool_min_size=4, db_pool_max_size=8)
        async with create_pool(dsn, settings) as pool:
            keys = KeyStore(pool)
            # The bench drains the erasure itself (behind the server's own job, woken by
            # the delete) to time it.
            app = create_app(settings, pool, keys, TreeSettings(erase_interval_s=3600))
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            print("size      before s  after (answer) s  ratio  erasure after s")
            try:
                for size in sizes:
                    space, _, root = await seeded(pool, keys, size)
                    old = await before(pool, space, root)
                    space, key, root = await seeded(pool, keys, size)
                    async with open_channel(f"127.0.0.1:{port}", key=key) as channel:
                        stub = tree_pb2_grpc.SessionTreeStub(channel)
                        answered, total, count = await after(stub, pool, space, root)
                    assert count == size
                    print(
                        f"{size:<9,} {old:8.2f}  {answered:16.2f}  {answered / old:5.2f}"
                        f"  {total:15.2f}",
                        flush=True,
                    )
            finally:
                await server.stop(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,20000,200000")
    args = parser.parse_args()
    run_main(main([int(s) for s in args.sizes.split(",")]))
