"""Two storage replicas behind one round-robin channel: killing one loses no acknowledged write."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.ports import free_port

pytestmark = [pytest.mark.sql, pytest.mark.subprocess]

SESSIONS = 6
APPENDS_PER_SESSION = 40
APPEND = "/stello.storage.v1.SessionStorage/AppendRecords"


@dataclass
class Replica:
    """A `python -m storage_service` process with its gRPC and metrics ports."""

    process: asyncio.subprocess.Process
    port: int
    metrics_port: int

    @property
    def address(self) -> str:
        """host:port of its gRPC server."""
        return f"127.0.0.1:{self.port}"

    async def scrape(self) -> dict[str, float]:
        """stello_rpc_calls_total by method, read from its /metrics over HTTP."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
        calls: dict[str, float] = {}
        for family in text_string_to_metric_families(text.decode()):
            for sample in family.samples:
                if sample.name == "stello_rpc_calls_total":
                    method = sample.labels["method"]
                    calls[method] = calls.get(method, 0.0) + sample.value
        return calls


async def start_replica(database_env: dict[str, str]) -> Replica:
    """Start one storage process on free ports (metrics on), SERVING within 30 s.

    Ports are picked free but may be taken before the process binds them (the CI passes run
    side by side): a process that exits saying so is started again on new ports; one that
    exits otherwise fails the test with its stderr."""
    for _ in range(3):
        port, metrics_port = free_port(), free_port()
        env = {
            **os.environ,
            **database_env,
            "STELLO_STORAGE_PORT": str(port),
            "STELLO_STORAGE_METRICS_PORT": str(metrics_port),
            "STELLO_AUTH_CACHE_TTL_S": "0",
        }
        with tempfile.TemporaryFile() as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "storage_service",
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
            )
            replica = Replica(process, port, metrics_port)
            if await serving(replica):
                return replica
            await process.wait()
            stderr.seek(0)
            said = stderr.read().decode(errors="replace")
        if "in use" not in said:
            raise AssertionError(f"storage exited ({process.returncode}): {said[-2000:]}")
    raise AssertionError("no free ports for a storage replica in three tries")


async def serving(replica: Replica) -> bool:
    """True once the replica answers SERVING (within 30 s); False when its process exited."""
    deadline = time.monotonic() + 30
    async with open_channel(replica.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if replica.process.returncode is not None:
                return False
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=0.5)
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.05)
                continue
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            return True
    raise AssertionError(f"storage on {replica.address} not SERVING within 30 s")


async def append_with_retry(
    stub: storage_pb2_grpc.SessionStorageStub, request: storage_pb2.AppendRecordsRequest
) -> storage_pb2.AppendRecordsResponse:
    """AppendRecords, retried with the same request_id while a replica is unreachable."""
    for attempt in range(50):
        try:
            reply: storage_pb2.AppendRecordsResponse = await stub.AppendRecords(request, timeout=10)
            return reply
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(min(0.01 * 2**attempt, 0.2))
    raise AssertionError("storage stayed unavailable")


async def test_killing_a_replica_loses_no_acknowledged_write(
    database_env: dict[str, str], space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
) -> None:
    """Appends spread over two replicas; one is SIGKILLed mid-run; every acked record is stored."""
    first, second = await asyncio.gather(start_replica(database_env), start_replica(database_env))
    sessions = [await make_session() for _ in range(SESSIONS)]
    acked: dict[uuid.UUID, set[tuple[int, str]]] = {session: set() for session in sessions}
    half = asyncio.Event()
    before: list[dict[str, float]] = []
    total = SESSIONS * APPENDS_PER_SESSION
    try:
        async with open_channel([first.address, second.address], key=space.key) as channel:
            stub = storage_pb2_grpc.SessionStorageStub(channel)

            async def writer(session: uuid.UUID) -> None:
                for i in range(APPENDS_PER_SESSION):
                    content = f"record {i}"
                    request = storage_pb2.AppendRecordsRequest(
                        space_id=space.sid,
                        session_id=str(session),
                        records=[
                            common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=content)
                        ],
                        request_id=f"{session}-{i}",
                    )
                    reply = await append_with_retry(stub, request)
                    acked[session].add((reply.records[0].seq, content))
                    if sum(map(len, acked.values())) >= total // 3:
                        half.set()

            async def killer() -> None:
                await half.wait()
                before.extend(await asyncio.gather(first.scrape(), second.scrape()))
                assert all(calls.get(APPEND, 0) > 0 for calls in before), before
                first.process.send_signal(signal.SIGKILL)
                await first.process.wait()

            await asyncio.gather(killer(), *(writer(session) for session in sessions))
        after = await second.scrape()
    finally:
        for replica in (first, second):
            if replica.process.returncode is None:
                replica.process.send_signal(signal.SIGTERM)
                await replica.process.wait()

    assert first.process.returncode == -signal.SIGKILL
    assert after[APPEND] > before[1][APPEND]  # the survivor took the rest
    async with pool.acquire() as con:
        for session in sessions:
            rows = await con.fetch(
                "SELECT seq, content FROM records WHERE space_id = $1 AND session_id = $2",
                space.id,
                session,
            )
            stored = {(row["seq"], row["content"]) for row in rows}
            assert len(acked[session]) == APPENDS_PER_SESSION
            assert stored == acked[session]  # every ack stored, nothing stored twice
