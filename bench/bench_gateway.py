"""Gateway benchmark: Fork latency with its RPC count, ListSessionDigests over 10,000 sessions.

Measured in one run (DESIGN §9 targets: Fork p50 <= 5 ms; ListSessionDigests =
2 service calls per page, 10,000 sessions in 10 pages < 1 s):

- Fork NONE against its baseline, interleaved in rounds: bare grpc.aio
  storage, tree and gateway servers making the same RPCs in the same order
  and running the same SQL (bench/fork_baseline.py); beside them the
  machine's yardstick (bench/harness.py): how many empty unary RPCs a bare
  grpc.aio server answers per second, measured as DESIGN §9 quotes its
  machine's (2.2-2.5k/s), and one such call's p50;
- Fork p50/p99 at concurrency 1, for a NONE fork and an INHERIT fork of a
  20-record source, and CreateRoot, each server (storage, tree, gateway) in its
  own process (uvloop) and the client here;
- how many RPCs one Fork makes to each service, counted by the gateway's own
  clients on an in-process gateway over the same storage and tree processes;
- paging ListSessionDigests (page_size 1000) over 10,000 sessions seeded with
  COPY: calls per page and total time.

    python bench/bench_gateway.py [--forks 500] [--sessions 10000] [--rounds 5]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fork_baseline
from harness import (
    database,
    run_main,
    server_process,
    wait_for_stdin_close,
    yardstick,
    yardstick_lines,
    yardstick_rate,
)

from agent_gateway.app import GatewayClients
from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tree_service.app import create_app as tree_app

SOURCE_RECORDS = 20


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=10, db_pool_max_size=10, auth_cache_ttl_s=60
    )


# ---------------------------------------------------------------- servers


async def serve(kind: str, dsn: str, storage: str, tree: str) -> None:
    """Serve one service on a free port, print it, run until stdin closes."""
    if kind.startswith("bare-"):
        await serve_bare(kind, dsn, storage, tree)
        return
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        app: ServiceApp
        if kind == "storage":
            app = storage_app(settings, pool, keys)
        elif kind == "tree":
            app = tree_app(settings, pool, keys)
        else:
            config = GatewaySettings(storage_address=storage, tree_address=tree)
            app = gateway_app(settings, pool, keys, config)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await shutdown(app, server, 1)


async def serve_bare(kind: str, dsn: str, storage: str, tree: str) -> None:
    """Serve one bare server of the Fork baseline (bench/fork_baseline.py)."""
    async with AsyncExitStack() as stack:
        if kind == "bare-gateway":
            gateway = await stack.enter_async_context(fork_baseline.BareGateway(storage, tree))
            server, port = gateway.server()
        else:
            pool = await stack.enter_async_context(create_pool(dsn, _settings(dsn)))
            make = (
                fork_baseline.storage_server
                if kind == "bare-storage"
                else fork_baseline.tree_server
            )
            server, port = make(pool)
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await server.stop(1)


# ---------------------------------------------------------------- data


async def new_space(dsn: str) -> tuple[uuid.UUID, str]:
    """A fresh space and its tenant key."""
    async with create_pool(dsn, _settings(dsn)) as pool:
        tag = uuid.uuid4().hex[:8]
        created = await KeyStore(pool, 0).create_key(space=f"bench-{tag}", principal=f"bench-{tag}")
    assert created.space_id is not None
    return created.space_id, created.secret


async def seed_sessions(dsn: str, space_id: uuid.UUID, count: int) -> None:
    """`count` root sessions with memory, insight and system prompt, by COPY (never 10,000
    RPCs)."""
    start = datetime.now(UTC) - timedelta(hours=1)
    ids = [uuid.uuid4() for _ in range(count)]
    sessions = [
        (space_id, sid, sid, 0, 0, f"session {i}", start + timedelta(milliseconds=i))
        for i, sid in enumerate(ids)
    ]
    # Each with a ~2 KB system prompt too, as real agents have: a listing must not carry them.
    slots = [
        (space_id, sid, f"memory of {i} " * 8, f"insight {i}", f"system prompt {i}. " * 100)
        for i, sid in enumerate(ids)
    ]
    async with create_pool(dsn, _settings(dsn)) as pool, pool.acquire() as con:
        await con.copy_records_to_table(
            "sessions",
            records=sessions,
            columns=["space_id", "id", "root_id", "depth", "sibling_index", "label", "created_at"],
        )
        await con.copy_records_to_table(
            "session_slots",
            records=slots,
            columns=["space_id", "session_id", "memory", "insight", "system_prompt"],
        )
        await con.execute("ANALYZE sessions; ANALYZE session_slots")


# ---------------------------------------------------------------- measuring


def quantile(samples: list[float], q: float) -> float:
    """The q-quantile of `samples` (nearest rank), in ms."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def timed(call: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    """Run `call` `count` times in a row (after a warm-up); the durations in seconds."""
    for _ in range(min(20, count)):
        await call()
    durations = []
    for _ in range(count):
        began = time.perf_counter()
        await call()
        durations.append(time.perf_counter() - began)
    return durations


async def fork_scenarios(
    stub: Any, storage: str, space: str, metadata: Any, forks: int
) -> dict[str, list[float]]:
    """Latency of CreateRoot, a NONE fork and an INHERIT fork of a 20-record source."""
    reply = await stub.CreateRoot(
        agent_pb2.CreateRootRequest(space_id=space, system_prompt="bench"), metadata=metadata
    )
    source = reply.session.id
    records = [
        common_pb2.Record(
            role=common_pb2.RECORD_ROLE_USER if i % 2 == 0 else common_pb2.RECORD_ROLE_ASSISTANT,
            content=f"record {i} " * 10,
        )
        for i in range(SOURCE_RECORDS)
    ]
    async with open_channel(storage) as channel:
        await storage_pb2_grpc.SessionStorageStub(channel).AppendRecords(
            storage_pb2.AppendRecordsRequest(space_id=space, session_id=source, records=records),
            metadata=metadata,
        )

    def fork(context: common_pb2.ForkContext) -> Callable[[], Awaitable[Any]]:
        request = agent_pb2.ForkRequest(
            space_id=space, source_session_id=source, label="bench fork", context=context
        )
        return lambda: stub.Fork(request, metadata=metadata)

    root = agent_pb2.CreateRootRequest(space_id=space, label="bench root")
    return {
        "CreateRoot": await timed(lambda: stub.CreateRoot(root, metadata=metadata), forks),
        "Fork NONE": await timed(fork(common_pb2.FORK_CONTEXT_NONE), forks),
        f"Fork INHERIT ({SOURCE_RECORDS} records)": await timed(
            fork(common_pb2.FORK_CONTEXT_INHERIT), forks
        ),
    }


async def fork_versus_baseline(
    stub: Any,
    bare: Any,
    ping: Callable[[], Awaitable[Any]],
    space: str,
    metadata: Any,
    forks: int,
    rounds: int = 5,
) -> tuple[list[float], list[float], list[float]]:
    """Fork NONE through our gateway and through the bare chain, and the yardstick's
    PING, interleaved in rounds. Returns the three lists of durations in seconds."""
    root = agent_pb2.CreateRootRequest(space_id=space, system_prompt="bench")
    source = (await stub.CreateRoot(root, metadata=metadata)).session.id
    request = agent_pb2.ForkRequest(space_id=space, source_session_id=source, label="bench fork")
    ours: list[float] = []
    baseline: list[float] = []
    pings: list[float] = []
    per_round = max(1, forks // rounds)
    for _ in range(rounds):
        ours += await timed(lambda: stub.Fork(request, metadata=metadata), per_round)
        baseline += await timed(lambda: bare.Fork(request), per_round)
        pings += await timed(ping, per_round)
    return ours, baseline, pings


@dataclass
class CountingGateway:
    """An in-process gateway whose clients count the RPCs they make, and a stub on it."""

    clients: GatewayClients
    stub: Any
    last: Any = None
    """The reply of the last counted call."""

    async def count(self, call: Awaitable[Any]) -> dict[str, int]:
        """The RPCs `call` made, as ``service.Method``: count; its reply goes to `last`."""
        self.clients.storage.calls.clear()
        self.clients.tree.calls.clear()
        self.last = await call
        return {
            **{f"tree.{m}": n for m, n in self.clients.tree.calls.items()},
            **{f"storage.{m}": n for m, n in self.clients.storage.calls.items()},
        }


@asynccontextmanager
async def counting_gateway(
    dsn: str, storage: str, tree: str, key: str
) -> AsyncIterator[CountingGateway]:
    """A gateway in this process over the storage and tree processes, called as `key`."""
    settings = _settings(dsn)
    config = GatewaySettings(storage_address=storage, tree_address=tree)
    clients = GatewayClients.connect(config, settings)
    async with create_pool(dsn, settings) as pool:
        app = gateway_app(settings, pool, KeyStore(pool, 60), config, clients=clients)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        try:
            async with open_channel(f"127.0.0.1:{port}", key=key) as channel:
                yield CountingGateway(clients, agent_pb2_grpc.AgentGatewayStub(channel))
        finally:
            await shutdown(app, server, 0)


async def count_fork_rpcs(
    dsn: str, storage: str, tree: str, space: str, key: str
) -> dict[str, dict[str, int]]:
    """RPCs per operation by service and method, from an in-process gateway's clients."""
    counted: dict[str, dict[str, int]] = {}
    async with counting_gateway(dsn, storage, tree, key) as gateway:
        stub = gateway.stub
        source = (await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=space))).session.id
        await stub.Fork(
            agent_pb2.ForkRequest(
                space_id=space, source_session_id=source, label="x", prompt="hello"
            )
        )
        operations: dict[str, Any] = {
            "CreateRoot": agent_pb2.CreateRootRequest(space_id=space, system_prompt="s"),
            "Fork NONE": agent_pb2.ForkRequest(space_id=space, source_session_id=source, label="n"),
            "Fork INHERIT": agent_pb2.ForkRequest(
                space_id=space,
                source_session_id=source,
                label="i",
                context=common_pb2.FORK_CONTEXT_INHERIT,
            ),
        }
        for name, request in operations.items():
            call = stub.CreateRoot if name == "CreateRoot" else stub.Fork
            counted[name] = await gateway.count(call(request))
    return counted


async def digests_scenario(
    stub: Any, space: str, metadata: Any, rounds: int
) -> list[tuple[float, int, int]]:
    """Page through every digest at page_size 1000: (seconds, pages, digests) per round."""
    runs = []
    for _ in range(rounds):
        began = time.perf_counter()
        token, pages, seen = "", 0, 0
        while True:
            page = await stub.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=space, page_size=1000, page_token=token
                ),
                metadata=metadata,
            )
            pages += 1
            seen += len(page.digests)
            token = page.next_page_token
            if not token:
                break
        runs.append((time.perf_counter() - began, pages, seen))
    return runs


async def count_digest_rpcs(
    dsn: str, storage: str, tree: str, space: str, key: str
) -> tuple[int, dict[str, int]]:
    """Pages and RPCs of one full digest listing, from an in-process gateway's clients."""
    async with counting_gateway(dsn, storage, tree, key) as gateway:
        calls = await gateway.count(digests_scenario(gateway.stub, space, (), 1))
        [(_, pages, _)] = gateway.last
    return pages, calls


# ---------------------------------------------------------------- run


async def run(forks: int, sessions: int, rounds: int) -> None:
    """Start the three servers, measure, report."""
    async with database() as dsn, AsyncExitStack() as stack:
        storage = await stack.enter_async_context(server_process(__file__, "storage", dsn))
        tree = await stack.enter_async_context(server_process(__file__, "tree", dsn))
        gateway = await stack.enter_async_context(
            server_process(__file__, "gateway", dsn, storage, tree)
        )
        fork_space, fork_key = await new_space(dsn)
        digest_space, digest_key = await new_space(dsn)
        await seed_sessions(dsn, digest_space, sessions)
        bare_storage = await stack.enter_async_context(
            server_process(__file__, "bare-storage", dsn)
        )
        bare_tree = await stack.enter_async_context(server_process(__file__, "bare-tree", dsn))
        bare_gateway = await stack.enter_async_context(
            server_process(__file__, "bare-gateway", dsn, bare_storage, bare_tree)
        )
        channel = await stack.enter_async_context(open_channel(gateway))
        stub = agent_pb2_grpc.AgentGatewayStub(channel)
        bare = agent_pb2_grpc.AgentGatewayStub(
            await stack.enter_async_context(open_channel(bare_gateway))
        )
        ping = await stack.enter_async_context(yardstick())
        metadata = (("authorization", f"Bearer {fork_key}"),)

        print(f"Fork NONE against its baseline, {forks} calls each, interleaved (ms):")
        ours, baseline, pings = await fork_versus_baseline(
            stub, bare, ping, str(fork_space), metadata, forks
        )
        ours_p50, base_p50 = quantile(ours, 0.5), quantile(baseline, 0.5)
        for name, samples in (("ours", ours), ("bare chain (same RPCs, same SQL)", baseline)):
            p50, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
            print(f"  {name:<34} p50 {p50:6.2f}  p99 {p99:6.2f}")
        print(f"  ratio (bare p50 / ours p50): {base_p50 / ours_p50:.0%}")
        rate = await yardstick_rate(ping)
        for line in yardstick_lines("Fork NONE", ours_p50, base_p50, quantile(pings, 0.5), rate):
            print(line)

        print(f"Fork and CreateRoot, concurrency 1, {forks} calls each (ms):")
        latencies = await fork_scenarios(stub, storage, str(fork_space), metadata, forks)
        counts = await count_fork_rpcs(dsn, storage, tree, str(fork_space), fork_key)
        for name, samples in latencies.items():
            key = next(k for k in counts if name.startswith(k))
            rpcs = ", ".join(f"{m} {n}" for m, n in sorted(counts[key].items()))
            total = sum(counts[key].values())
            p50, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
            mean = statistics.fmean(samples) * 1000
            print(f"  {name:<30} p50 {p50:6.2f}  p99 {p99:6.2f}  mean {mean:6.2f}", end="")
            print(f"   RPCs {total}: {rpcs}")

        print(f"ListSessionDigests over {sessions} sessions, page_size 1000, {rounds} rounds:")
        runs = await digests_scenario(
            stub, str(digest_space), (("authorization", f"Bearer {digest_key}"),), rounds
        )
        pages, calls = await count_digest_rpcs(dsn, storage, tree, str(digest_space), digest_key)
        seconds = [r[0] for r in runs]
        median, best = statistics.median(seconds) * 1000, min(seconds) * 1000
        per_page = ", ".join(f"{m} {n / pages:g}" for m, n in sorted(calls.items()))
        print(f"  {runs[0][2]} digests in {runs[0][1]} pages: median {median:.0f} ms,", end="")
        print(f" best {best:.0f} ms; RPCs per page: {per_page}")
        print(f"(cpus: {os.cpu_count()}; client, three servers and PostgreSQL share them)")


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one service of it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument(
        "kind",
        choices=["storage", "tree", "gateway", "bare-storage", "bare-tree", "bare-gateway"],
    )
    serve_cmd.add_argument("dsn")
    serve_cmd.add_argument("storage", nargs="?", default="")
    serve_cmd.add_argument("tree", nargs="?", default="")
    parser.add_argument("--forks", type=int, default=500, help="calls per latency scenario")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="full digest listings")
    args = parser.parse_args()
    coroutine = (
        serve(args.kind, args.dsn, args.storage, args.tree)
        if args.command == "serve"
        else run(args.forks, args.sessions, args.rounds)
    )
    run_main(coroutine)


if __name__ == "__main__":
    main()
