"""Real service processes a test can SIGKILL and start again, and what their leases look like."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stello.channels import open_channel

READY_TIMEOUT_S = 60.0

HELD = """
SELECT id FROM sessions
WHERE space_id = $1 AND id = ANY($2::uuid[]) AND turn_token IS NOT NULL
"""


@dataclass
class ServiceProcess:
    """`python -m <module>` on a port of its own, its output in a log file."""

    module: str
    env: dict[str, str]
    port: int
    log: Path
    process: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        """host:port of its gRPC server."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start it (again, on the same port) and wait until its health answers SERVING."""
        with self.log.open("a") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                self.module,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=log,
            )
        async with open_channel(self.address) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=READY_TIMEOUT_S
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, self.log.read_text()

    async def kill(self) -> None:
        """SIGKILL it and reap it."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def close(self) -> None:
        """Teardown: stop it if it still runs."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def held_leases(
    pool: asyncpg.Pool, space_id: uuid.UUID, session_ids: Sequence[str]
) -> set[str]:
    """The sessions whose lease was neither committed nor released (an expired lease keeps
    its token: only a release or a commit clears it)."""
    rows = await pool.fetch(HELD, space_id, [uuid.UUID(s) for s in session_ids])
    return {str(row["id"]) for row in rows}
