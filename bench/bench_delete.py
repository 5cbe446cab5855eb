"""Delete benchmark: DeleteSubtree's hiding transaction phase by phase, its answer over
gRPC and the erasure's total, for subtrees of 50,000 and 200,000 sessions (#33 item 2).

Measured in one run (DESIGN §9, ratios only), on one database migrated to the end. For
each size a fresh 10-ary tree is seeded by COPY (each session with a record, a slot row
and a config, as a used tree has), then:

- phases: the hiding transaction's statements as the tree service runs them now
  (`SubtreeStatements.hide_subtree`, tree_service/erasure/repository.py: LOCK_SUBTREE,
  HIDE_SUBTREE or, past HIDE_PROBES_MAX, HIDE_SUBTREE_SET, HIDE_REFS, UNSOURCE, LOCK_MISSED,
  the erasure job's chunks, the SUBTREE_DELETED events, the commit), each timed, with the
  WAL the transaction wrote;
  the erasure job then clears that tree (not timed);
- answer: DeleteSubtree over gRPC on a second tree of the same size (the time until it
  answered), then the erasure job's batches until nothing is left (the total, from the
  call).

Each size after the first is then set against the first, measured in the same run: the
seconds per 1,000 sessions of the hide, the answer and the erasure, and their ratio
(1.00: linear in the subtree's size).

`--explain` also prints EXPLAIN (ANALYZE, BUFFERS, WAL) of the hide's UPDATE (rolled
back). The load average is printed beside each size: the machine is shared. Not part of
the test run.

    python bench/bench_delete.py [--sizes 50000,200000] [--explain]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts the
embedded PostgreSQL in a temporary folder and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, run_main

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.stored.events import Event, Outbox
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.tree.seed import fanout_tree, seed_topology  # the tests' COPY seeding, shared
from tree_service import create_app
from tree_service.app import create_service
from tree_service.config import TreeSettings
from tree_service.erasure.repository import (
    ERASURE_CHUNK,
    HIDE_PROBES_MAX,
    HIDE_REFS,
    HIDE_SUBTREE,
    HIDE_SUBTREE_SET,
    LOCK_MISSED,
    LOCK_SUBTREE,
    SUBTREE_EVENT_IDS,
    UNSOURCE,
    erasure_chunks,
)
from tree_service.service import TreeService

BELONGINGS = """
INSERT INTO records (space_id, session_id, seq, role, content, token_estimate, token_cumulative)
SELECT $1, s.id, 1, 'user', 'hello', 2, 2 FROM sessions s WHERE s.space_id = $1;
INSERT INTO session_slots (space_id, session_id, memory)
SELECT $1, s.id, 'm' FROM sessions s WHERE s.space_id = $1;
INSERT INTO session_configs (space_id, session_id, config)
SELECT $1, s.id, '{"system_prompt": "p"}' FROM sessions s WHERE s.space_id = $1;
"""


@dataclass(frozen=True, slots=True)
class Measured:
    """One size's seconds: the hide's phases summed, DeleteSubtree's answer, its erasure."""

    size: int
    hide: float
    answered: float
    erased: float


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
    pool: asyncpg.Pool, space: uuid.UUID, root: str, *, explain: bool
) -> tuple[list[tuple[str, float]], float]:
    """The hiding transaction of DeleteSubtree, statement by statement as the tree service
    runs it (`ErasureService.delete_subtree`, `SubtreeStatements.hide_subtree`): (phase,
    seconds) each, summed over the hide's rounds, and the MB of WAL it wrote. With `explain`,
    it prints the first round's UPDATE's EXPLAIN (ANALYZE, BUFFERS, WAL) and rolls back."""
    spent: dict[str, float] = {}
    async with pool.acquire() as con:
        hiding = con.transaction()
        await hiding.start()
        wal_from = await con.fetchval("SELECT pg_current_wal_insert_lsn()")
        began = time.perf_counter()

        def mark(name: str) -> None:
            nonlocal began
            now = time.perf_counter()
            spent[name] = spent.get(name, 0.0) + now - began
            began = now

        session = uuid.UUID(root)
        locked = list(await con.fetchval(LOCK_SUBTREE, space, session) or ())
        assert locked, "the root is not visible"
        mark("lock walk")
        rows: list[asyncpg.Record] = []
        rounds = 0
        batch = locked
        while batch:  # as `SubtreeStatements.hide_subtree` (its default probes_max)
            hide = HIDE_SUBTREE if len(batch) <= HIDE_PROBES_MAX else HIDE_SUBTREE_SET
            if explain:
                plan = await con.fetch(f"EXPLAIN (ANALYZE, BUFFERS, WAL) {hide}", space, batch)
                for line in plan:
                    text = line[0]
                    print("    " + (text[:110] + " ..." if "Filter:" in text else text))
                await hiding.rollback()
                return [], 0.0
            rows += await con.fetch(hide, space, batch)
            mark("update")
            await con.execute(HIDE_REFS, space, batch)
            mark("refs")
            await con.execute(UNSOURCE, space, batch)
            mark("unsource")
            batch = list(await con.fetchval(LOCK_MISSED, space, batch) or ())
            mark("lock missed")
            rounds += 1
        if rounds > 1:  # each round came sorted; sessions found late may be anywhere
            rows.sort(key=lambda r: (r["depth"], r["id"]))
        hidden = [r["id"] for r in rows]
        assert len(hidden) == len(locked), (len(hidden), len(locked))
        await con.executemany(ERASURE_CHUNK, erasure_chunks(space, session, rows))
        mark("chunks")
        outbox = Outbox()
        for start in range(0, len(hidden), SUBTREE_EVENT_IDS):
            chunk = tuple(hidden[start : start + SUBTREE_EVENT_IDS])
            outbox.add(space, Event("subtree_deleted", session, session_ids=chunk))
        await outbox.flush(cast(asyncpg.Connection, con))
        mark("events")
        wal = await con.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)", wal_from
        )
        await hiding.commit()
        mark("commit")
    return list(spent.items()), float(wal) / 1e6


async def erase_all(service: TreeService, pool: asyncpg.Pool, space: uuid.UUID) -> None:
    """Run the erasure job's batches until `space` holds no session (the server's own job,
    woken by a delete, may be erasing meanwhile: its batches count too)."""
    while True:
        await service.erasure.erase_hidden(wait=True)
        left = await pool.fetchval("SELECT count(*) FROM sessions WHERE space_id = $1", space)
        if left == 0:
            return
        await asyncio.sleep(0.05)


async def answer(
    stub: tree_pb2_grpc.SessionTreeStub,
    service: TreeService,
    pool: asyncpg.Pool,
    space: uuid.UUID,
    root: str,
) -> tuple[float, float, int]:
    """Seconds until DeleteSubtree answered, seconds until the job had erased it all, ids."""
    started = time.perf_counter()
    reply = await stub.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(space_id=str(space), session_id=root), timeout=600
    )
    answered = time.perf_counter() - started
    await erase_all(service, pool, space)
    return answered, time.perf_counter() - started, len(reply.deleted_ids)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split(" ", 3)[:3])


def _print_phases(marks: list[tuple[str, float]], wal: float) -> float:
    total = sum(seconds for _, seconds in marks)
    steps = "  ".join(f"{name} {seconds:.2f}" for name, seconds in marks)
    print(f"  hide: total {total:6.2f} s  WAL {wal:5.0f} MB | {steps}", flush=True)
    return total


def _print_ratios(measured: list[Measured]) -> None:
    """Seconds per 1,000 sessions at each size, and each size's against the first's."""
    base = measured[0]
    print(f"\nseconds per 1,000 sessions; ratios against {base.size:,} sessions (same run)")
    header = f"  {'size':>9}  {'hide':>7}  {'answered':>8}  {'erased':>7}"
    print(f"{header}   ratio hide/answered/erased")
    for m in measured:
        per = [1000 * t / m.size for t in (m.hide, m.answered, m.erased)]
        base_per = [1000 * t / base.size for t in (base.hide, base.answered, base.erased)]
        ratios = "/".join(f"{p / b:.2f}" for p, b in zip(per, base_per, strict=True))
        print(f"  {m.size:>9,}  {per[0]:7.3f}  {per[1]:8.3f}  {per[2]:7.3f}   {ratios}")


async def main(sizes: list[int], explain: bool) -> None:
    async with database() as dsn:
        settings = StelloSettings(database_url=dsn, db_pool_min_size=4, db_pool_max_size=8)
        async with create_pool(dsn, settings) as pool:
            keys = KeyStore(pool)
            # The bench drains the erasure itself (beside the server's own job, woken by
            # the delete) to time it.
            app = create_app(settings, pool, keys, TreeSettings(erase_interval_s=3600))
            service = create_service(pool)
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            measured: list[Measured] = []
            try:
                for size in sizes:
                    print(f"{size:,} sessions, load {_load()}", flush=True)
                    space, _, root = await seeded(pool, keys, size)
                    if explain:
                        print("  EXPLAIN of the hide's UPDATE (rolled back)")
                        await phases(pool, space, root, explain=True)
                    hide = _print_phases(*await phases(pool, space, root, explain=False))
                    await erase_all(service, pool, space)  # not timed: the next tree alone
                    space, key, root = await seeded(pool, keys, size)
                    async with open_channel(f"127.0.0.1:{port}", key=key) as channel:
                        stub = tree_pb2_grpc.SessionTreeStub(channel)
                        answered, total, count = await answer(stub, service, pool, space, root)
                    assert count == size, (count, size)
                    print(
                        f"  DeleteSubtree answered in {answered:.2f} s, erased by {total:.2f} s;"
                        f"  load {_load()}",
                        flush=True,
                    )
                    measured.append(Measured(size, hide, answered, total))
            finally:
                await shutdown(app, server, 1)  # the health monitor and the eraser too
            _print_ratios(measured)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="50000,200000", help="the first is the baseline")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    run_main(main([int(s) for s in args.sizes.split(",")], args.explain))
