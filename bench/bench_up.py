"""The `stello up` shape: storage, tree and gateway in one process, in-process calls or not.

`stello up` runs the three servers in one process; by default the gateway calls
storage and tree in-process (`stello.serving.inproc`: the same interceptors and
handlers, no HTTP/2 or loopback socket), with ``--network-calls`` over loopback
gRPC. This measures, in one run, two such processes started by the real
`stello_cli.up.suite.start_servers` (one of each kind) over one database:

- the gateway's GetSession (meta, slots, node and config of one session);
- a direct tree GetNode of the same session on the same process (one hop, one
  statement): the yardstick of #18 (GetSession >= 0.5x its throughput);
- the gateway's Fork NONE (the provisioning saga, four internal calls).

Each scenario runs a fixed number of calls at a fixed concurrency after a
warm-up, kinds taking turns in alternating order round after round; throughput
and the server process's CPU (user + system, every thread) per call are summed
over the rounds, with the spread of the per-round ratios.

    python bench/bench_up.py [--calls 2000] [--concurrency 16] [--rounds 4]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Call, cpu_seconds, database, run_calls, wait_for_stdin_close

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, shutdown
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from stello_cli.up.suite import Ports, start_servers

SCRIPT = str(Path(__file__).resolve())
KINDS = ("in-process", "network")


def _settings(dsn: str) -> StelloSettings:
    return StelloSettings(
        database_url=dsn, db_pool_min_size=10, db_pool_max_size=10, auth_cache_ttl_s=60
    )


async def serve(kind: str, dsn: str) -> None:
    """Run the three servers as `stello up` does, print ``READY gateway tree key space``,
    run until stdin closes."""
    settings = _settings(dsn)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        running: list[tuple[ServiceApp, grpc.aio.Server]] = []
        ports = Ports(storage=0, tree=0, gateway=0, console=None)
        try:
            addresses = await start_servers(
                settings, ports, pool, keys, running, local_calls=kind == "in-process"
            )
            created = await keys.create_key(space=f"bench-up-{kind}", name="bench")
            print(
                "READY", addresses["gateway"], addresses["tree"], created.secret,
                created.space_id, flush=True,
            )  # fmt: skip
            await wait_for_stdin_close()
        finally:
            for app, server in reversed(running):
                await shutdown(app, server, 1)


@dataclass(frozen=True, slots=True)
class Process:
    """One `stello up`-shaped process: its pid and the calls of each scenario."""

    pid: int
    calls: dict[str, Call]


@asynccontextmanager
async def started(kind: str, dsn: str) -> AsyncIterator[Process]:
    """A serving process of `kind`, a root session with a system prompt, the scenarios."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, SCRIPT, "serve", kind, dsn,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stdin is not None
    line = (await process.stdout.readline()).decode().split()
    if not line or line[0] != "READY":
        raise RuntimeError(f"the {kind} process did not start: {line!r}")
    _, gateway_address, tree_address, key, space = line
    try:
        async with AsyncExitStack() as stack:
            gateway_channel = open_channel(gateway_address, key=key)
            tree_channel = open_channel(tree_address, key=key)
            stack.push_async_callback(gateway_channel.close)
            stack.push_async_callback(tree_channel.close)
            calls = await scenarios(
                agent_pb2_grpc.AgentGatewayStub(gateway_channel),
                tree_pb2_grpc.SessionTreeStub(tree_channel),
                space,
            )
            yield Process(process.pid, calls)
    finally:
        process.stdin.close()
        await process.wait()


async def scenarios(
    gateway: agent_pb2_grpc.AgentGatewayStub, tree: tree_pb2_grpc.SessionTreeStub, space: str
) -> dict[str, Call]:
    """Each scenario's call, over a root made here."""
    root = await gateway.CreateRoot(
        agent_pb2.CreateRootRequest(space_id=space, label="bench", system_prompt="You are Stello.")
    )
    session = root.session.id

    async def get_session(index: int) -> Any:
        return await gateway.GetSession(
            agent_pb2.GetSessionRequest(space_id=space, session_id=session)
        )

    async def get_node(index: int) -> Any:
        return await tree.GetNode(tree_pb2.GetNodeRequest(space_id=space, session_id=session))

    async def fork_none(index: int) -> Any:
        return await gateway.Fork(
            agent_pb2.ForkRequest(
                space_id=space,
                source_session_id=session,
                label=f"fork {index}",
                context=common_pb2.FORK_CONTEXT_NONE,
            )
        )

    return {
        "gateway GetSession": get_session,
        "tree GetNode": get_node,
        "gateway Fork NONE": fork_none,
    }


@dataclass(frozen=True, slots=True)
class Sample:
    """Calls made, seconds taken, server CPU seconds spent."""

    calls: int
    seconds: float
    cpu: float

    @property
    def rps(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds

    @property
    def cpu_us(self) -> float:
        """Server CPU per call, in microseconds."""
        return self.cpu / self.calls * 1e6


async def measure(call: Call, pid: int, concurrency: int, total: int) -> Sample:
    """Warm up, then `total` calls, with the CPU process `pid` spent on them."""
    await run_calls(call, concurrency, max(100, total // 10))
    before = cpu_seconds(pid)
    began = time.perf_counter()
    await run_calls(call, concurrency, total)
    return Sample(total, time.perf_counter() - began, cpu_seconds(pid) - before)


def summed(samples: list[Sample]) -> Sample:
    """All rounds as one sample."""
    return Sample(
        sum(s.calls for s in samples), sum(s.seconds for s in samples), sum(s.cpu for s in samples)
    )


def spread(values: list[float]) -> str:
    """min-max of per-round values."""
    return f"{min(values):.2f}-{max(values):.2f}x"


async def run(total: int, concurrency: int, rounds: int) -> None:
    """Measure and print, over STELLO_BENCH_DATABASE_URL or an embedded database."""
    async with database() as dsn:
        await run_on(dsn, total, concurrency, rounds)


async def run_on(dsn: str, total: int, concurrency: int, rounds: int) -> None:
    """Measure and print over `dsn` (bench/bench_overhead.py runs this after its own)."""
    async with AsyncExitStack() as stack:
        processes = {kind: await stack.enter_async_context(started(kind, dsn)) for kind in KINDS}
        names = list(processes[KINDS[0]].calls)
        samples: dict[tuple[str, str], list[Sample]] = {}
        for number in range(rounds):
            order = KINDS if number % 2 == 0 else KINDS[::-1]
            for name in names:
                fork = name.endswith("Fork NONE")
                for kind in order:
                    process = processes[kind]
                    count = total // 4 if fork else total
                    sample = await measure(process.calls[name], process.pid, concurrency, count)
                    samples.setdefault((kind, name), []).append(sample)
        report(samples, names, rounds, concurrency)


def report(
    samples: dict[tuple[str, str], list[Sample]], names: list[str], rounds: int, concurrency: int
) -> None:
    """Throughput and CPU per call of each kind, then the ratios #18 asks for."""
    print(f"one process serving storage, tree and gateway; c={concurrency}, {rounds} rounds")
    print(f"{'scenario':<22} {'kind':<11} {'calls/s':>9} {'CPU us/call':>12}")
    for name in names:
        for kind in KINDS:
            total = summed(samples[(kind, name)])
            print(f"{name:<22} {kind:<11} {total.rps:>9.0f} {total.cpu_us:>12.0f}")
    print()
    for kind in KINDS:
        session = samples[(kind, "gateway GetSession")]
        node = samples[(kind, "tree GetNode")]
        ratio = summed(session).rps / summed(node).rps
        rounds_ratio = [s.rps / n.rps for s, n in zip(session, node, strict=True)]
        verdict = "meets" if ratio >= 0.5 else "misses"
        print(
            f"{kind}: GetSession / direct GetNode throughput {ratio:.2f}x "
            f"(rounds {spread(rounds_ratio)}; target >= 0.5x: {verdict})"
        )
    for name in ("gateway GetSession", "gateway Fork NONE"):
        local = samples[("in-process", name)]
        network = samples[("network", name)]
        speedup = [a.rps / b.rps for a, b in zip(local, network, strict=True)]
        cpu = summed(local).cpu_us / summed(network).cpu_us
        print(
            f"{name}: in-process / network throughput "
            f"{summed(local).rps / summed(network).rps:.2f}x (rounds {spread(speedup)}), "
            f"CPU per call {cpu:.2f}x"
        )


def main() -> None:
    """`serve KIND DSN` (the child processes) or the benchmark."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        import uvloop

        uvloop.run(serve(sys.argv[2], sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per scenario and round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(run(args.calls, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
