"""The server factory: auth and tenancy, health following the database, graceful stop."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Sequence

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from stello.auth import KeyStore
from stello.db.pool import create_pool
from stello.errors import error_info_reason, field_violations
from stello.serving.server import ServiceApp, create_server, shutdown, shutdown_all
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.support import probe
from tests.support.fixtures import ServerStarter, TestSpace
from tests.support.proxy import PgProxy

pytestmark = pytest.mark.sql

SESSION = "00000000-0000-4000-8000-000000000001"


def request(space: TestSpace | str) -> storage_pb2.GetSessionRequest:
    sid = space if isinstance(space, str) else space.sid
    return storage_pb2.GetSessionRequest(space_id=sid, session_id=SESSION)


async def status_of(
    channel: grpc.aio.Channel,
    method: str,
    req: storage_pb2.GetSessionRequest,
    md: Sequence[tuple[str, str]],
) -> grpc.StatusCode:
    try:
        await probe.call(channel, method)(req, metadata=md)
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


class TestAuth:
    async def test_own_space_passes(self, start_server: ServerStarter, space: TestSpace) -> None:
        """A tenant key reaches its own space and the call runs."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            reply = await probe.call(channel, probe.ECHO)(request(space), metadata=space.metadata)
        assert reply.session.id == SESSION

    @pytest.mark.parametrize(
        "header",
        [
            pytest.param(None, id="missing"),
            pytest.param("Bearer stello_000000000000_nope", id="unknown"),
            pytest.param("Basic abc", id="wrong-scheme"),
        ],
    )
    async def test_bad_key_is_unauthenticated(
        self, start_server: ServerStarter, space: TestSpace, header: str | None
    ) -> None:
        """A missing, unknown or malformed key answers UNAUTHENTICATED."""
        running = await start_server(probe.probe_app)
        md = () if header is None else (("authorization", header),)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ECHO, request(space), md) == (
                grpc.StatusCode.UNAUTHENTICATED
            )

    async def test_revoked_key_is_unauthenticated(
        self, start_server: ServerStarter, space: TestSpace, keys: KeyStore
    ) -> None:
        """A key stops working once revoked (cache TTL 0 in tests)."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ECHO, request(space), space.metadata) == (
                grpc.StatusCode.OK
            )
            assert await keys.revoke(space.key_id)
            assert await status_of(channel, probe.ECHO, request(space), space.metadata) == (
                grpc.StatusCode.UNAUTHENTICATED
            )

    async def test_other_space_is_not_found(
        self, start_server: ServerStarter, space: TestSpace, other_space: TestSpace
    ) -> None:
        """A tenant key naming another space's id gets NOT_FOUND, never PERMISSION_DENIED."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ECHO, request(other_space), space.metadata) == (
                grpc.StatusCode.NOT_FOUND
            )

    async def test_malformed_space_is_invalid(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """A space_id that is not a UUID is INVALID_ARGUMENT naming the field."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await probe.call(channel, probe.ECHO)(request("nope"), metadata=space.metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == ["space_id"]

    async def test_tenant_key_on_admin_rpc_is_denied(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """A tenant key calling an admin RPC is PERMISSION_DENIED."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ADMIN, request(space), space.metadata) == (
                grpc.StatusCode.PERMISSION_DENIED
            )

    async def test_admin_key_reaches_admin_rpc_and_any_space(
        self, start_server: ServerStarter, space: TestSpace, admin_key: str
    ) -> None:
        """An admin key may call admin RPCs and name any space."""
        running = await start_server(probe.probe_app)
        md = (("authorization", f"Bearer {admin_key}"),)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ADMIN, request(space), md) == grpc.StatusCode.OK


class TestChannelKey:
    async def test_key_reaches_unary_and_streaming_calls(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """open_channel(key=...) authenticates unary and server-streaming calls alike."""
        running = await start_server(probe.probe_app)
        async with running.channel(space.key) as channel:
            reply = await probe.call(channel, probe.ECHO)(request(space))
            stream = channel.unary_stream(
                probe.STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            replies = [r.session.id async for r in stream(request(space))]
        assert reply.session.id == SESSION
        assert replies == [SESSION, SESSION]


class TestHealthAndReflection:
    async def test_health_needs_no_key(self, start_server: ServerStarter) -> None:
        """Health answers SERVING without a key, for the server and the service."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for name in ("", probe.SERVICE):
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=name))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING

    async def test_reflection_lists_services(self, start_server: ServerStarter) -> None:
        """Reflection lists the app's services without a key."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            call = stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
            names = [s.name async for r in call for s in r.list_services_response.service]
        assert probe.SERVICE in names

    async def test_health_follows_database(self, settings: StelloSettings, keys: KeyStore) -> None:
        """Health goes NOT_SERVING while the database is unreachable and SERVING once it returns."""
        assert settings.database_url is not None
        proxy = PgProxy(settings.database_url)
        await proxy.open()
        async with create_pool(
            proxy.dsn, settings.model_copy(update={"db_pool_min_size": 0})
        ) as pool:
            app: ServiceApp = probe.probe_app(settings, pool, keys)
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    stub = health_pb2_grpc.HealthStub(channel)
                    assert await _status(stub) == health_pb2.HealthCheckResponse.SERVING
                    await proxy.cut()
                    assert await _wait_for(stub, health_pb2.HealthCheckResponse.NOT_SERVING)
                    await proxy.open()
                    assert await _wait_for(stub, health_pb2.HealthCheckResponse.SERVING)
            finally:
                await shutdown(app, server, 0)
                await proxy.cut()


async def _status(stub: health_pb2_grpc.HealthStub) -> int:
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""))
    return int(reply.status)


async def _wait_for(stub: health_pb2_grpc.HealthStub, wanted: int, within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if await _status(stub) == wanted:
            return True
        await asyncio.sleep(0.1)
    return False


class TestGracefulShutdown:
    async def test_a_shutdown_in_a_cancelled_tasks_cleanup_goes_to_its_end(
        self, settings: StelloSettings, keys: KeyStore
    ) -> None:
        """`stello up` shuts its servers down in the `finally` of its task, which Ctrl-C
        cancelled: stopping the health monitor's task there must not be taken for a second
        cancellation, or the shutdown ends at its first step (the server never stopped,
        the background tasks never stopped, the other servers never shut down)."""
        assert settings.database_url is not None
        async with create_pool(settings.database_url, settings) as pool:
            app: ServiceApp = probe.probe_app(settings, pool, keys)
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()

            async def serving() -> None:
                try:
                    await asyncio.Event().wait()
                finally:
                    await shutdown(app, server, 0)

            try:
                task = asyncio.ensure_future(serving())
                await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    stub = health_pb2_grpc.HealthStub(channel)
                    with pytest.raises(grpc.aio.AioRpcError) as failed:
                        await _status(stub)
                assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            finally:
                await server.stop(None)
                for background in app.background:
                    await background.stop()

    async def test_sigterm_lets_in_flight_calls_finish(
        self, database_url: str, database_env: dict[str, str], space: TestSpace
    ) -> None:
        """On SIGTERM a call already running completes OK, then the process exits cleanly."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.probe",
            database_url,
            env={**os.environ, **database_env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            port = int((await asyncio.wait_for(proc.stdout.readline(), 30)).strip())
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                slow = asyncio.ensure_future(
                    probe.call(channel, probe.SLOW)(request(space), metadata=space.metadata)
                )
                began = await asyncio.wait_for(proc.stdout.readline(), 30)
                assert began.strip() == b"slow", began  # the call is in flight
                proc.send_signal(signal.SIGTERM)
                reply = await asyncio.wait_for(slow, 10)
            assert reply.session.id == SESSION
            assert await asyncio.wait_for(proc.wait(), 15) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def test_error_reason_helper_handles_plain_errors() -> None:
    """error_info_reason is None for an error with no details (not a crash)."""

    class Plain(grpc.RpcError):
        def trailing_metadata(self) -> tuple[()]:
            return ()

        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.INTERNAL

        def details(self) -> str:
            return "x"

    assert error_info_reason(Plain()) is None


class TestMetrics:
    async def test_calls_are_counted_by_code(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """Each RPC is counted under its method and final status code, and timed."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            assert await status_of(channel, probe.ECHO, request(space), space.metadata) == (
                grpc.StatusCode.OK
            )
            assert await status_of(channel, probe.ECHO, request(space), ()) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
        metrics = running.app.metrics
        assert metrics is not None

        def count(code: str) -> float | None:
            labels = {"service": "probe", "method": probe.ECHO, "code": code}
            return metrics.registry.get_sample_value("stello_rpc_calls_total", labels)

        assert count("OK") == 1
        assert count("UNAUTHENTICATED") == 1
        timed = metrics.registry.get_sample_value(
            "stello_rpc_duration_seconds_count", {"service": "probe", "method": probe.ECHO}
        )
        assert timed == 2


class _Stoppable:
    """A background task that records its stop, failing it when told to (`cancelled`: its
    stop awaits a task someone else cancelled, and raises that CancelledError)."""

    def __init__(
        self, name: str, stopped: list[str], fails: bool = False, cancelled: bool = False
    ) -> None:
        self.name = name
        self.stopped = stopped
        self.fails = fails
        self.cancelled = cancelled

    def start(self) -> None:
        """Nothing runs."""

    async def stop(self) -> None:
        """Record the stop; raise when told to."""
        self.stopped.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} failed to stop")
        if self.cancelled:
            gone = asyncio.ensure_future(asyncio.Event().wait())
            gone.cancel()
            await gone


class TestShutdownSteps:
    async def test_a_failing_step_stops_everything_then_raises_the_first(
        self, settings: StelloSettings, keys: KeyStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A background task whose stop raises (and an at_shutdown end that raises) skip
        nothing: the server stops, every other background task is stopped, each failure is
        logged under an error id, and the first is raised once all were stopped."""
        assert settings.database_url is not None
        stopped: list[str] = []

        async def failing_end() -> None:
            stopped.append("end")
            raise RuntimeError("end failed")

        async def other_end() -> None:
            stopped.append("other end")

        async with create_pool(settings.database_url, settings) as pool:
            app = dataclasses.replace(
                probe.probe_app(settings, pool, keys),
                background=(
                    _Stoppable("first", stopped),
                    _Stoppable("second", stopped, fails=True),
                    _Stoppable("third", stopped, fails=True),
                ),
                at_shutdown=(failing_end, other_end),
            )
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            try:
                with (
                    caplog.at_level(logging.ERROR, logger="stello.serving.server"),
                    pytest.raises(RuntimeError, match="end failed"),
                ):
                    await shutdown(app, server, 0)
                assert stopped == ["end", "other end", "third", "second", "first"]
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    with pytest.raises(grpc.aio.AioRpcError) as failed:
                        await _status(health_pb2_grpc.HealthStub(channel))
                assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
                said = [r.getMessage() for r in caplog.records]
                assert len(said) == 3, said
                assert all(re.search(r"\(error id [0-9a-f]{16}\)", line) for line in said), said
                assert ["end failed" in said[0], "third" in said[1], "second" in said[2]] == [
                    True,
                    True,
                    True,
                ], said
            finally:
                await server.stop(None)

    async def test_a_step_cancelled_on_its_own_stops_everything_then_raises_it(
        self, settings: StelloSettings, keys: KeyStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A background task whose stop raises CancelledError of its own (it awaited a task
        someone else cancelled; the shutdown is not cancelled) skips nothing: the other
        background tasks are stopped, the step is logged as failed under an error id, and its
        CancelledError is raised after the last step. Before, it ended the shutdown there:
        the background tasks after it (pollers, the erasure job) kept running."""
        assert settings.database_url is not None
        stopped: list[str] = []
        async with create_pool(settings.database_url, settings) as pool:
            app = dataclasses.replace(
                probe.probe_app(settings, pool, keys),
                background=(
                    _Stoppable("first", stopped),
                    _Stoppable("second", stopped, cancelled=True),
                    _Stoppable("third", stopped),
                ),
            )
            server, _ = await create_server(app, "127.0.0.1:0")
            await server.start()
            try:
                with (
                    caplog.at_level(logging.ERROR, logger="stello.serving.server"),
                    pytest.raises(asyncio.CancelledError),
                ):
                    await shutdown(app, server, 0)
                assert stopped == ["third", "second", "first"]
                said = [r.getMessage() for r in caplog.records]
                assert len(said) == 1, said
                assert re.fullmatch(
                    r"probe: stopping _Stoppable failed during shutdown: it was cancelled "
                    r"\(error id [0-9a-f]{16}\)",
                    said[0],
                ), said
            finally:
                await server.stop(None)

    async def test_one_service_failing_to_stop_leaves_none_of_the_others_running(
        self, settings: StelloSettings, keys: KeyStore
    ) -> None:
        """`stello up` shuts its services down one after the other (`shutdown_all`): the
        first one's failure still shuts down the next, then is raised."""
        assert settings.database_url is not None
        stopped: list[str] = []
        async with create_pool(settings.database_url, settings) as pool:
            running = []
            for name, fails in (("earlier", False), ("later", True)):
                app = dataclasses.replace(
                    probe.probe_app(settings, pool, keys),
                    name=name,
                    background=(_Stoppable(name, stopped, fails=fails),),
                )
                running.append((app, (await create_server(app, "127.0.0.1:0"))[0]))
            for _, server in running:
                await server.start()
            try:
                with pytest.raises(RuntimeError, match="later failed to stop"):
                    await shutdown_all(running, 0)
                assert stopped == ["later", "earlier"]
            finally:
                for _, server in running:
                    await server.stop(None)
