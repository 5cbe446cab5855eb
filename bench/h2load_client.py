"""A load client that costs the machine almost no CPU: h2load (nghttp2, C) sending gRPC.

`bench_workers.py --client h2load` uses it where the Python client's own CPU would
hide what a second worker adds: on a 2-core machine the grpc.aio client took a
third to a half of a core. One h2load process per distinct request (16 at
most) sends it, framed as gRPC frames it (a 0 flag, the length in 4 bytes
big-endian, the message), over and over, on its share of the connections
(SO_REUSEPORT spreads them over the workers) with its share of the calls in
flight on each.

h2load reads HTTP status only, and gRPC answers its errors with HTTP 200 and a
`grpc-status` trailer, so every request is sent once through grpc first
(`check_request`: it must answer OK), and what a round wrote is counted by the
caller (AppendRecords' records). Not installed by the project (no test needs
it): `apt-get install nghttp2-client`; `h2load_path()` says whether it is here.
"""

from __future__ import annotations

import asyncio
import re
import resource
import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

import grpc
from harness import Result

SUCCEEDED = re.compile(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded")


def h2load_path() -> str | None:
    """Where h2load is, or None."""
    return shutil.which("h2load")


def grpc_frame(message: bytes) -> bytes:
    """`message` as one uncompressed gRPC length-prefixed message."""
    return struct.pack(">BI", 0, len(message)) + message


async def check_request(channel: grpc.aio.Channel, method: str, message: bytes) -> None:
    """Send `message` to `method` once through grpc; raises unless it answers OK."""
    call = channel.unary_unary(
        method, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    await call(message, timeout=10)


def children_cpu() -> float:
    """CPU seconds of this process's finished and waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def h2load_round(
    address: str,
    method: str,
    messages: Sequence[bytes],
    headers: Sequence[tuple[str, str]],
    *,
    concurrency: int,
    connections: int,
    seconds: float,
) -> tuple[Result, float]:
    """`messages` sent to `method` for `seconds`, `concurrency` calls in flight on
    `connections` connections, by one h2load process per message (`connections` at
    most: the messages beyond are not sent): the calls answered (HTTP 200) with their
    latencies, and the CPU seconds the processes took."""
    binary = h2load_path()
    assert binary, "h2load is not installed: apt-get install nghttp2-client"
    processes = min(len(messages), connections)
    per_process = connections // processes
    streams = max(1, concurrency // (processes * per_process))
    before = children_cpu()
    with tempfile.TemporaryDirectory(prefix="stello-h2load-") as folder:
        base = Path(folder)
        bodies = []
        for index, message in enumerate(messages[:processes]):
            body = base / f"body{index}"
            body.write_bytes(grpc_frame(message))
            bodies.append(body)
        args = [
            f"-H{name}: {value}"
            for name, value in (
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                *headers,
            )
        ]
        running = [
            await asyncio.create_subprocess_exec(
                binary,
                f"-c{per_process}",
                f"-m{streams}",
                f"-D{seconds:g}",
                f"-d{bodies[i]}",
                f"--log-file={base / f'log{i}'}",
                *args,
                f"http://{address}{method}",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            for i in range(processes)
        ]
        outputs = [(await p.communicate())[0].decode() for p in running]
        calls = sum(_succeeded(out) for out in outputs)
        latencies = [
            int(line.split("\t")[2]) / 1000
            for i in range(processes)
            for line in (base / f"log{i}").read_text().splitlines()
            if line.split("\t")[1] == "200"
        ]
    return Result(calls, seconds, latencies), children_cpu() - before


def _succeeded(output: str) -> int:
    """The requests one h2load run counts as succeeded (HTTP 2xx, measured time only)."""
    found = SUCCEEDED.search(output)
    assert found, f"h2load printed no request counts:\n{output}"
    return int(found.group(1))
