"""Workers benchmark: the services with 1 and with 2 worker processes, side by side (DESIGN §9).

Two deployments run at once, each as the compose and Kubernetes shapes run them
(``python -m storage_service``, ``tree_service``, ``agent_gateway``, each its own
supervisor on its own ports, the gateway reaching storage and tree over the
network): one with ``--workers 1``, one with ``--workers 2``. Measured in
interleaved rounds (the order alternates), at concurrency 64 from one client
holding 16 connections per service (SO_REUSEPORT balances connections):

- storage AppendRecords (one record, 64 sessions), tree GetNode, and the
  gateway's GetSession (3 hops);
- throughput, p50/p99, and the servers' CPU per call (every process of the
  deployments reached: supervisors and workers, /proc), so throughput per
  CPU-second;
- where the machine's CPU went while measuring (/proc/stat): cores busy out of
  all, split into the services, this client and the rest (PostgreSQL): a second
  worker can only add throughput where the first left a core idle;
- the machine's load average before and after (this machine is shared: read
  the ratios, which compare the two deployments in the same moments).

Target (issue #35): 2 workers >= 1.3x the throughput of 1 on this 2-core machine
(PostgreSQL and the client share it), throughput per CPU-second >= 0.9x.

With ``--client h2load`` the calls are sent by h2load processes (nghttp2's C load
generator, ``apt-get install nghttp2-client``; `h2load_client.py`) instead of
grpc.aio in this process: the same requests, with the client's CPU nearly out of
the way, so what a second worker adds where a core is free shows.

    python bench/bench_workers.py [--seconds 4] [--rounds 3] [--concurrency 64] [--client h2load]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
import grpc
from bench_overhead import CONTENT, Fixture, scenario_calls, seed
from grpc_health.v1 import health_pb2, health_pb2_grpc
from h2load_client import check_request, h2load_path, h2load_round
from harness import Call, Result, cpu_seconds, database, load, run_main

import stello  # noqa: F401 (first: gRPC's fork handlers off before grpc loads)
from stello.agent.v1 import agent_pb2
from stello.channels import bearer_metadata, open_channel
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from tests.support.ports import free_port

SCENARIOS = ("storage AppendRecords", "tree GetNode", "gateway GetSession")
CONNECTIONS = 16


@dataclass(frozen=True)
class Wire:
    """A scenario as h2load sends it: the service it calls, its method's path, the
    requests (one h2load process each, `h2load_round`)."""

    service: str
    method: str
    messages: list[bytes]


def wire_scenarios(fx: Fixture) -> dict[str, Wire]:
    """The scenarios of `scenario_calls` as serialized requests: the same calls (appends to
    16 sessions, not 64: one h2load process per session, 4 calls in flight on each)."""
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=CONTENT)
    appends = [
        storage_pb2.AppendRecordsRequest(
            space_id=fx.space_id, session_id=session, records=[record]
        ).SerializeToString()
        for session in fx.append_sessions
    ]
    node = tree_pb2.GetNodeRequest(space_id=fx.space_id, session_id=fx.read_session)
    view = agent_pb2.GetSessionRequest(space_id=fx.space_id, session_id=fx.read_session)
    return {
        "storage AppendRecords": Wire(
            "storage", "/stello.storage.v1.SessionStorage/AppendRecords", appends
        ),
        "tree GetNode": Wire(
            "tree", "/stello.tree.v1.SessionTree/GetNode", [node.SerializeToString()]
        ),
        "gateway GetSession": Wire(
            "gateway",
            "/stello.agent.v1.AgentGateway/GetSession",
            [view.SerializeToString()],
        ),
    }


RECORDS_WRITTEN = "SELECT coalesce(sum(last_seq), 0) FROM sessions WHERE space_id = $1"


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and every process below it (a supervisor and its workers)."""
    total = 0.0
    try:
        total += cpu_seconds(pid)
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_cpu(int(child))
    except FileNotFoundError:
        pass
    return total


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the machine has spent busy, and in all, so far (/proc/stat, all cores)."""
    jiffies = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = jiffies[3] + jiffies[4]  # idle, iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(jiffies) - idle) / tick, sum(jiffies) / tick


@dataclass
class Deployment:
    """Storage, tree and gateway started with `workers` workers each."""

    workers: int
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)

    def cpu(self, services: tuple[str, ...]) -> float:
        """CPU seconds so far of the services' process trees."""
        return sum(tree_cpu(self.processes[name].pid) for name in services)


MODULES = {"storage": "storage_service", "tree": "tree_service", "gateway": "agent_gateway"}


@asynccontextmanager
async def deployment(dsn: str, workers: int) -> AsyncIterator[Deployment]:
    """Start the three services with `workers` workers each; stop them on exit."""
    deployed = Deployment(workers)
    ports = {name: free_port() for name in MODULES}
    deployed.addresses = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    env = {
        **os.environ,
        "STELLO_DATABASE_URL": dsn,
        "STELLO_AUTH_CACHE_TTL_S": "60",
        # Per service, split between its workers: two deployments of three services stay
        # at 72 connections (a PostgreSQL's default max_connections is 100).
        "STELLO_DB_POOL_MAX_SIZE": "12",
        "STELLO_LOG_LEVEL": "WARNING",
        "STELLO_GATEWAY_STORAGE_ADDRESS": deployed.addresses["storage"],
        "STELLO_GATEWAY_TREE_ADDRESS": deployed.addresses["tree"],
    }
    try:
        for name, module in MODULES.items():
            deployed.processes[name] = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                "--port",
                str(ports[name]),
                "--workers",
                str(workers),
                env=env,
            )
            await serving(deployed.addresses[name])
        yield deployed
    finally:
        for process in deployed.processes.values():
            if process.returncode is None:
                process.terminate()
        for process in deployed.processes.values():
            await process.wait()


async def serving(address: str) -> None:
    """Until `address` answers SERVING (60 s at most)."""
    deadline = time.monotonic() + 60
    async with open_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)


@dataclass
class Totals:
    """One scenario against one deployment, over all rounds."""

    calls: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    client_cpu: float = 0.0
    machine_busy: float = 0.0
    machine_all: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def add(self, result: Result, cpu: float, client_cpu: float, busy: float, all_: float) -> None:
        """Add one round: its result, the services', the client's and the machine's CPU."""
        self.calls += result.calls
        self.seconds += result.seconds
        self.cpu += cpu
        self.client_cpu += client_cpu
        self.machine_busy += busy
        self.machine_all += all_
        self.latencies += result.latencies_ms

    def where_cpu_went(self) -> str:
        """Cores busy out of all while measuring, and whose (services, client, the rest)."""
        cores = os.cpu_count() or 1
        per_s = cores / self.machine_all  # CPU seconds -> cores
        rest = self.machine_busy - self.cpu - self.client_cpu
        return (
            f"machine {self.machine_busy * per_s:.2f} of {cores} cores busy: services "
            f"{self.cpu * per_s:.2f}, client {self.client_cpu * per_s:.2f}, "
            f"PostgreSQL and the rest {rest * per_s:.2f}"
        )

    @property
    def rps(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds

    @property
    def per_cpu_second(self) -> float:
        """Calls per second of server CPU."""
        return self.calls / self.cpu

    def quantile(self, q: float) -> float:
        """Latency at `q`, ms."""
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Measure = Callable[[Deployment, str, float], Awaitable[tuple[Result, float]]]
"""One round of a scenario against a deployment for some seconds: its result and the
client's CPU seconds (warmed up before, so the servers' CPU is counted around it)."""


def python_client(
    calls: dict[int, dict[str, tuple[Call, tuple[str, ...]]]], concurrency: int
) -> Measure:
    """Rounds driven from this process (grpc.aio, `CONNECTIONS` connections a service)."""

    async def measure(one: Deployment, scenario: str, seconds: float) -> tuple[Result, float]:
        call = calls[one.workers][scenario][0]
        before = cpu_seconds(os.getpid())
        result = await load(call, concurrency, seconds)
        return result, cpu_seconds(os.getpid()) - before

    return measure


def h2load_client(
    dsn: str, fx: Fixture, channels: dict[int, dict[str, grpc.aio.Channel]], concurrency: int
) -> Measure:
    """Rounds sent by h2load processes (`h2load_round`) on `CONNECTIONS` connections, the
    requests checked through grpc before and after, AppendRecords' writes counted."""
    wires = wire_scenarios(fx)

    async def measure(one: Deployment, scenario: str, seconds: float) -> tuple[Result, float]:
        wire = wires[scenario]
        channel = channels[one.workers][wire.service]
        await check_request(channel, wire.method, wire.messages[0])
        written = await records_written(dsn, fx.space_id)
        before = cpu_seconds(os.getpid())
        result, h2load_cpu = await h2load_round(
            one.addresses[wire.service],
            wire.method,
            wire.messages,
            bearer_metadata(fx.key),
            concurrency=concurrency,
            connections=CONNECTIONS,
            seconds=seconds,
        )
        client_cpu = h2load_cpu + cpu_seconds(os.getpid()) - before
        if wire.service == "storage":
            appended = await records_written(dsn, fx.space_id) - written
            assert appended >= result.calls, f"{result.calls} answered, {appended} written"
        await check_request(channel, wire.method, wire.messages[-1])
        return result, client_cpu

    return measure


async def records_written(dsn: str, space_id: str) -> int:
    """Records appended in the space so far (the sessions' last seqs)."""
    con = await asyncpg.connect(dsn)
    try:
        return int(await con.fetchval(RECORDS_WRITTEN, uuid.UUID(space_id)))
    finally:
        await con.close()


async def run(seconds: float, rounds: int, concurrency: int, client: str) -> None:
    """Seed, start both deployments, measure in interleaved rounds, report."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    async with database() as dsn, AsyncExitStack() as stack:
        fx = await seed(dsn)
        deployed = [await stack.enter_async_context(deployment(dsn, n)) for n in (1, 2)]
        channels = {
            one.workers: {
                name: await stack.enter_async_context(
                    open_channel(address, key=fx.key, connections=CONNECTIONS)
                )
                for name, address in one.addresses.items()
            }
            for one in deployed
        }
        calls = {n: scenario_calls(c, fx) for n, c in channels.items()}
        if client == "h2load":
            measure = h2load_client(dsn, fx, channels, concurrency)
        else:
            measure = python_client(calls, concurrency)
        services = {s: reached for s, (_, reached) in calls[1].items()}  # whose CPU counts
        totals = {(n, s): Totals() for n in (1, 2) for s in SCENARIOS}
        for round_ in range(rounds):
            order = deployed if round_ % 2 == 0 else deployed[::-1]
            for scenario in SCENARIOS:
                for one in order:
                    await measure(one, scenario, 1.0)  # warm-up
                    services_before = one.cpu(services[scenario])
                    busy_before, all_before = machine_cpu()
                    result, client_cpu = await measure(one, scenario, seconds)
                    busy, all_ = machine_cpu()
                    totals[one.workers, scenario].add(
                        result,
                        one.cpu(services[scenario]) - services_before,
                        client_cpu,
                        busy - busy_before,
                        all_ - all_before,
                    )
        if client == "h2load":
            print(f"client: h2load, {CONNECTIONS} connections per service (a process per request)")
        else:
            print(f"client: grpc.aio in this process, {CONNECTIONS} connections per service")
        print(f"c{concurrency}, {rounds} rounds of {seconds:g} s, {CONNECTIONS} connections each:")
        for scenario in SCENARIOS:
            for n in (1, 2):
                t = totals[n, scenario]
                print(
                    f"  {scenario:<22} workers {n}: {t.rps:7.0f} calls/s  "
                    f"p50 {t.quantile(0.5):6.1f} ms  p99 {t.quantile(0.99):6.1f} ms  "
                    f"{t.per_cpu_second:6.0f} calls/CPU-s"
                )
                print(f"  {'':<22} workers {n}: {t.where_cpu_went()}")
            single, double = totals[1, scenario], totals[2, scenario]
            print(
                f"  {scenario:<22} 2 vs 1: throughput {double.rps / single.rps:.2f}x (target >= "
                f"1.3x), per CPU-second {double.per_cpu_second / single.per_cpu_second:.2f}x "
                "(>= 0.9x)"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"(cpus: {os.cpu_count()}; client, servers and PostgreSQL share them)")


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=4.0, help="per scenario and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--client",
        choices=("python", "h2load"),
        default="python",
        help="who sends the calls: grpc.aio in this process, or h2load processes (C: the "
        "client's CPU nearly out of the way; apt-get install nghttp2-client)",
    )
    args = parser.parse_args()
    if args.client == "h2load" and not h2load_path():
        parser.error("--client h2load: h2load is not installed (apt-get install nghttp2-client)")
    run_main(run(args.seconds, args.rounds, args.concurrency, args.client))


if __name__ == "__main__":
    main()
