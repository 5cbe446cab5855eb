"""Turn benchmark: Send overhead with the echo provider, RPCs per turn, SendStream first delta.

Measured in one run (DESIGN §9 target: Send overhead with `echo` p50 <= 5 ms):

- Send p50/p99 at concurrency 1 with the echo provider (which answers in
  microseconds, so the latency is the gateway's own overhead: lease, reads,
  context, commit), spread over sessions seeded with 20 records each; plain,
  and with a request_id (one more read, and the reply stored by the commit);
- the plain Send against its baseline, interleaved: a bare grpc.aio storage
  and gateway making the same calls in the same order and running the same
  SQL (bench/send_baseline.py);
- SendStream: time to the first text delta, and to `done`;
- how many RPCs one turn makes to storage (and tree), counted by the gateway's
  own clients on an in-process gateway over the same storage and tree
  processes, for Send, Send with request_id, a tool-call turn and its
  SubmitToolResults;
- for scale: one bare storage AppendRecords call, the cheapest write a turn
  could be, and the machine's yardstick (bench/harness.py): the empty unary
  RPCs per second of a bare grpc.aio server, as DESIGN §9 quotes its
  machine's, and one such call's p50 (timed interleaved with the Sends).

Each server (storage, tree, gateway) runs in its own process (uvloop), the
client here.

    python bench/bench_send.py [--sends 500] [--sessions 50]

Uses STELLO_BENCH_DATABASE_URL when set (a database it may fill), else starts
the embedded PostgreSQL in a temporary folder and deletes it afterwards.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_gateway
import send_baseline
from bench_gateway import new_space, quantile
from harness import database, run_main, server_process, yardstick, yardstick_lines, yardstick_rate

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc

SEED_RECORDS = 20
ROUNDS = 5
TOOL = common_pb2.ToolDefinition(name="lookup", description="Look something up")


async def seeded_sessions(
    stub: Any, storage: Any, space: str, metadata: Any, count: int
) -> list[str]:
    """`count` roots with a system prompt and SEED_RECORDS records each."""
    records = [
        common_pb2.Record(
            role=common_pb2.RECORD_ROLE_USER if i % 2 == 0 else common_pb2.RECORD_ROLE_ASSISTANT,
            content=f"record {i} " * 10,
        )
        for i in range(SEED_RECORDS)
    ]
    ids = []
    for _ in range(count):
        reply = await stub.CreateRoot(
            agent_pb2.CreateRootRequest(space_id=space, system_prompt="You are a benchmark."),
            metadata=metadata,
        )
        await storage.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space, session_id=reply.session.id, records=records
            ),
            metadata=metadata,
        )
        ids.append(reply.session.id)
    return ids


async def timed(call: Callable[[int], Awaitable[Any]], count: int) -> list[float]:
    """Run `call(i)` `count` times in a row (after a warm-up); durations in seconds."""
    for i in range(min(20, count)):
        await call(-1 - i)
    durations = []
    for i in range(count):
        began = time.perf_counter()
        await call(i)
        durations.append(time.perf_counter() - began)
    return durations


async def first_delta(stub: Any, request: Any, metadata: Any) -> tuple[float, float]:
    """(seconds to the first text delta, seconds to done) of one SendStream."""
    began = time.perf_counter()
    first = done = 0.0
    async for event in stub.SendStream(request, metadata=metadata):
        kind = event.WhichOneof("event")
        if kind == "text_delta" and not first:
            first = time.perf_counter() - began
        if kind == "done":
            done = time.perf_counter() - began
    return first, done


async def count_turn_rpcs(
    dsn: str, storage: str, tree: str, space: str, key: str, session: str
) -> dict[str, dict[str, int]]:
    """RPCs per kind of turn by service and method, from an in-process gateway's clients."""
    counted: dict[str, dict[str, int]] = {}
    async with bench_gateway.counting_gateway(dsn, storage, tree, key) as gateway:
        stub = gateway.stub

        def send(content: str, **fields: Any) -> Awaitable[agent_pb2.SendResponse]:
            request = agent_pb2.SendRequest(
                space_id=space, session_id=session, content=content, **fields
            )
            reply: Awaitable[agent_pb2.SendResponse] = stub.Send(request)
            return reply

        counted["Send"] = await gateway.count(send("hello"))
        counted["Send with request_id"] = await gateway.count(
            send("hello", request_id=uuid.uuid4().hex)
        )
        counted["Send stopping on a tool call"] = await gateway.count(
            send("/tool lookup", tools=[TOOL])
        )
        call_id = gateway.last.pending_tool_calls[0].id
        counted["SubmitToolResults"] = await gateway.count(
            stub.SubmitToolResults(
                agent_pb2.SubmitToolResultsRequest(
                    space_id=space,
                    session_id=session,
                    results=[agent_pb2.ToolResult(tool_call_id=call_id, content="42")],
                )
            )
        )
    return counted


def report(name: str, samples: list[float]) -> None:
    """One latency line."""
    p50, p99 = quantile(samples, 0.5), quantile(samples, 0.99)
    mean = statistics.fmean(samples) * 1000
    print(f"  {name:<34} p50 {p50:6.2f}  p99 {p99:6.2f}  mean {mean:6.2f}")


async def run(sends: int, sessions: int) -> None:
    """Start the three servers, measure, report."""
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
        ids = await seeded_sessions(stub, storage, space, metadata, sessions)
        rotation = itertools.cycle(ids)

        def send(request_id: bool) -> Callable[[int], Awaitable[Any]]:
            def call(i: int) -> Awaitable[agent_pb2.SendResponse]:
                request = agent_pb2.SendRequest(
                    space_id=space,
                    session_id=next(rotation),
                    content=f"message {i}",
                    request_id=uuid.uuid4().hex if request_id else "",
                )
                reply: Awaitable[agent_pb2.SendResponse] = stub.Send(request, metadata=metadata)
                return reply

            return call

        def append(i: int) -> Awaitable[storage_pb2.AppendRecordsResponse]:
            record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=f"m {i}")
            reply: Awaitable[storage_pb2.AppendRecordsResponse] = storage.AppendRecords(
                storage_pb2.AppendRecordsRequest(
                    space_id=space, session_id=next(rotation), records=[record]
                ),
                metadata=metadata,
            )
            return reply

        print(
            f"Send with echo, concurrency 1, {sends} turns over {sessions} sessions "
            f"of {SEED_RECORDS}+ records (ms):"
        )
        ping = await stack.enter_async_context(yardstick())
        bare_storage = await stack.enter_async_context(
            server_process(send_baseline.__file__, "storage", dsn)
        )
        bare = agent_pb2_grpc.AgentGatewayStub(
            await stack.enter_async_context(
                open_channel(
                    await stack.enter_async_context(
                        server_process(send_baseline.__file__, "gateway", bare_storage)
                    )
                )
            )
        )

        def bare_send(i: int) -> Awaitable[agent_pb2.SendResponse]:
            request = agent_pb2.SendRequest(
                space_id=space, session_id=next(rotation), content=f"message {i}"
            )
            reply: Awaitable[agent_pb2.SendResponse] = bare.Send(request)
            return reply

        plain: list[float] = []
        baseline: list[float] = []
        pings: list[float] = []
        for _ in range(ROUNDS):  # interleaved: the machine's speed drifts
            plain += await timed(send(False), max(1, sends // ROUNDS))
            baseline += await timed(bare_send, max(1, sends // ROUNDS))
            pings += await timed(lambda i: ping(), max(1, sends // ROUNDS))
        report("Send", plain)
        report("bare chain (same RPCs, same SQL)", baseline)
        ratio = quantile(baseline, 0.5) / quantile(plain, 0.5)
        print(f"  ratio (bare p50 / ours p50): {ratio:.0%}")
        report("Send with request_id", await timed(send(True), sends))
        report("(storage AppendRecords, for scale)", await timed(append, sends))
        rate = await yardstick_rate(ping)
        medians = quantile(plain, 0.5), quantile(baseline, 0.5), quantile(pings, 0.5)
        for line in yardstick_lines("Send", *medians, rate):
            print(line)

        streams = [
            await first_delta(
                stub,
                agent_pb2.SendStreamRequest(
                    space_id=space, session_id=next(rotation), content=f"stream {i}"
                ),
                metadata,
            )
            for i in range(sends)
        ]
        print(f"SendStream with echo, {sends} turns (ms):")
        report("time to first text delta", [s[0] for s in streams])
        report("time to done", [s[1] for s in streams])

        counts = await count_turn_rpcs(dsn, storage_address, tree_address, space, key, ids[0])
        print("RPCs per turn (from the gateway's clients):")
        for name, calls in counts.items():
            detail = ", ".join(f"{m} {n}" for m, n in sorted(calls.items()))
            print(f"  {name:<34} {sum(calls.values())}: {detail}")
        print(f"(cpus: {os.cpu_count()}; client, three servers and PostgreSQL share them)")


def main() -> None:
    """Command line: run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sends", type=int, default=500, help="turns per latency scenario")
    parser.add_argument("--sessions", type=int, default=50, help="sessions the turns rotate over")
    args = parser.parse_args()
    run_main(run(args.sends, args.sessions))


if __name__ == "__main__":
    main()
