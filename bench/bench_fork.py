"""Fork benchmark: Fork INHERIT at 0 to 100,000 records of source history (DESIGN §4.4, §9).

Measured in one run, beside Fork NONE of the same sources as the baseline:

- Fork INHERIT p50/p99 at concurrency 1 from roots of 0, 1,000, 10,000 and
  100,000 records of 200 characters (seeded with COPY, token columns counted
  by ``stello_recount_tokens``), the sizes interleaved round by round (the
  machine's speed drifts), and Fork NONE from the same roots;
- rows inserted per fork into records, record_segments and session_lineages
  (``n_tup_ins`` of pg_stat_user_tables, flushed by ending the services'
  connections around a batch of forks), per size.

Targets (issue #16): INHERIT at 100,000 <= 2x Fork NONE; rows per fork
independent of the history.

With ``--depths`` it measures chains of forks of forks instead (issue #34):
chains 1, 100, 1,000 and 2,000 deep (each level inherits all of its source's
records with storage's own fork statement and adds one record; built by SQL,
not RPCs, from a root whose records make every tip's history as long:
the longest depth + 60), then at the end of each, interleaved
round by round, Fork INHERIT, Send (the echo model) and ListRecords newest
50, p50/p99 and the ratio to depth 1; and rows inserted per Fork INHERIT.
Target: every ratio <= 1.5x at 2,000 and rows per fork bounded (no record
copied, at most the segment cap of segment rows) at every depth.

    python bench/bench_fork.py [--forks 100] [--rounds 5]
    python bench/bench_fork.py --depths [--depth-sizes 1,100,1000,2000] [--forks 50]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
import bench_gateway
from bench_gateway import new_space, quantile
from harness import database, run_main, server_process

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from storage_service.records.lineage import SEGMENT_CAP
from tests.support.history import CHAIN_TEXT, end_other_backends, fork_chain, seed_history

SIZES = (0, 1_000, 10_000, 100_000)
TABLES = ("records", "record_segments", "session_lineages")
INSERTS = "SELECT relname, n_tup_ins FROM pg_stat_user_tables WHERE relname = ANY($1::text[])"


async def seeded_root(dsn: str, stub: Any, space: str, metadata: Any, size: int) -> str:
    """A root with `size` records of 200 characters."""
    reply = await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=space), metadata=metadata)
    con = await asyncpg.connect(dsn)
    try:
        await seed_history(con, uuid.UUID(space), uuid.UUID(reply.session.id), size, recount=True)
    finally:
        await con.close()
    return str(reply.session.id)


async def forks(
    stub: Any,
    space: str,
    root: str,
    metadata: Any,
    count: int,
    context: common_pb2.ForkContext,
) -> list[float]:
    """`count` Forks of `root` with `context`; durations in seconds."""
    durations = []
    for i in range(count):
        request = agent_pb2.ForkRequest(
            space_id=space, source_session_id=root, label=f"fork {i}", context=context
        )
        began = time.perf_counter()
        await stub.Fork(request, metadata=metadata)
        durations.append(time.perf_counter() - began)
    return durations


async def inserted(con: asyncpg.Connection) -> dict[str, int]:
    """Rows inserted into the lineage tables so far (every other connection ended first)."""
    await end_other_backends(con)
    rows = await con.fetch(INSERTS, list(TABLES))
    return {row["relname"]: int(row["n_tup_ins"]) for row in rows}


async def rows_per_fork(
    dsn: str, stub: Any, space: str, roots: dict[int, str], metadata: Any, count: int
) -> dict[int, dict[str, float]]:
    """Rows inserted per Fork INHERIT, per size, over `count` forks each."""
    con = await asyncpg.connect(dsn)
    try:
        per_size: dict[int, dict[str, float]] = {}
        for size, root in roots.items():
            before = await inserted(con)
            await forks(stub, space, root, metadata, count, common_pb2.FORK_CONTEXT_INHERIT)
            after = await inserted(con)
            per_size[size] = {t: (after.get(t, 0) - before.get(t, 0)) / count for t in TABLES}
        return per_size
    finally:
        await con.close()


def line(name: str, samples: list[float], base: float | None) -> str:
    """One latency line (`samples` in seconds; `base`: Fork NONE's p50 in ms)."""
    p50, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
    ratio = f"  ({p50 / base:4.2f}x Fork NONE)" if base else ""
    return f"  {name:<30} p50 {p50:7.2f}  p99 {p99:7.2f} ms{ratio}"


async def run(count: int, rounds: int) -> None:
    """Start the three servers, seed, measure, report."""
    async with database() as dsn, AsyncExitStack() as stack:
        storage = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "storage", dsn)
        )
        tree = await stack.enter_async_context(server_process(bench_gateway.__file__, "tree", dsn))
        gateway = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "gateway", dsn, storage, tree)
        )
        space_id, key = await new_space(dsn)
        space = str(space_id)
        metadata = (("authorization", f"Bearer {key}"),)
        stub = agent_pb2_grpc.AgentGatewayStub(
            await stack.enter_async_context(open_channel(gateway))
        )
        began = time.perf_counter()
        roots = {size: await seeded_root(dsn, stub, space, metadata, size) for size in SIZES}
        print(
            f"seeded roots of {', '.join(f'{s:,}' for s in SIZES)} records "
            f"in {time.perf_counter() - began:.1f} s"
        )
        for size in SIZES:  # warm-up
            await forks(stub, space, roots[size], metadata, 3, common_pb2.FORK_CONTEXT_INHERIT)
        inherit: dict[int, list[float]] = {size: [] for size in SIZES}
        none: list[float] = []
        per_round = max(1, count // rounds)
        for _ in range(rounds):  # interleaved: the machine's speed drifts
            for size in SIZES:
                inherit[size] += await forks(
                    stub, space, roots[size], metadata, per_round, common_pb2.FORK_CONTEXT_INHERIT
                )
            none += await forks(
                stub, space, roots[SIZES[-1]], metadata, per_round, common_pb2.FORK_CONTEXT_NONE
            )
        base = quantile(none, 0.5)
        print(f"Fork at concurrency 1, {per_round * rounds} forks per line:")
        print(line(f"NONE from {SIZES[-1]:,} records", none, None))
        for size in SIZES:
            print(line(f"INHERIT from {size:>7,} records", inherit[size], base))
        ratio = quantile(inherit[SIZES[-1]], 0.5) / base
        verdict = "met" if ratio <= 2.0 else "NOT met"
        print(f"  target: INHERIT at {SIZES[-1]:,} <= 2x Fork NONE: {ratio:.2f}x, {verdict}")
        counted = await rows_per_fork(dsn, stub, space, roots, metadata, 20)
        print("Rows inserted per Fork INHERIT (20 forks per size):")
        for size, rows in counted.items():
            cells = "  ".join(f"{table} {rows[table]:.2f}" for table in TABLES)
            print(f"  {size:>7,} records: {cells}")
        # A source with no records gives no segment to inherit: the same from 1,000 up.
        same = len({tuple(rows.values()) for size, rows in counted.items() if size}) == 1
        verdict = "met" if same else "NOT met"
        print(f"  target: rows per fork the same at every history length > 0: {verdict}")


def chain_record(index: int) -> tuple[str, str]:
    """A root record like the chain's (the same text, so the same tokens)."""
    return ("user" if index % 2 == 0 else "assistant"), CHAIN_TEXT


async def chain_tip(
    dsn: str, stub: Any, space: str, metadata: Any, depth: int, history: int
) -> str:
    """The end of a chain of `depth` forks of forks (one record each) from a root of
    `history` - `depth` records of the chain's text: every tip has a history of `history`
    records and as many tokens, so what differs between the chains is their depth alone."""
    reply = await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=space), metadata=metadata)
    root = uuid.UUID(reply.session.id)
    con = await asyncpg.connect(dsn)
    try:
        await seed_history(con, uuid.UUID(space), root, history - depth, chain_record)
        tip = await fork_chain(con, uuid.UUID(space), root, depth)
        await con.execute("ANALYZE records, record_segments, session_lineages")
    finally:
        await con.close()
    return str(tip)


async def timed(call: Any, count: int) -> list[float]:
    """`count` awaits of `call()`; durations in seconds."""
    durations = []
    for _ in range(count):
        began = time.perf_counter()
        await call()
        durations.append(time.perf_counter() - began)
    return durations


async def run_depths(depths: tuple[int, ...], count: int, rounds: int) -> None:
    """Start the three servers, build the chains, measure, report."""
    async with database() as dsn, AsyncExitStack() as stack:
        storage = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "storage", dsn)
        )
        tree = await stack.enter_async_context(server_process(bench_gateway.__file__, "tree", dsn))
        gateway = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "gateway", dsn, storage, tree)
        )
        space_id, key = await new_space(dsn)
        space = str(space_id)
        metadata = (("authorization", f"Bearer {key}"),)
        stub = agent_pb2_grpc.AgentGatewayStub(
            await stack.enter_async_context(open_channel(gateway))
        )
        tips: dict[int, str] = {}
        history = max(depths) + 60
        print(f"every chain's tip has {history:,} records")
        for depth in depths:
            began = time.perf_counter()
            tips[depth] = await chain_tip(dsn, stub, space, metadata, depth, history)
            print(f"chain of {depth:,} forks built in {time.perf_counter() - began:.1f} s")

        def fork(tip: str) -> Any:
            request = agent_pb2.ForkRequest(
                space_id=space,
                source_session_id=tip,
                label="depth fork",
                context=common_pb2.FORK_CONTEXT_INHERIT,
            )
            return lambda: stub.Fork(request, metadata=metadata)

        def send(tip: str) -> Any:
            request = agent_pb2.SendRequest(space_id=space, session_id=tip, content="hello")
            return lambda: stub.Send(request, metadata=metadata)

        def newest(tip: str) -> Any:
            request = agent_pb2.ListRecordsRequest(
                space_id=space, session_id=tip, limit=50, newest_first=True
            )
            return lambda: stub.ListRecords(request, metadata=metadata)

        calls = {"Fork INHERIT": fork, "Send": send, "ListRecords newest 50": newest}
        for depth in depths:  # warm-up
            for make in calls.values():
                await timed(make(tips[depth]), 3)
        samples: dict[str, dict[int, list[float]]] = {n: {d: [] for d in depths} for n in calls}
        per_round = max(1, count // rounds)
        for _ in range(rounds):  # interleaved: the machine's speed drifts
            for depth in depths:
                for name, make in calls.items():
                    samples[name][depth] += await timed(make(tips[depth]), per_round)
        worst = 0.0
        for name, by_depth in samples.items():
            print(f"{name} at the end of a chain, {per_round * rounds} calls per line:")
            base = quantile(by_depth[depths[0]], 0.5)
            for depth, values in by_depth.items():
                p50, p99 = quantile(values, 0.5), quantile(values, 0.99)
                ratio = p50 / base
                if depth == depths[-1]:
                    worst = max(worst, ratio)
                print(
                    f"  depth {depth:>5,}  p50 {p50:7.2f}  p99 {p99:7.2f} ms"
                    f"  ({ratio:4.2f}x depth {depths[0]:,})"
                )
        verdict = "met" if worst <= 1.5 else "NOT met"
        print(
            f"  target: every p50 at depth {depths[-1]:,} <= 1.5x depth 1: {worst:.2f}x, {verdict}"
        )
        counted = await rows_per_fork(dsn, stub, space, tips, metadata, 20)
        print("Rows inserted per Fork INHERIT at the end of a chain (20 forks per depth):")
        for depth, rows in counted.items():
            cells = "  ".join(f"{table} {rows[table]:.2f}" for table in TABLES)
            print(f"  depth {depth:>5,}: {cells}")
        bounded = all(
            rows["records"] == 0 and rows["record_segments"] <= SEGMENT_CAP
            for rows in counted.values()
        )
        verdict = "met" if bounded else "NOT met"
        print(
            f"  target: rows per fork bounded at every depth (no record copied, at most "
            f"{SEGMENT_CAP} segment rows): {verdict}"
        )


def main() -> None:
    """Command line: run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--forks", type=int, default=100, help="forks per line")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--depths", action="store_true", help="chains of forks (issue #34)")
    parser.add_argument(
        "--depth-sizes", default="1,100,1000,2000", help="chain depths, comma-separated"
    )
    args = parser.parse_args()
    if args.depths:
        sizes = tuple(int(size) for size in args.depth_sizes.split(","))
        run_main(run_depths(sizes, args.forks, args.rounds))
    else:
        run_main(run(args.forks, args.rounds))


if __name__ == "__main__":
    main()
