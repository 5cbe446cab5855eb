"""WatchSpace benchmark: commit-to-client latency under load, append throughput with watchers.

Storage, tree and gateway run in one server process over the embedded
PostgreSQL (the gateway polls each watched space every
STELLO_GATEWAY_WATCH_POLL_INTERVAL_S, default 0.1 s); the client runs here:

- append throughput: 8 writers append to 8 sessions of one space back to back
  (storage AppendRecords) with 0, 1 and 10 watchers of that space draining the
  stream; rounds interleave the three, the median round is kept;
- commit-to-client latency: under the same load with one watcher, the time from
  an append's reply (its commit) to its RECORDS_APPENDED event at the watcher.

The cost of the cursor scheme itself to concurrent writers of one space is
`bench/bench_event_cursor.py` (SQL level). Not part of the test run.

    python bench/bench_watch.py [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import database, run_main, wait_for_stdin_close

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
from storage_service import create_app as storage_app
from tree_service import create_app as tree_app

WRITERS = 8
WATCHERS = (0, 1, 10)
INSERT_SESSION = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
VALUES ($1, $2, $2, 0, 'bench')
"""


async def serve(dsn: str) -> None:
    """Storage, tree and gateway on free ports until stdin closes; prints both ports."""
    settings = StelloSettings(database_url=dsn, db_pool_min_size=10, db_pool_max_size=20)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool)
        running: list[tuple[ServiceApp, Any]] = []

        async def start(app: ServiceApp) -> int:
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            running.append((app, server))
            return port

        storage = await start(storage_app(settings, pool, keys))
        tree = await start(tree_app(settings, pool, keys))
        config = GatewaySettings(
            storage_address=f"127.0.0.1:{storage}", tree_address=f"127.0.0.1:{tree}"
        )
        gateway = await start(partial(gateway_app, config=config)(settings, pool, keys))
        print(f"PORT {storage} {gateway}", flush=True)
        await wait_for_stdin_close()
        for app, server in reversed(running):
            await shutdown(app, server, 1)


async def seed(dsn: str) -> tuple[str, str, list[str]]:
    """A space, its key and WRITERS committed sessions."""
    async with create_pool(dsn, StelloSettings(database_url=dsn)) as pool:
        created = await KeyStore(pool).create_key(space=f"bench-{uuid.uuid4().hex[:8]}")
        assert created.space_id is not None
        sessions = [uuid.uuid4() for _ in range(WRITERS)]
        await pool.executemany(INSERT_SESSION, [(created.space_id, s) for s in sessions])
    return str(created.space_id), created.secret, [str(s) for s in sessions]


class Client:
    """Stubs on storage and gateway, and the load's bookkeeping."""

    def __init__(self, storage: str, gateway: str, key: str, space: str, sessions: list[str]):
        self.channels = [open_channel(storage, key=key), open_channel(gateway, key=key)]
        self.storage = storage_pb2_grpc.SessionStorageStub(self.channels[0])
        self.gw = agent_pb2_grpc.AgentGatewayStub(self.channels[1])
        self.space = space
        self.sessions = sessions
        self.committed: dict[tuple[str, int], float] = {}
        self.arrived: dict[tuple[str, int], float] = {}

    async def writers(self, seconds: float) -> int:
        """WRITERS appenders back to back for `seconds`; how many appends committed."""
        deadline = time.perf_counter() + seconds
        record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content="benchmark")
        count = 0

        async def write(session: str) -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                reply = await self.storage.AppendRecords(
                    storage_pb2.AppendRecordsRequest(
                        space_id=self.space, session_id=session, records=[record]
                    )
                )
                self.committed[(session, reply.records[0].seq)] = time.perf_counter()
                count += 1

        await asyncio.gather(*(write(s) for s in self.sessions))
        return count

    async def watcher(self, ready: asyncio.Event) -> None:
        """Drain a WatchSpace stream from now on, noting when each append's event arrives."""
        call = self.gw.WatchSpace(agent_pb2.WatchSpaceRequest(space_id=self.space))
        ready.set()
        async for message in call:
            event = message.event
            if event.kind == common_pb2.EVENT_KIND_RECORDS_APPENDED:
                self.arrived.setdefault((event.session_id, event.first_seq), time.perf_counter())

    async def round(self, watchers: int, seconds: float) -> float:
        """Appends per second with `watchers` open."""
        ready = [asyncio.Event() for _ in range(watchers)]
        tasks = [asyncio.create_task(self.watcher(r)) for r in ready]
        for event in ready:
            await event.wait()
        await asyncio.sleep(0.5)  # the streams are open and polled
        count = await self.writers(seconds)
        await asyncio.sleep(0.5)  # the last events arrive
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return count / seconds

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(seconds: float, rounds: int) -> None:
    """Seed, start the servers, measure, print."""
    async with database() as dsn:
        space, key, sessions = await seed(dsn)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "serve",
            dsn,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None and process.stdin is not None
        line = (await process.stdout.readline()).decode().split()
        client = Client(f"127.0.0.1:{line[1]}", f"127.0.0.1:{line[2]}", key, space, sessions)
        try:
            samples: dict[int, list[float]] = {n: [] for n in WATCHERS}
            for index in range(rounds):
                order = WATCHERS if index % 2 == 0 else tuple(reversed(WATCHERS))
                for watchers in order:
                    rate = await client.round(watchers, seconds)
                    samples[watchers].append(rate)
                    print(f"  round {index + 1} watchers={watchers:<3} {rate:7.0f} appends/s")
            client.committed.clear()
            client.arrived.clear()
            await client.round(1, seconds)
            latencies = [
                (client.arrived[key] - at) * 1000
                for key, at in client.committed.items()
                if key in client.arrived
            ]
            missing = len(client.committed) - len(latencies)
        finally:
            await client.close()
            process.stdin.close()
            await process.wait()
    print()
    print(f"{WRITERS} writers appending to one space, median of {rounds} rounds")
    base = sorted(samples[0])[rounds // 2]
    for watchers in WATCHERS:
        rate = sorted(samples[watchers])[rounds // 2]
        print(f"  watchers={watchers:<3} {rate:7.0f} appends/s  {rate / base:5.0%} of none")
    print(
        f"commit-to-client latency (1 watcher, under that load, {len(latencies)} events, "
        f"{missing} not delivered): p50 {quantile(latencies, 0.5):.1f} ms, "
        f"p99 {quantile(latencies, 0.99):.1f} ms (poll interval 100 ms)"
    )
    print(f"(cpus: {os.cpu_count()}; client, servers and PostgreSQL share them)")


def main() -> None:
    """Command line: run the benchmark, or (internally) serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("dsn")
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many")
    args = parser.parse_args()
    coroutine = serve(args.dsn) if args.command == "serve" else run(args.seconds, args.rounds)
    run_main(coroutine)


if __name__ == "__main__":
    main()
