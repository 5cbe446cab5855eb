"""What every benchmark shares: load generation, results, server processes, a database.

Benchmarks run as scripts (``python bench/bench_storage.py``), so this module
is imported as a sibling (``from harness import ...``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from stello.db.embedded import embedded_server, ensure_database
from stello.db.migrate import migrate_dsn

Call = Callable[[int], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Result:
    """One scenario's measurements."""

    calls: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rps(self) -> float:
        """Completed calls per second."""
        return self.calls / self.seconds

    def quantile(self, q: float) -> float:
        """Latency at quantile q, in milliseconds."""
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(call: Call, concurrency: int, seconds: float) -> Result:
    """Run `concurrency` workers calling back to back; measure after a warm-up second."""
    latencies: list[float] = []
    measuring = False
    stop = False

    async def worker(index: int) -> None:
        while not stop:
            began = time.perf_counter()
            await call(index)
            if measuring:
                latencies.append((time.perf_counter() - began) * 1000)

    tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    await asyncio.sleep(1.0)
    measuring = True
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    measuring = False
    elapsed = time.perf_counter() - started
    stop = True
    await asyncio.gather(*tasks)
    return Result(len(latencies), elapsed, latencies)


async def run_calls(call: Call, concurrency: int, total: int) -> None:
    """`total` calls, `concurrency` at a time (each worker passes its own index)."""
    remaining = iter(range(total))

    async def worker(index: int) -> None:
        for _ in remaining:
            await call(index)

    await asyncio.gather(*(worker(i) for i in range(concurrency)))


async def repeat(call: Call, times: int) -> Result:
    """One warm-up call, then `times` calls back to back (for calls of a second or so)."""
    await call(0)
    latencies = []
    started = time.perf_counter()
    for _ in range(times):
        began = time.perf_counter()
        await call(0)
        latencies.append((time.perf_counter() - began) * 1000)
    return Result(times, time.perf_counter() - started, latencies)


async def wait_for_stdin_close() -> None:
    """Block until the parent closes our stdin (how a benchmark stops its servers)."""
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@dataclass(frozen=True, slots=True)
class Served:
    """A server process a benchmark started: where it listens and its pid."""

    address: str
    pid: int


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process `pid` (all its threads) has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; field 3 is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def server_process(script: str, *args: str) -> AsyncIterator[str]:
    """Run ``script serve ARGS`` (which prints ``PORT n``); yield its address; stop it on exit."""
    async with served_process(script, *args) as served:
        yield served.address


@asynccontextmanager
async def served_process(
    script: str, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[Served]:
    """`server_process`, yielding the address and the pid (for its CPU time); `env` is
    added to the process's environment."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        "serve",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None and process.stdin is not None
    line = (await process.stdout.readline()).decode()
    if not line.startswith("PORT "):
        raise RuntimeError(f"{args[0] if args else script} server did not start: {line!r}")
    try:
        yield Served(f"127.0.0.1:{line.split()[1]}", process.pid)
    finally:
        process.stdin.close()
        await process.wait()


MIGRATIONS = Path(__file__).resolve().parent.parent / "stello" / "migrations"


def migration_function(migration: str, name: str, as_name: str) -> str:
    """The CREATE statement of the function `name` as the migration file `migration`
    defined it, named `as_name` (a pg_temp name: an earlier version to time beside the
    current one)."""
    sql = (MIGRATIONS / migration).read_text()
    found = re.search(rf"CREATE (?:OR REPLACE )?FUNCTION {name}\b.*?\n\$\$;", sql, re.S)
    assert found, f"{migration} defines no function {name}"
    return found.group().replace(f"FUNCTION {name}", f"FUNCTION {as_name}", 1)


@asynccontextmanager
async def database() -> AsyncIterator[str]:
    """STELLO_BENCH_DATABASE_URL, or a fresh embedded PostgreSQL deleted afterwards."""
    configured = os.environ.get("STELLO_BENCH_DATABASE_URL")
    if configured:
        await migrate_dsn(configured)
        yield configured
        return
    with tempfile.TemporaryDirectory(prefix="stello-bench-pg-") as folder:
        with embedded_server(Path(folder) / "data", delete=True) as admin_dsn:
            dsn = await ensure_database(admin_dsn, "stello_bench")
            await migrate_dsn(dsn)
            yield dsn


# ---------------------------------------------------------------- the yardstick

PING = "/bench.Bare/Ping"
"""An empty unary RPC of a bare grpc.aio server: the cheapest call this machine makes."""

YARDSTICK_CONCURRENCY = 16
"""DESIGN §9's "a bare Python grpc.aio server answers ~2.2-2.5k unary RPC/s (Python client)
per process" is a throughput: it is measured here the same way, with this many calls open."""


async def serve_ping() -> None:
    """Serve PING on a free port, print it, run until stdin closes."""
    server = grpc.aio.server()

    async def ping(request: bytes, context: Any) -> bytes:
        return b""

    service, method = PING.strip("/").split("/")
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(ping)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"PORT {port}", flush=True)
    await wait_for_stdin_close()
    await server.stop(1)


@asynccontextmanager
async def yardstick() -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """A PING server in its own process; yields the call that pings it once."""
    async with server_process(__file__, "ping") as address:
        channel = grpc.aio.insecure_channel(address)
        try:
            ping: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PING)
            yield lambda: ping(b"")
        finally:
            await channel.close()


async def yardstick_rate(ping: Callable[[], Awaitable[Any]], seconds: float = 2.0) -> float:
    """Empty RPCs per second the bare server answers with YARDSTICK_CONCURRENCY calls open."""
    result = await load(lambda _: ping(), YARDSTICK_CONCURRENCY, seconds)
    return result.rps


def yardstick_lines(
    name: str, p50_ms: float, baseline_p50_ms: float, ping_p50_ms: float, rate: float
) -> list[str]:
    """This machine beside DESIGN §9's, and `name`'s p50 (ours, the bare chain's) in empty calls."""
    return [
        f"  this machine: a bare grpc.aio server answers {rate:,.0f} empty unary RPC/s"
        f" ({YARDSTICK_CONCURRENCY} open calls; DESIGN §9's machine: 2.2-2.5k/s);"
        f" one call at a time p50 {ping_p50_ms:.2f} ms",
        f"  {name} p50 in empty calls made one at a time: ours {p50_ms / ping_p50_ms:.1f},"
        f" the bare chain {baseline_p50_ms / ping_p50_ms:.1f}"
        f" (the 5 ms target: {5 / ping_p50_ms:.1f} here)",
    ]


def run_main(main: Coroutine[Any, Any, Any]) -> None:
    """Run a benchmark's (or its server's) main coroutine on the services' event loop (uvloop).

    platformdirs warns when XDG_RUNTIME_DIR is unset (containers); the embedded server
    reads it, and nothing here acts on it.

    SIGTERM stops it as Ctrl-C does: the main coroutine is cancelled, so its embedded
    PostgreSQL stops and its folder goes (killed by the default handler, a benchmark left
    its server running, still busy with its statement).
    """
    from stello.serving.runner import event_loop_factory

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main)


if __name__ == "__main__":
    # `python harness.py serve ping`: the yardstick's server (see `yardstick`).
    assert sys.argv[1:] == ["serve", "ping"], sys.argv
    run_main(serve_ping())
