"""The health monitor pings over a connection of its own: a pool that every call holds is
said in the log as saturated, never NOT_SERVING (explore11 F3)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stello.auth import KeyStore
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from tests.support import probe

pytestmark = pytest.mark.sql

SERVING = health_pb2.HealthCheckResponse.SERVING
SATURATED = "the database pool is saturated: all 2 connections in use"


@pytest.fixture(name="small")
async def _small(
    settings: StelloSettings, database_url: str, keys: KeyStore
) -> AsyncIterator[tuple[ServiceApp, int]]:
    """A probe server whose pool holds at most two connections (both opened at start)."""
    sized = settings.model_copy(update={"db_pool_min_size": 2, "db_pool_max_size": 2})
    async with create_pool(database_url, sized) as pool:
        app = probe.probe_app(sized, pool, keys)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        try:
            yield app, port
        finally:
            await shutdown(app, server, 0)


async def _status(port: int) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    return int(reply.status)


class TestHealthMonitor:
    async def test_a_pool_held_whole_stays_serving_and_is_said_saturated(
        self, small: tuple[ServiceApp, int], caplog: pytest.LogCaptureFixture
    ) -> None:
        """With every pooled connection held for fifteen health intervals, health stays
        SERVING and the log says once that the pool is saturated (not that the database is
        unreachable); once they are released, that it has idle connections again."""
        app, port = small
        pool, monitor = app.pool, app.monitor
        assert monitor is not None
        caplog.set_level(logging.INFO, logger="stello.serving.server")
        async with pool.acquire(), pool.acquire():
            assert pool.get_idle_size() == 0
            for _ in range(15):  # 0.2 s each
                assert await _status(port) == SERVING
                await asyncio.sleep(app.settings.health_interval_s)
            assert monitor.serving and monitor.saturated
        said = [r.getMessage() for r in caplog.records if r.name == "stello.serving.server"]
        assert [line for line in said if line.startswith(SATURATED)] == [said[0]], said
        assert not any("NOT_SERVING" in line for line in said), said
        for _ in range(50):
            if "the database pool has idle connections again" in caplog.messages:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"never said the pool is free again: {caplog.messages}")
        assert not monitor.saturated
        assert await _status(port) == SERVING
