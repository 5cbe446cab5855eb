"""Forks children beside live gRPC calls and counts those that die before their exec.

Run as ``python -m tests.support.fork_probe N``: a grpc.aio server and a channel
make calls back to back while a thread spawns N ``/bin/echo ok`` children with
pexpect (which closes the inherited descriptors in the child, before exec);
prints the number of children that did not print ``ok`` and exit 0. The module
imports `stello` first, as every entry package does.
"""

from __future__ import annotations

import asyncio
import sys

import stello  # noqa: F401 (first, as in every entry package)

# isort: split
import grpc
import pexpect


def spawn_children(count: int) -> int:
    """How many of `count` children failed."""
    failed = 0
    for _ in range(count):
        child = pexpect.spawn("/bin/echo", ["ok"], timeout=10, encoding="utf-8")
        output = child.read()
        child.close()
        if child.exitstatus != 0 or output.strip() != "ok":
            failed += 1
    return failed


async def main(count: int) -> None:
    """Spawn while calls run; print the failures."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
        "/stello.test.v1.Nothing/Call"
    )

    async def churn() -> None:
        while True:
            try:
                await call(b"", timeout=1)
            except grpc.aio.AioRpcError:
                pass  # UNIMPLEMENTED: the call itself is the point

    tasks = [asyncio.create_task(churn()) for _ in range(4)]
    failed = await asyncio.to_thread(spawn_children, count)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await channel.close()
    await server.stop(0)
    print(failed)  # noqa: T201 (the probe's answer)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
