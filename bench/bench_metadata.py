"""Metadata-filtered digests benchmark (issue #37): a filtered ListSessionDigests page over
100,000 sessions against the same query over 10,000, in the same run (target <= 2x).

Two spaces in one database, seeded with COPY: a small one (`--small`, default
10,000 sessions) and a large one (10x). Every session has two metadata pairs:
`user` (each user holds `--matches` sessions, in both spaces, so the page is the
same size) and `shard` (one of three: common); `--matches` sessions are archived and as many
have a label starting "needle". The
scenarios, each a digests page (one tree ListAll + one storage BatchGetSlots),
measured as p50/p99 over `--calls` calls after a warm-up, on both spaces:

- `metadata user=...`: one pair, driven by `session_metadata_match`;
- `metadata user=... shard=...`: two pairs (the rarest drives, the other probed);
- `status archived`: `sessions_status_created`;
- `label prefix`: `sessions_label_prefix`.

    python bench/bench_metadata.py [--small 10000] [--matches 20] [--calls 200]

Servers run in this process on loopback ports. Uses STELLO_BENCH_DATABASE_URL when
set (a database it may fill), else an embedded PostgreSQL in a temporary folder,
deleted afterwards. Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from harness import database, run_main

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=2, db_pool_max_size=4, auth_cache_ttl_s=60
    )


async def seed(pool: Any, space_id: uuid.UUID, count: int, matches: int) -> None:
    """`count` root sessions with their metadata, by COPY."""
    start = datetime.now(UTC) - timedelta(days=30)
    users = max(1, count // matches)
    sessions, pairs = [], []
    for i in range(count):
        sid = uuid.uuid4()
        created = start + timedelta(milliseconds=i)
        # `matches` archived and `matches` "needle" labels in each space: the same page.
        status = "archived" if i % users == 7 else "active"
        label = f"needle {i}" if i % users == 3 else f"session {i}"
        sessions.append((space_id, sid, sid, 0, 0, label, status, created, created, created))
        pairs.append((space_id, sid, "user", f"u{i % users}", created))
        pairs.append((space_id, sid, "shard", f"h{i % 3}", created))
    async with pool.acquire() as con:
        await con.copy_records_to_table(
            "sessions",
            records=sessions,
            columns=[
                "space_id",
                "id",
                "root_id",
                "depth",
                "sibling_index",
                "label",
                "status",
                "created_at",
                "updated_at",
                "last_active_at",
            ],
        )
        await con.copy_records_to_table(
            "session_metadata",
            records=pairs,
            columns=["space_id", "session_id", "key", "value", "created_at"],
        )
        await con.execute("ANALYZE sessions; ANALYZE session_metadata")


@asynccontextmanager
async def servers(dsn: str) -> AsyncIterator[tuple[Any, KeyStore, Any]]:
    """Storage, tree and gateway in this process; the gateway's address, keys and pool."""
    from agent_gateway.app import create_app as gateway_app
    from agent_gateway.config import GatewaySettings
    from storage_service.app import create_app as storage_app
    from tree_service.app import create_app as tree_app

    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        running = []
        addresses = []
        for factory in (storage_app, tree_app):
            app = factory(settings, pool, keys)
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            running.append((app, server))
            addresses.append(f"127.0.0.1:{port}")
        config = GatewaySettings(storage_address=addresses[0], tree_address=addresses[1])
        app = gateway_app(settings, pool, keys, config)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        running.append((app, server))
        try:
            yield f"127.0.0.1:{port}", keys, pool
        finally:
            for app, server in reversed(running):
                await shutdown(app, server, 0)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench_metadata_digests(small: int, matches: int, calls: int) -> None:
    """The filtered digests pages over `small` and 10x `small` sessions, side by side."""
    sizes = (small, small * 10)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    async with database() as dsn, servers(dsn) as (address, keys, pool):
        spaces = []
        for size in sizes:
            tag = uuid.uuid4().hex[:8]
            created = await keys.create_key(space=f"bench-{tag}", principal=f"bench-{tag}")
            assert created.space_id is not None
            began = time.perf_counter()
            await seed(pool, created.space_id, size, matches)
            print(f"seeded {size:,} sessions in {time.perf_counter() - began:.1f} s")
            spaces.append((str(created.space_id), created.secret))
        scenarios: list[tuple[str, dict[str, Any]]] = [
            ("metadata user=u5", {"filter": common_pb2.SessionFilter(metadata={"user": "u5"})}),
            (
                "metadata user=u5 shard=h2",
                {"filter": common_pb2.SessionFilter(metadata={"user": "u5", "shard": "h2"})},
            ),
            ("status archived", {"status": common_pb2.SESSION_STATUS_ARCHIVED}),
            ("label prefix 'needle'", {"filter": common_pb2.SessionFilter(label_prefix="needle")}),
        ]
        print(f"ListSessionDigests page (page_size 100), {calls} calls each, p50 / p99 ms:")
        for name, fields in scenarios:
            results = []
            for (space, key), size in zip(spaces, sizes, strict=True):
                async with open_channel(address, key=key) as channel:
                    stub = agent_pb2_grpc.AgentGatewayStub(channel)
                    request = agent_pb2.ListSessionDigestsRequest(
                        space_id=space, page_size=100, **fields
                    )
                    found = len((await stub.ListSessionDigests(request)).digests)
                    for _ in range(10):  # warm-up, past the custom plans
                        await stub.ListSessionDigests(request)
                    times = []
                    for _ in range(calls):
                        began = time.perf_counter()
                        await stub.ListSessionDigests(request)
                        times.append((time.perf_counter() - began) * 1000)
                results.append((size, found, _quantile(times, 0.5), _quantile(times, 0.99)))
            (s_size, s_found, s50, s99), (b_size, b_found, b50, b99) = results
            print(
                f"  {name:<28} {s_size:>7,}: {s50:6.2f} / {s99:6.2f} ({s_found} hits)"
                f"   {b_size:>7,}: {b50:6.2f} / {b99:6.2f} ({b_found} hits)"
                f"   ratio p50 {b50 / s50:.2f}x, p99 {b99 / s99:.2f}x"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=10_000, help="sessions of the small space")
    parser.add_argument("--matches", type=int, default=20, help="sessions per user value")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    run_main(bench_metadata_digests(args.small, args.matches, args.calls))


if __name__ == "__main__":
    main()
