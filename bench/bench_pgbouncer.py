"""PgBouncer benchmark: AppendRecords and GetNode through PgBouncer against direct, in one run.

Each configuration runs its own storage and tree server processes (uvloop, the
same pool size) over the embedded PostgreSQL; the client runs here:

- ``direct``: the servers connect to PostgreSQL (statement cache 1024);
- ``bouncer cache=0``: through the PgBouncer on PATH (Debian 12's 1.18 has no
  ``max_prepared_statements``, so asyncpg prepares every statement again);
- ``bouncer mps cache=1024`` and ``bouncer mps cache=0``: through a PgBouncer
  1.21+ with ``max_prepared_statements`` (``--new-pgbouncer PATH``; build one with
  ``bash bench/build_pgbouncer.sh``), with the cache on and off.

Configurations take turns per scenario in each round; the median round is kept.
Prints throughput, p50, the servers' CPU per call and PgBouncer's, and each
throughput as a ratio of direct's. Not part of the test run.

    python bench/bench_pgbouncer.py [--seconds 3] [--rounds 3] [--new-pgbouncer PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Call, Result, load, run_main, wait_for_stdin_close

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.embedded import embedded_server, ensure_database
from stello.db.migrate import migrate_dsn
from stello.db.pool import create_pool
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service import create_app as storage_app
from tests.support.bouncer import Bouncer, database_of, pgbouncer
from tree_service import create_app as tree_app

CONTENT = "benchmark record " * 6  # ~100 bytes, a short chat message
SESSIONS = 64
SCENARIOS = (("AppendRecords", 1), ("AppendRecords", 16), ("GetNode", 1), ("GetNode", 16))


@dataclass(frozen=True, slots=True)
class Config:
    """One way of reaching the database: a DSN, a statement cache size, maybe a PgBouncer."""

    name: str
    dsn: str
    cache: int
    bouncer: Bouncer | None


@dataclass(slots=True)
class Servers:
    """A configuration's storage and tree processes and the stubs on them."""

    config: Config
    processes: list[psutil.Process]
    calls: dict[str, Call]


# ---------------------------------------------------------------- servers


async def serve(kind: str, dsn: str, cache: int) -> None:
    """Run one storage or tree server until stdin closes; print its port first."""
    settings = StelloSettings(
        database_url=dsn, db_pool_min_size=16, db_pool_max_size=16, db_statement_cache_size=cache
    )
    async with create_pool(dsn, settings) as pool:
        factory = storage_app if kind == "storage" else tree_app
        app = factory(settings, pool, KeyStore(pool))
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        print(f"PORT {port}", flush=True)
        await wait_for_stdin_close()
        await shutdown(app, server, 1)


@asynccontextmanager
async def server(kind: str, config: Config) -> AsyncIterator[tuple[str, psutil.Process]]:
    """One server process of `config`; yields its address and process (for its CPU time)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "serve",
        kind,
        config.dsn,
        str(config.cache),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    line = (await process.stdout.readline()).decode()
    if not line.startswith("PORT "):
        raise RuntimeError(f"{kind} server of {config.name} did not start: {line!r}")
    try:
        yield f"127.0.0.1:{line.split()[1]}", psutil.Process(process.pid)
    finally:
        process.stdin.close()
        await process.wait()


# ---------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Fixture:
    """A space, its key and the sessions the load appends to and reads."""

    space_id: str
    key: str
    sessions: list[str]


INSERT_SESSION = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
VALUES ($1, $2, $2, 0, 'bench')
"""


async def seed(dsn: str) -> Fixture:
    """A space with SESSIONS committed root sessions."""
    async with create_pool(dsn, StelloSettings(database_url=dsn)) as pool:
        created = await KeyStore(pool).create_key(space=f"bench-{uuid.uuid4().hex[:8]}")
        assert created.space_id is not None
        sessions = [uuid.uuid4() for _ in range(SESSIONS)]
        async with pool.acquire() as con:
            await con.executemany(INSERT_SESSION, [(created.space_id, s) for s in sessions])
    return Fixture(str(created.space_id), created.secret, [str(s) for s in sessions])


def scenario_calls(
    storage: storage_pb2_grpc.SessionStorageStub, tree: tree_pb2_grpc.SessionTreeStub, fx: Fixture
) -> dict[str, Call]:
    """The calls each scenario makes; `index` is the worker number."""
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=CONTENT)

    async def append(index: int) -> Any:
        session = fx.sessions[index % len(fx.sessions)]
        return await storage.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=fx.space_id, session_id=session, records=[record]
            )
        )

    async def get_node(index: int) -> Any:
        session = fx.sessions[index % len(fx.sessions)]
        return await tree.GetNode(tree_pb2.GetNodeRequest(space_id=fx.space_id, session_id=session))

    return {"AppendRecords": append, "GetNode": get_node}


# ---------------------------------------------------------------- load


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement: the load's result and the CPU seconds the processes spent in it."""

    result: Result
    server_cpu_s: float
    bouncer_cpu_s: float

    def per_call_us(self, seconds: float) -> float:
        """CPU seconds as microseconds per completed call."""
        return seconds / self.result.calls * 1e6 if self.result.calls else 0.0


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User plus system CPU time of `processes` so far."""
    return sum(p.cpu_times().user + p.cpu_times().system for p in processes)


def bouncer_process(bouncer: Bouncer | None) -> list[psutil.Process]:
    """The PgBouncer process of a configuration (by its pid file), if any."""
    if bouncer is None:
        return []
    return [psutil.Process(int((bouncer.folder / "pgbouncer.pid").read_text().strip()))]


async def sample(servers: Servers, name: str, concurrency: int, seconds: float) -> Sample:
    """Load one scenario and count the CPU time the servers and PgBouncer spent meanwhile."""
    bouncers = bouncer_process(servers.config.bouncer)
    before = cpu_seconds(servers.processes), cpu_seconds(bouncers)
    result = await load(servers.calls[name], concurrency, seconds)
    after = cpu_seconds(servers.processes), cpu_seconds(bouncers)
    # load() measures after a warm-up second: scale the CPU time to the measured share.
    share = result.seconds / (result.seconds + 1.0)
    return Sample(result, (after[0] - before[0]) * share, (after[1] - before[1]) * share)


@asynccontextmanager
async def running(config: Config, fx: Fixture) -> AsyncIterator[Servers]:
    """Storage and tree processes of `config`, with stubs on them."""
    async with server("storage", config) as storage, server("tree", config) as tree:
        channels = [open_channel(storage[0], key=fx.key), open_channel(tree[0], key=fx.key)]
        try:
            calls = scenario_calls(
                storage_pb2_grpc.SessionStorageStub(channels[0]),
                tree_pb2_grpc.SessionTreeStub(channels[1]),
                fx,
            )
            yield Servers(config, [storage[1], tree[1]], calls)
        finally:
            for channel in channels:
                await channel.close()


async def measure(
    configs: list[Config], fx: Fixture, seconds: float, rounds: int
) -> dict[tuple[str, str, int], Sample]:
    """Every scenario against every configuration, interleaved; the median round kept."""
    samples: dict[tuple[str, str, int], list[Sample]] = {}
    async with running_all(configs, fx) as all_servers:
        for round_index in range(rounds):
            order = all_servers if round_index % 2 == 0 else list(reversed(all_servers))
            for name, concurrency in SCENARIOS:
                for servers in order:
                    got = await sample(servers, name, concurrency, seconds)
                    key = (servers.config.name, name, concurrency)
                    samples.setdefault(key, []).append(got)
                    print(
                        f"  round {round_index + 1} {servers.config.name:24} {name:14} "
                        f"c={concurrency:<3} {got.result.rps:7.0f} rps  "
                        f"p50 {got.result.quantile(0.5):5.2f} ms",
                        flush=True,
                    )
    return {
        key: sorted(runs, key=lambda s: s.result.rps)[len(runs) // 2]
        for key, runs in samples.items()
    }


@asynccontextmanager
async def running_all(configs: list[Config], fx: Fixture) -> AsyncIterator[list[Servers]]:
    """Every configuration's servers at once (so they take turns under the same conditions)."""
    opened: list[Servers] = []
    managers = [running(config, fx) for config in configs]
    try:
        for manager in managers:
            opened.append(await manager.__aenter__())
        yield opened
    finally:
        for manager in reversed(managers[: len(opened)]):
            await manager.__aexit__(None, None, None)


def report(configs: list[Config], results: dict[tuple[str, str, int], Sample]) -> None:
    """The run's table: throughput (and / direct), p50, CPU per call of servers and PgBouncer."""
    print()
    print(
        f"{'scenario':18} {'configuration':24} {'rps':>7} {'/direct':>8} {'p50 ms':>7} "
        f"{'server CPU/call':>16} {'bouncer CPU/call':>17}"
    )
    for name, concurrency in SCENARIOS:
        direct = results[(configs[0].name, name, concurrency)].result.rps
        for config in configs:
            got = results[(config.name, name, concurrency)]
            print(
                f"{name + f' c={concurrency}':18} {config.name:24} {got.result.rps:>7.0f} "
                f"{got.result.rps / direct:>8.0%} {got.result.quantile(0.5):>7.2f} "
                f"{got.per_call_us(got.server_cpu_s):>13.0f} us "
                f"{got.per_call_us(got.bouncer_cpu_s):>14.0f} us"
            )
    print(f"(cpus: {os.cpu_count()}; client, servers, PgBouncer and PostgreSQL share them)")


# ---------------------------------------------------------------- run


@contextmanager
def configurations(admin_dsn: str, dsn: str, new_pgbouncer: str | None) -> Iterator[list[Config]]:
    """direct, the PgBouncer on PATH with cache 0, and a 1.21+ one's two cache settings."""
    database = database_of(dsn)
    with ExitStack() as stack:
        configs = [Config("direct", dsn, 1024, None)]
        old = stack.enter_context(pgbouncer(admin_dsn))
        if old.prepared_statements:
            configs.append(Config("bouncer (PATH) mps c=1024", old.dsn(database), 1024, old))
        configs.append(Config("bouncer (PATH) cache=0", old.dsn(database), 0, old))
        if new_pgbouncer:
            new = stack.enter_context(pgbouncer(admin_dsn, executable=new_pgbouncer))
            assert new.prepared_statements, f"{new_pgbouncer} is older than 1.21"
            configs.append(Config("bouncer mps cache=1024", new.dsn(database), 1024, new))
            configs.append(Config("bouncer mps cache=0", new.dsn(database), 0, new))
        versions = {".".join(map(str, c.bouncer.version)) for c in configs if c.bouncer}
        print(f"PgBouncer versions: {', '.join(sorted(versions))}")
        yield configs


async def run(seconds: float, rounds: int, new_pgbouncer: str | None) -> None:
    """Start PostgreSQL and the PgBouncers, seed, measure every configuration, report."""
    folder = Path(tempfile.mkdtemp(prefix="stello-bench-pg-"))
    with embedded_server(folder / "data", delete=True) as admin_dsn:
        dsn = await ensure_database(admin_dsn, "stello_bench")
        await migrate_dsn(dsn)
        fx = await seed(dsn)
        with configurations(admin_dsn, dsn, new_pgbouncer) as configs:
            results = await measure(configs, fx, seconds, rounds)
            report(configs, results)


def main() -> None:
    """Command line: run the benchmark, or (internally) serve one side of it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("kind", choices=["storage", "tree"])
    serve_cmd.add_argument("dsn")
    serve_cmd.add_argument("cache", type=int)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many")
    parser.add_argument("--new-pgbouncer", help="a PgBouncer 1.21+ (bench/build_pgbouncer.sh)")
    args = parser.parse_args()
    coroutine = (
        serve(args.kind, args.dsn, args.cache)
        if args.command == "serve"
        else run(args.seconds, args.rounds, args.new_pgbouncer)
    )
    run_main(coroutine)


if __name__ == "__main__":
    main()
