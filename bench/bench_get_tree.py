"""GetTree benchmark: a 10,000-node tree, direct and through the gateway, this code against another.

Measured in one run, interleaved in rounds (DESIGN §9: the gateway's GetTree
<= 1.2x the direct tree call; issue #35: >= 2x the throughput of before):

- GetTree of a 10-ary tree of `--nodes` sessions (seeded with COPY), one call at a
  time, straight to the tree service and through the gateway, each server in its
  own process (uvloop), the client here;
- for each: calls per second, p50/p99, and the servers' CPU per call (the tree's,
  and the gateway's for the gateway route), read from /proc;
- with ``--before DIR`` (a checkout of another commit, e.g. ``git worktree add
  /tmp/before HEAD~3``), the same servers run from DIR's code beside ours, in
  the same rounds, and the ratios ours / before are printed.

    python bench/bench_get_tree.py [--nodes 10000] [--seconds 3] [--rounds 4] [--before DIR]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A server of `--before` runs another checkout's code: STELLO_BENCH_SOURCE names it.
sys.path.insert(0, os.environ.get("STELLO_BENCH_SOURCE") or str(Path(__file__).parents[1]))

from harness import cpu_seconds, database, run_main, served_process, wait_for_stdin_close

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.tree.seed import seed_topology


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=2, db_pool_max_size=4, auth_cache_ttl_s=60
    )


async def serve(kind: str, dsn: str, tree: str) -> None:
    """Serve the tree or the gateway (over `tree`) on a free port until stdin closes."""
    from agent_gateway.app import create_app as gateway_app
    from agent_gateway.config import GatewaySettings
    from tree_service.app import create_app as tree_app

    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        app: ServiceApp
        if kind == "tree":
            app = tree_app(settings, pool, keys)
        else:
            app = gateway_app(settings, pool, keys, GatewaySettings(tree_address=tree))
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await shutdown(app, server, 1)


@dataclass
class Route:
    """One way to call GetTree: its stub, the processes whose CPU it costs, what it measured."""

    name: str
    call: Any
    pids: list[int]
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0

    async def measure(self, seconds: float) -> None:
        """Calls back to back for `seconds` (after one warm-up call)."""
        await self.call()
        cpu_before = sum(map(cpu_seconds, self.pids))
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            began = time.perf_counter()
            await self.call()
            self.latencies.append(time.perf_counter() - began)
        self.seconds += time.perf_counter() - started
        self.cpu += sum(map(cpu_seconds, self.pids)) - cpu_before

    def line(self) -> str:
        """Throughput, latency and server CPU per call."""
        ordered = sorted(self.latencies)
        calls = len(ordered)
        p50, p99 = ordered[calls // 2] * 1000, ordered[min(calls - 1, int(calls * 0.99))] * 1000
        return (
            f"  {self.name:<24} {calls / self.seconds:6.2f} calls/s  p50 {p50:6.1f} ms  "
            f"p99 {p99:6.1f} ms  server CPU {self.cpu / calls * 1000:6.1f} ms/call ({calls} calls)"
        )

    @property
    def rate(self) -> float:
        """Calls per second."""
        return len(self.latencies) / self.seconds

    @property
    def cpu_per_call(self) -> float:
        """Server CPU seconds per call."""
        return self.cpu / len(self.latencies)


async def routes(
    stack: AsyncExitStack, label: str, dsn: str, space: str, key: str, nodes: int, source: str
) -> list[Route]:
    """Start a tree and a gateway from `source` (None = this checkout); their two routes."""
    env = {"STELLO_BENCH_SOURCE": source} if source else {}
    tree = await stack.enter_async_context(served_process(__file__, "tree", dsn, env=env))
    gateway = await stack.enter_async_context(
        served_process(__file__, "gateway", dsn, tree.address, env=env)
    )
    tree_stub = tree_pb2_grpc.SessionTreeStub(
        await stack.enter_async_context(open_channel(tree.address, key=key))
    )
    gateway_stub = agent_pb2_grpc.AgentGatewayStub(
        await stack.enter_async_context(open_channel(gateway.address, key=key))
    )

    async def direct() -> None:
        reply = await tree_stub.GetTree(tree_pb2.GetTreeRequest(space_id=space), timeout=120)
        assert len(reply.nodes) == nodes

    async def through_gateway() -> None:
        reply = await gateway_stub.GetTree(agent_pb2.GetTreeRequest(space_id=space), timeout=120)
        assert len(reply.nodes) == nodes

    return [
        Route(f"{label} tree", direct, [tree.pid]),
        Route(f"{label} gateway", through_gateway, [tree.pid, gateway.pid]),
    ]


async def run(nodes: int, seconds: float, rounds: int, before: str | None) -> None:
    """Seed, start the servers, measure in interleaved rounds, report."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    async with database() as dsn, AsyncExitStack() as stack:
        async with create_pool(dsn, _settings(dsn)) as pool:
            created = await KeyStore(pool).create_key(space=f"bench-{uuid.uuid4().hex[:8]}")
            assert created.space_id is not None
            await seed_topology(
                pool, created.space_id, [None, *((i - 1) // 10 for i in range(1, nodes))]
            )
        space, key = str(created.space_id), created.secret
        measured = await routes(stack, "ours", dsn, space, key, nodes, "")
        if before:
            measured += await routes(stack, "before", dsn, space, key, nodes, before)
        for _ in range(rounds):
            for route in measured:
                await route.measure(seconds / rounds)
        print(f"GetTree of {nodes:,} nodes, one call at a time, {rounds} interleaved rounds:")
        for route in measured:
            print(route.line())
        ours_tree, ours_gateway = measured[:2]
        print(
            f"  gateway / direct time (ours): {ours_tree.rate / ours_gateway.rate:.2f}x "
            "(target <= 1.2x)"
        )
        if before:
            old_tree, old_gateway = measured[2:]
            print(f"  before: gateway / direct time {old_tree.rate / old_gateway.rate:.2f}x")
            for mine, theirs in ((ours_tree, old_tree), (ours_gateway, old_gateway)):
                print(
                    f"  {mine.name} / {theirs.name}: throughput {mine.rate / theirs.rate:.2f}x, "
                    f"server CPU per call {mine.cpu_per_call / theirs.cpu_per_call:.2f}x"
                )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"(cpus: {os.cpu_count()}; client, servers and PostgreSQL share them)")


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one of its servers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["tree", "gateway"])
    serve_cmd.add_argument("dsn")
    serve_cmd.add_argument("tree", nargs="?", default="")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=12.0, help="per route, all rounds")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--before", help="a checkout of the code to compare with")
    args = parser.parse_args()
    if args.command == "serve":
        run_main(serve(args.kind, args.dsn, args.tree))
    else:
        run_main(run(args.nodes, args.seconds, args.rounds, args.before))


if __name__ == "__main__":
    main()
