"""/metrics shows saturation: the database pool's connections and the calls in flight
(explore11 F7)."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stello.auth import KeyStore
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.support import probe
from tests.support.fixtures import ServerStarter, TestSpace

pytestmark = pytest.mark.sql


def _request(space: TestSpace) -> storage_pb2.GetSessionRequest:
    return storage_pb2.GetSessionRequest(
        space_id=space.sid, session_id="00000000-0000-4000-8000-000000000001"
    )


async def _eventually(check: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "never came true"
        await asyncio.sleep(0.02)


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples /metrics on `port` serves, by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture(name="pooled")
async def _pooled(
    settings: StelloSettings, database_url: str, keys: KeyStore
) -> AsyncIterator[ServiceApp]:
    """A probe server with a pool of its own (three at most, none opened at start) and
    /metrics on a free port."""
    sized = settings.model_copy(update={"db_pool_min_size": 0, "db_pool_max_size": 3})
    async with create_pool(database_url, sized) as pool:
        app = probe.probe_app(sized, pool, keys)
        app.metrics_port = 0
        server, _ = await create_server(app, "127.0.0.1:0")
        await server.start()
        try:
            yield app
        finally:
            await shutdown(app, server, 0)


class TestPoolGauges:
    async def test_connections_in_use_and_idle_and_the_most(self, pooled: ServiceApp) -> None:
        """While the test holds two of the pool's three connections, /metrics shows two in
        use and none idle; released, two idle and none in use; the most is three."""
        assert pooled.metrics_port is not None
        idle = ("stello_db_pool_connections", (("state", "idle"),))
        in_use = ("stello_db_pool_connections", (("state", "in_use"),))
        most = ("stello_db_pool_max_connections", ())
        async with pooled.pool.acquire(), pooled.pool.acquire():
            held = await asyncio.to_thread(_scrape, pooled.metrics_port)
        assert (held[in_use], held[idle], held[most]) == (2, 0, 3)
        released = await asyncio.to_thread(_scrape, pooled.metrics_port)
        assert (released[in_use], released[idle], released[most]) == (0, 2, 3)


class TestInFlight:
    async def test_a_unary_call_counts_while_it_runs(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """A call being handled counts in `stello_rpc_in_flight` for its method, and no longer
        once it answered."""
        running = await start_server(probe.probe_app)
        metrics = running.app.metrics
        assert metrics is not None
        labels = {"service": "probe", "method": probe.SLOW}

        def in_flight() -> float | None:
            return metrics.registry.get_sample_value("stello_rpc_in_flight", labels)

        async with running.channel() as channel:
            slow = asyncio.ensure_future(
                probe.call(channel, probe.SLOW)(_request(space), metadata=space.metadata)
            )
            await _eventually(lambda: in_flight() == 1)
            await slow
        assert in_flight() == 0

    async def test_a_stream_counts_until_the_client_cancels_it(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """A server stream counts in flight from its start until the client cancels it."""
        running = await start_server(probe.probe_app)
        metrics = running.app.metrics
        assert metrics is not None
        labels = {"service": "probe", "method": probe.SLOW_STREAM}

        def in_flight() -> float | None:
            return metrics.registry.get_sample_value("stello_rpc_in_flight", labels)

        async with running.channel() as channel:
            stream = channel.unary_stream(
                probe.SLOW_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )(_request(space), metadata=space.metadata)
            await stream.read()
            assert in_flight() == 1
            stream.cancel()
            await _eventually(lambda: in_flight() == 0)
