"""Digests benchmark: ListSessionDigests over 10,000 sessions, this code against other checkouts.

The servers' CPU per listing is what is compared (the wall time of a shared
machine is noise): for each checkout, storage, tree and gateway run in their own
processes from that checkout's code (``--source DIR``, repeatable; e.g. ``git
worktree add /tmp/c1 COMMIT``), over one database seeded with COPY; the
listings (page_size 1000) take turns across the checkouts, round after round;
the CPU of the three processes is summed per checkout.

    python bench/bench_digests.py [--sessions 10000] [--rounds 5] [--source DIR ...]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A server of `--source` runs another checkout's code: STELLO_BENCH_SOURCE names it.
sys.path.insert(0, os.environ.get("STELLO_BENCH_SOURCE") or str(Path(__file__).parents[1]))

from harness import cpu_seconds, database, run_main, served_process, wait_for_stdin_close

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.settings import StelloSettings


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=2, db_pool_max_size=4, auth_cache_ttl_s=60
    )


async def serve(kind: str, dsn: str, storage: str, tree: str) -> None:
    """Serve one service of this checkout on a free port until stdin closes."""
    from stello.serving.server import create_server, shutdown

    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        if kind == "storage":
            from storage_service.app import create_app as storage_app

            app = storage_app(settings, pool, keys)
        elif kind == "tree":
            from tree_service.app import create_app as tree_app

            app = tree_app(settings, pool, keys)
        else:
            from agent_gateway.app import create_app as gateway_app
            from agent_gateway.config import GatewaySettings

            config = GatewaySettings(storage_address=storage, tree_address=tree)
            app = gateway_app(settings, pool, keys, config)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await shutdown(app, server, 1)


@dataclass
class Checkout:
    """One checkout's three servers, its stub and what its listings cost."""

    label: str
    stub: Any
    pids: list[int]
    cpu: float = 0.0
    walls: list[float] = field(default_factory=list)
    listings: int = 0

    async def list_all(self, space: str, metadata: Any, expected: int) -> None:
        """Page through every digest; add the servers' CPU."""
        before = sum(map(cpu_seconds, self.pids))
        began = time.perf_counter()
        token, seen = "", 0
        while True:
            page = await self.stub.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=space, page_size=1000, page_token=token
                ),
                metadata=metadata,
                timeout=120,
            )
            seen += len(page.digests)
            token = page.next_page_token
            if not token:
                break
        assert seen == expected, (self.label, seen)
        self.walls.append(time.perf_counter() - began)
        self.cpu += sum(map(cpu_seconds, self.pids)) - before
        self.listings += 1


async def start(stack: AsyncExitStack, dsn: str, source: str) -> Checkout:
    """The three servers of `source` ("" = this checkout)."""
    env = {"STELLO_BENCH_SOURCE": source} if source else {}
    storage = await stack.enter_async_context(served_process(__file__, "storage", dsn, env=env))
    tree = await stack.enter_async_context(served_process(__file__, "tree", dsn, env=env))
    gateway = await stack.enter_async_context(
        served_process(__file__, "gateway", dsn, storage.address, tree.address, env=env)
    )
    channel = await stack.enter_async_context(open_channel(gateway.address))
    return Checkout(
        Path(source).name if source else "ours",
        agent_pb2_grpc.AgentGatewayStub(channel),
        [storage.pid, tree.pid, gateway.pid],
    )


async def run(sessions: int, rounds: int, sources: list[str]) -> None:
    """Seed once, start every checkout's servers, list in turns, report CPU per 10,000."""
    from bench_gateway import new_space, seed_sessions

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    async with database() as dsn, AsyncExitStack() as stack:
        space_id, key = await new_space(dsn)
        await seed_sessions(dsn, space_id, sessions)
        checkouts = [await start(stack, dsn, source) for source in ["", *sources]]
        metadata = (("authorization", f"Bearer {key}"),)
        for checkout in checkouts:
            await checkout.list_all(str(space_id), metadata, sessions)  # warm-up
            checkout.cpu, checkout.walls, checkout.listings = 0.0, [], 0
        for round_ in range(rounds):
            order = checkouts if round_ % 2 == 0 else checkouts[::-1]
            for checkout in order:
                await checkout.list_all(str(space_id), metadata, sessions)
        print(f"ListSessionDigests over {sessions:,} sessions, page_size 1000, {rounds} rounds:")
        base = checkouts[0].cpu / checkouts[0].listings
        for checkout in checkouts:
            per = checkout.cpu / checkout.listings
            wall = sorted(checkout.walls)[len(checkout.walls) // 2] * 1000
            print(
                f"  {checkout.label:<28} servers' CPU {per * 1000:6.0f} ms per listing"
                f" ({per / base:.2f}x ours), wall median {wall:6.0f} ms"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one service of a checkout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["storage", "tree", "gateway"])
    serve_cmd.add_argument("dsn")
    serve_cmd.add_argument("storage", nargs="?", default="")
    serve_cmd.add_argument("tree", nargs="?", default="")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--source", action="append", default=[], help="another checkout")
    args = parser.parse_args()
    if args.command == "serve":
        run_main(serve(args.kind, args.dsn, args.storage, args.tree))
    else:
        run_main(run(args.sessions, args.rounds, args.source))


if __name__ == "__main__":
    main()
