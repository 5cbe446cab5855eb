"""History benchmark: Send (echo) at 0 to 100,000 records of history (DESIGN §4.3, §9).

Measured in one run, reported as ratios against the session with no history:

- Send p50/p99 at concurrency 1 with the echo provider (a window of
  `WINDOW` tokens) on sessions of 0, 1,000, 10,000 and 100,000 records of 200
  characters, seeded with COPY and their token columns counted by
  ``stello_recount_tokens`` (the statement migration 0006 fills existing rows
  with); the first turn of each session (which may compress: a catch-up of
  at most 3 compressor calls) reported apart from the steady state (measured
  once the background fold has completed the first turn's lossy summary),
  the sizes interleaved round by round;
- storage calls per turn, counted by an in-process gateway's own clients, on
  the 100,000-record session (target: 2 without compression: BeginTurn and
  the commit Transact), and compressor calls per 100 turns there.

Target (DESIGN §9): steady state at 100,000 records <= 1.5x at 0.

    python bench/bench_history.py [--sends 200] [--sessions 3]

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
from collections.abc import Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
import bench_gateway
from bench_gateway import new_space, quantile
from harness import database, run_main, server_process

from agent_gateway.app import GatewayClients
from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from agent_gateway.llm import Completion, EchoProvider, LLMMessage, ToolSpec
from agent_gateway.llm.prompts.texts import COMPRESSOR, PRESETS
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.server import create_server, shutdown
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.support.history import seed_history

WINDOW = 8_000
"""The echo provider's window: 100,000 records are ~800 windows."""
SIZES = (0, 1_000, 10_000, 100_000)
ROUNDS = 5
FOLD_MAX_CALLS = 1_000_000
"""The gateway's budget of one background fold run: the backlog of every size at once."""
COMPRESSOR_TEXTS = frozenset(texts[COMPRESSOR.name] for texts in PRESETS.values())


class CountingEcho(EchoProvider):
    """The echo provider, counting compressor calls."""

    def __init__(self) -> None:
        super().__init__(max_context_tokens=WINDOW)
        self.compressions = 0

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Count a compressor call, then answer like echo."""
        if messages and messages[0].content in COMPRESSOR_TEXTS:
            self.compressions += 1
        return await super().complete(messages, tools=tools, max_tokens=max_tokens)


async def seeded(dsn: str, stub: Any, space: str, metadata: Any, size: int) -> str:
    """A root with `size` records of 200 characters, their tokens counted by the migration's
    statement."""
    reply = await stub.CreateRoot(
        agent_pb2.CreateRootRequest(space_id=space, system_prompt="You are a benchmark."),
        metadata=metadata,
    )
    con = await asyncpg.connect(dsn)
    try:
        await seed_history(con, uuid.UUID(space), uuid.UUID(reply.session.id), size, recount=True)
    finally:
        await con.close()
    return str(reply.session.id)


async def complete_summary(storage: Any, space: str, session: str, metadata: Any) -> None:
    """Wait until the session's newest summary is not lossy (its background fold is done)."""
    request = storage_pb2.GetCompressionCacheRequest(space_id=space, session_id=session)
    while True:
        reply = await storage.GetCompressionCache(request, metadata=metadata)
        if not reply.HasField("cache") or not reply.cache.lossy:
            return
        await asyncio.sleep(0.2)


async def timed_sends(
    stub: Any, space: str, sessions: list[str], metadata: Any, count: int
) -> list[float]:
    """`count` Sends, round robin over `sessions`; durations in seconds."""
    durations = []
    for i in range(count):
        request = agent_pb2.SendRequest(
            space_id=space, session_id=sessions[i % len(sessions)], content=f"message {i}"
        )
        began = time.perf_counter()
        await stub.Send(request, metadata=metadata)
        durations.append(time.perf_counter() - began)
    return durations


@asynccontextmanager
async def counting_gateway(dsn: str, storage: str, tree: str, key: str) -> Any:
    """An in-process gateway over the storage and tree processes, with a counting echo."""
    settings = bench_gateway._settings(dsn)
    config = GatewaySettings(storage_address=storage, tree_address=tree)
    clients = GatewayClients.connect(config, settings)
    provider = CountingEcho()
    async with create_pool(dsn, settings) as pool:
        app = gateway_app(
            settings, pool, KeyStore(pool, 60), config, clients=clients, provider=provider
        )
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        try:
            async with open_channel(f"127.0.0.1:{port}", key=key) as channel:
                yield clients, provider, agent_pb2_grpc.AgentGatewayStub(channel)
        finally:
            await shutdown(app, server, 0)


async def calls_per_turn(
    dsn: str, storage: str, tree: str, space: str, key: str, session: str, turns: int
) -> tuple[list[dict[str, int]], int]:
    """Storage calls of each of `turns` turns on `session`, and the compressor calls made."""
    async with counting_gateway(dsn, storage, tree, key) as (clients, provider, stub):
        counted = []
        for i in range(turns):
            clients.storage.calls.clear()
            content = f"turn {i} " + "of a conversation that goes on and on " * 5
            await stub.Send(
                agent_pb2.SendRequest(space_id=space, session_id=session, content=content)
            )
            counted.append(dict(clients.storage.calls))
        return counted, provider.compressions


def line(name: str, samples: list[float], zero: float | None) -> str:
    """One latency line (`samples` in seconds; `zero`: the empty session's p50 in ms)."""
    p50, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
    ratio = f"  ({p50 / zero:4.2f}x the empty session)" if zero else ""
    return f"  {name:<26} p50 {p50:7.2f}  p99 {p99:7.2f} ms{ratio}"


async def run(sends: int, per_size: int) -> None:
    """Start the three servers, seed, measure, report."""
    os.environ["STELLO_GATEWAY_ECHO_MAX_CONTEXT_TOKENS"] = str(WINDOW)
    # One background fold run completes the whole backlog: under the default budget
    # (STELLO_GATEWAY_FOLD_MAX_CALLS, 16 calls) a run stops short of 100,000 records'
    # and only the next turn starts another, so the steady state would never begin.
    os.environ["STELLO_GATEWAY_FOLD_MAX_CALLS"] = str(FOLD_MAX_CALLS)
    async with database() as dsn, AsyncExitStack() as stack:
        storage_address = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "storage", dsn)
        )
        tree_address = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "tree", dsn)
        )
        gateway = await stack.enter_async_context(
            server_process(bench_gateway.__file__, "gateway", dsn, storage_address, tree_address)
        )
        space_id, key = await new_space(dsn)
        space = str(space_id)
        metadata = (("authorization", f"Bearer {key}"),)
        stub = agent_pb2_grpc.AgentGatewayStub(
            await stack.enter_async_context(open_channel(gateway))
        )
        storage = storage_pb2_grpc.SessionStorageStub(
            await stack.enter_async_context(open_channel(storage_address))
        )
        sessions: dict[int, list[str]] = {}
        for size in SIZES:
            began = time.perf_counter()
            sessions[size] = [
                await seeded(dsn, stub, space, metadata, size) for _ in range(per_size)
            ]
            print(f"seeded {per_size} x {size:,} records in {time.perf_counter() - began:.1f} s")
        first: dict[int, list[float]] = {}
        for size in SIZES:
            first[size] = await timed_sends(stub, space, sessions[size], metadata, per_size)
            for session in sessions[size]:
                await complete_summary(storage, space, session, metadata)
        steady: dict[int, list[float]] = {size: [] for size in SIZES}
        for _ in range(ROUNDS):  # interleaved: the machine's speed drifts
            for size in SIZES:
                steady[size] += await timed_sends(
                    stub, space, sessions[size], metadata, max(1, sends // ROUNDS)
                )
        print(f"Send with echo (window {WINDOW:,} tokens), concurrency 1, records of 200 chars:")
        print(" first turn of each session (may compress, at most 3 compressor calls):")
        for size in SIZES:
            print(line(f"{size:>7,} records", first[size], None))
        zero = quantile(steady[0], 0.5)
        print(f" steady state, {sends} turns per size:")
        for size in SIZES:
            print(line(f"{size:>7,} records", steady[size], zero))
        ratio = quantile(steady[SIZES[-1]], 0.5) / quantile(steady[0], 0.5)
        verdict = "met" if ratio <= 1.5 else "NOT met"
        print(f"  target: {SIZES[-1]:,} records <= 1.5x the empty session: {ratio:.2f}x, {verdict}")

        counted, compressions = await calls_per_turn(
            dsn, storage_address, tree_address, space, key, sessions[SIZES[-1]][0], 100
        )
        plain = [c for c in counted if set(c) <= {"BeginTurn", "Transact"}]
        shapes = sorted({tuple(sorted(c.items())) for c in counted})
        print(f"Storage calls per turn, 100 turns on a {SIZES[-1]:,}-record session:")
        for shape in shapes:
            times = sum(1 for c in counted if tuple(sorted(c.items())) == shape)
            calls = ", ".join(f"{name} x{n}" for name, n in shape)
            print(f"  {times:3d} turns: {sum(n for _, n in shape)} calls ({calls})")
        print(f"  turns of BeginTurn and the commit only: {len(plain)} of 100")
        print(f"Compressor calls per 100 turns of ~200 characters there: {compressions}")


def main() -> None:
    """Command line: run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sends", type=int, default=200, help="steady-state turns per size")
    parser.add_argument("--sessions", type=int, default=3, help="sessions per size")
    args = parser.parse_args()
    run_main(run(args.sends, args.sessions))


if __name__ == "__main__":
    main()
