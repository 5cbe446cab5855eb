"""Delete benchmark: where DeleteSubtree's hiding transaction spends its time, before and
after migration 0025 (#33 item 2), for subtrees of 50,000 and 200,000 sessions.

Measured in one run (DESIGN §9, ratios only), on one server holding two databases: one
migrated up to 0024 (every index of `sessions` whole: the hide writes each hidden row
into all 16) and one migrated to the end (the read indexes hold visible rows only). For
each size a fresh 10-ary tree is seeded by COPY in each (each session with a record, a
slot row and a config, as a used tree has), then:

- phases, in each database: the hiding transaction's statements as the tree service
  runs them (tree_service.sql: LOCK_SUBTREE, HIDE_SUBTREE, HIDE_REFS, UNSOURCE,
  LOCK_MISSED, the SUBTREE_DELETED events, the commit), each timed, with the WAL the
  transaction wrote;
- answer, in the migrated database: DeleteSubtree over gRPC on a second tree (the
  time until it answered), then the erasure job's batches until nothing is left.

`--explain` also prints EXPLAIN (ANALYZE, BUFFERS, WAL) of the hide's UPDATE in each
database (rolled back). The load average is printed beside each size: the machine is
shared. Not part of the test run.

    python bench/bench_delete.py [--sizes 50000,200000] [--explain]

Uses STELLO_BENCH_DATABASE_URL when set (a server where it may create a database), else
starts the embedded PostgreSQL in a temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, run_main

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db import create_pool
from stello.events import Event, Outbox
from stello.migrate import migrate
from stello.server import create_server
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.tree.seed import fanout_tree, seed_topology  # the tests' COPY seeding, shared
from tree_service import create_app, sql
from tree_service.app import create_service
from tree_service.config import TreeSettings
from tree_service.repository import SUBTREE_EVENT_IDS

BEFORE_0025 = "0024_segments_from_their_first_row"

# The hide's UPDATE before this change: the ids sorted in Python.
OLD_HIDE = f"""
UPDATE sessions
SET provisional_until = {sql.ERASING}
WHERE space_id = $1 AND id = ANY ($2::uuid[])
RETURNING id, depth
"""

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


async def phases(
    pool: asyncpg.Pool, space: uuid.UUID, root: str, *, explain: bool, old: bool
) -> tuple[list[tuple[str, float]], float]:
    """The hiding transaction of DeleteSubtree, statement by statement as the tree service
    runs it: (phase, seconds) each, and the MB of WAL it wrote. With `explain`, it prints
    the UPDATE's EXPLAIN (ANALYZE, BUFFERS, WAL) and rolls back; `old` runs the hide as
    it was before the change (OLD_HIDE, the ids sorted in Python)."""
    marks: list[tuple[str, float]] = []
    async with pool.acquire() as con:
        hiding = con.transaction()
        await hiding.start()
        wal_from = await con.fetchval("SELECT pg_current_wal_insert_lsn()")
        began = time.perf_counter()

        def mark(name: str) -> None:
            nonlocal began
            now = time.perf_counter()
            marks.append((name, now - began))
            began = now

        session = uuid.UUID(root)
        locked = list(await con.fetchval(sql.LOCK_SUBTREE, space, session))
        mark("lock walk")
        if old:
            hide = OLD_HIDE
        else:  # as `TreeTx.hide_subtree` chooses
            probes = len(locked) <= sql.HIDE_PROBES_MAX
            hide = sql.HIDE_SUBTREE if probes else sql.HIDE_SUBTREE_SET
        if explain:
            plan = await con.fetch(f"EXPLAIN (ANALYZE, BUFFERS, WAL) {hide}", space, locked)
            for line in plan:
                text = line[0]
                print("    " + (text[:110] + " ..." if "Filter:" in text else text))
            rows: list[asyncpg.Record] = []
        else:
            rows = await con.fetch(hide, space, locked)
        mark("update")
        await con.execute(sql.HIDE_REFS, space, locked)
        mark("refs")
        await con.execute(sql.UNSOURCE, space, locked)
        mark("unsource")
        await con.fetchval(sql.LOCK_MISSED, space, locked)
        mark("lock missed")
        if old:
            rows = sorted(rows, key=lambda r: (r["depth"], r["id"]))
        hidden = [r["id"] for r in rows]
        outbox = Outbox()
        for start in range(0, len(hidden), SUBTREE_EVENT_IDS):
            chunk = tuple(hidden[start : start + SUBTREE_EVENT_IDS])
            outbox.add(space, Event("subtree_deleted", session, session_ids=chunk))
        await outbox.flush(cast(asyncpg.Connection, con))
        mark("events")
        wal = await con.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)", wal_from
        )
        if explain:
            await hiding.rollback()
        else:
            await hiding.commit()
        mark("commit")
    return marks, float(wal) / 1e6


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


async def older_schema(dsn: str) -> str:
    """A database beside `dsn`'s on its server, migrated up to BEFORE_0025: its DSN."""
    name = "stello_bench_delete_0024"
    con = await asyncpg.connect(dsn)
    try:
        await con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await con.execute(f'CREATE DATABASE "{name}"')
    finally:
        await con.close()
    parts = urlsplit(dsn)
    older = urlunsplit(parts._replace(path=f"/{name}"))
    con = await asyncpg.connect(older)
    try:
        await migrate(con, until=BEFORE_0025)
    finally:
        await con.close()
    return older


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _print_phases(label: str, marks: list[tuple[str, float]], wal: float) -> float:
    total = sum(seconds for _, seconds in marks)
    steps = "  ".join(f"{name} {seconds:.2f}" for name, seconds in marks)
    print(f"  {label:<13} total {total:6.2f} s  WAL {wal:5.0f} MB | {steps}", flush=True)
    return total


async def main(sizes: list[int], explain: bool) -> None:
    async with database() as dsn:
        older_dsn = await older_schema(dsn)
        settings = StelloSettings(database_url=dsn, db_pool_min_size=4, db_pool_max_size=8)
        async with (
            create_pool(dsn, settings) as pool,
            create_pool(older_dsn, settings) as older_pool,
        ):
            keys, older_keys = KeyStore(pool), KeyStore(older_pool)
            # The bench drains the erasure itself (behind the server's own job, woken by
            # the delete) to time it.
            app = create_app(settings, pool, keys, TreeSettings(erase_interval_s=3600))
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            try:
                for size in sizes:
                    print(f"{size:,} sessions, load {_load()}", flush=True)
                    totals = {}
                    for label, where, store, old in (
                        ("0024 (before)", older_pool, older_keys, True),
                        ("0025 (after)", pool, keys, False),
                    ):
                        space, _, root = await seeded(where, store, size)
                        if explain:
                            print(f"  {label}: EXPLAIN of the hide's UPDATE (rolled back)")
                            await phases(where, space, root, explain=True, old=old)
                        totals[label] = _print_phases(
                            label, *await phases(where, space, root, explain=False, old=old)
                        )
                    space, key, root = await seeded(pool, keys, size)
                    async with open_channel(f"127.0.0.1:{port}", key=key) as channel:
                        stub = tree_pb2_grpc.SessionTreeStub(channel)
                        answered, total, count = await after(stub, pool, space, root)
                    assert count == size
                    before, now = totals.values()
                    print(
                        f"  hide after/before {now / before:.2f};  DeleteSubtree (0025) "
                        f"answered in {answered:.2f} s, erased by {total:.2f} s;"
                        f"  load {_load()}",
                        flush=True,
                    )
            finally:
                await server.stop(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="50000,200000")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    run_main(main([int(s) for s in args.sizes.split(",")], args.explain))
