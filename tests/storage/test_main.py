"""``python -m storage_service``: a real process serving on its configured port."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stello.channels import open_channel
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.support.fixtures import TestSpace
from tests.support.ports import free_port

pytestmark = pytest.mark.sql


class TestMain:
    async def test_serves_until_sigterm(
        self, database_env: dict[str, str], space: TestSpace
    ) -> None:
        """It serves health and SessionStorage on STELLO_STORAGE_PORT, then exits 0 on SIGTERM."""
        port = free_port()
        env = {
            **os.environ,
            **database_env,
            "STELLO_STORAGE_PORT": str(port),
            "STELLO_AUTH_CACHE_TTL_S": "0",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "storage_service",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        channel = open_channel(f"127.0.0.1:{port}", key=space.key)
        try:
            health = health_pb2_grpc.HealthStub(channel)
            check = health_pb2.HealthCheckRequest(service="stello.storage.v1.SessionStorage")
            reply = await health.Check(check, wait_for_ready=True, timeout=20)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = storage_pb2_grpc.SessionStorageStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetSession(
                    storage_pb2.GetSessionRequest(space_id=space.sid, session_id=str(uuid.uuid4()))
                )
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        finally:
            await channel.close()
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=20)
        assert process.returncode == 0, stderr.decode()[-2000:]
