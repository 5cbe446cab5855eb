"""In-process calls (`stello.serving.inproc`): what a networked call does, without the network.

Each behaviour is set against the same call over the probe server's real port
where the network has one to compare with.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import pytest

from stello.errors import error_info_reason
from stello.serving.inproc import LocalChannel, LocalServer
from stello.serving.interceptors import principal_var, request_id_var
from stello.serving.server import shutdown
from stello.storage.v1 import storage_pb2
from tests.support import probe
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace

pytestmark = pytest.mark.sql

SESSION = "00000000-0000-4000-8000-000000000001"


def request(space: TestSpace | str) -> storage_pb2.GetSessionRequest:
    sid = space if isinstance(space, str) else space.sid
    return storage_pb2.GetSessionRequest(space_id=sid, session_id=SESSION)


@pytest.fixture(name="probe_server")
async def _probe_server(start_server: ServerStarter) -> RunningServer:
    return await start_server(probe.probe_app)


@pytest.fixture(name="channels")
async def _channels(
    probe_server: RunningServer,
) -> AsyncIterator[tuple[LocalChannel, grpc.aio.Channel]]:
    """(an in-process channel to the probe, a network channel to its port)."""
    assert probe_server.app.local is not None
    network = probe_server.channel()
    local = LocalChannel(probe_server.app.local, probe_server.channel())
    yield local, network
    await local.close()
    await network.close()


Channels = tuple[LocalChannel, grpc.aio.Channel]


async def outcome(
    channel: Any, method: str, req: Any, md: Sequence[tuple[str, str]], **kw: Any
) -> tuple[grpc.StatusCode, str, str | None]:
    """(code, details, ErrorInfo reason) of one call; OK and the echoed id when it passes."""
    try:
        reply = await probe.call(channel, method)(req, metadata=md, **kw)
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or "", error_info_reason(err)
    return grpc.StatusCode.OK, reply.session.id, None


def counts(server: RunningServer, method: str) -> dict[grpc.StatusCode, int]:
    """The calls `server`'s metrics counted for `method`, by final status."""
    assert server.app.metrics is not None
    return dict(server.app.metrics.method(method).by_code)


class TestSameAsTheNetwork:
    async def test_a_call_needs_no_port(
        self, probe_server: RunningServer, channels: Channels, space: TestSpace
    ) -> None:
        """The answer comes from the handler in-process: it still comes with the port closed,
        and the server's metrics count the call (the chain ran)."""
        local, _ = channels
        await probe_server.server.stop(0)
        reply = await probe.call(local, probe.ECHO)(request(space), metadata=space.metadata)
        assert reply.session.id == SESSION
        assert counts(probe_server, probe.ECHO) == {grpc.StatusCode.OK: 1}

    @pytest.mark.parametrize(
        "case", ["no key", "unknown key", "bad scheme", "other space", "bad space", "admin"]
    )
    async def test_auth_and_tenancy_answer_alike(
        self, channels: Channels, space: TestSpace, other_space: TestSpace, case: str
    ) -> None:
        """The chain's refusals (status, message and ErrorInfo reason) are the network's."""
        md: list[tuple[str, str]] = list(space.metadata)
        req, method = request(space), probe.ECHO
        if case == "no key":
            md = []
        elif case == "unknown key":
            md = [("authorization", "Bearer sk-nobody")]
        elif case == "bad scheme":
            md = [("authorization", f"Basic {space.key}")]
        elif case == "other space":
            req = request(other_space)
        elif case == "bad space":
            req = request("not-a-uuid")
        else:
            method = probe.ADMIN
        local, network = channels
        seen = await outcome(local, method, req, md)
        assert seen[0] is not grpc.StatusCode.OK
        assert seen == await outcome(network, method, req, md)

    async def test_a_bug_is_internal_with_an_error_id(
        self, channels: Channels, space: TestSpace
    ) -> None:
        """A handler's bug answers INTERNAL with an error id, no internals, as over the wire."""
        local, network = channels
        code, details, _ = await outcome(local, probe.BOOM, request(space), space.metadata)
        wire_code, wire_details, _ = await outcome(
            network, probe.BOOM, request(space), space.metadata
        )
        assert code is wire_code is grpc.StatusCode.INTERNAL
        assert details.startswith("internal error (id ")
        assert wire_details.startswith("internal error (id ")
        assert "SELECT" not in details

    async def test_an_unknown_method_is_unimplemented(
        self, channels: Channels, space: TestSpace
    ) -> None:
        local, network = channels
        method = f"/{probe.SERVICE}/Nothing"
        code, _, _ = await outcome(local, method, request(space), space.metadata)
        assert code is grpc.StatusCode.UNIMPLEMENTED
        assert (await outcome(network, method, request(space), space.metadata))[0] is code


class TestDeadlinesAndCancellation:
    async def test_the_deadline_ends_the_call_and_the_handler(
        self, probe_server: RunningServer, channels: Channels, space: TestSpace
    ) -> None:
        """Past its deadline the call fails DEADLINE_EXCEEDED at once (the handler sleeps
        1.5 s) and the server counts it so."""
        local, _ = channels
        began = time.monotonic()
        code, _, _ = await outcome(local, probe.SLOW, request(space), space.metadata, timeout=0.2)
        assert code is grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - began < 1.0
        await asyncio.sleep(0)  # the cancelled handler's chain finishes
        assert counts(probe_server, probe.SLOW) == {grpc.StatusCode.DEADLINE_EXCEEDED: 1}

    async def test_a_cancelled_caller_cancels_the_handler(
        self, probe_server: RunningServer, channels: Channels, space: TestSpace
    ) -> None:
        local, _ = channels
        call = asyncio.ensure_future(
            probe.call(local, probe.SLOW)(request(space), metadata=space.metadata, timeout=5)
        )
        chain = probe_server.app.chain
        assert chain is not None
        for _ in range(200):  # until the handler runs: a call cancelled before never ran
            if chain.in_flight:
                break
            await asyncio.sleep(0.05)
        assert chain.in_flight, "the call never reached the handler"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert counts(probe_server, probe.SLOW) == {grpc.StatusCode.CANCELLED: 1}

    async def test_a_call_in_a_cancelled_callers_cleanup_still_answers_its_deadline(
        self, channels: Channels, space: TestSpace
    ) -> None:
        """A caller cleaning up after its own cancellation (a `finally` that gives something
        back) and whose call passes its deadline gets DEADLINE_EXCEEDED, as over the network:
        the handler's end is not taken for a second cancellation of the caller (it was
        raised as a CancelledError, past the cleanup's `except StelloError`)."""
        local, _ = channels
        seen: list[grpc.StatusCode] = []

        async def cleaning_up() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                code, _, _ = await outcome(
                    local, probe.SLOW, request(space), space.metadata, timeout=0.2
                )
                seen.append(code)

        caller = asyncio.ensure_future(cleaning_up())
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert seen == [grpc.StatusCode.DEADLINE_EXCEEDED]

    async def test_a_stopping_server_is_unavailable(
        self, probe_server: RunningServer, channels: Channels, space: TestSpace
    ) -> None:
        """Once its server shuts down, a local call answers UNAVAILABLE (retried by callers)."""
        local, _ = channels
        await shutdown(probe_server.app, probe_server.server, 0)
        code, _, _ = await outcome(local, probe.ECHO, request(space), space.metadata)
        assert code is grpc.StatusCode.UNAVAILABLE


class TestIsolation:
    async def test_the_servers_context_variables_stay_its_own(
        self, channels: Channels, space: TestSpace
    ) -> None:
        """The chain sets the request id and principal in the handler's context, not the
        caller's; the handler does not see the caller's either."""
        local, _ = channels
        token = request_id_var.set("the caller's")
        try:
            md = [*space.metadata, ("x-request-id", "the call's")]
            await probe.call(local, probe.ECHO)(request(space), metadata=md)
            assert request_id_var.get() == "the caller's"
            assert principal_var.get() is None
        finally:
            request_id_var.reset(token)

    async def test_streams_go_over_the_network(
        self, probe_server: RunningServer, channels: Channels, space: TestSpace
    ) -> None:
        """A streaming method is served through the wrapped channel (and its port)."""
        local, _ = channels
        stream = local.unary_stream(
            probe.STREAM,
            request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
            response_deserializer=storage_pb2.GetSessionResponse.FromString,
        )
        replies = [r async for r in stream(request(space), metadata=space.metadata)]
        assert [r.session.id for r in replies] == [SESSION, SESSION]
        await probe_server.server.stop(0)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            _ = [r async for r in stream(request(space), metadata=space.metadata)]
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


KEPT = storage_pb2.GetSessionResponse()
KEPT.session.id = "kept"
METHOD = "/stello.test.v1.Local/Keep"


LABEL = "/stello.test.v1.Local/Label"


async def _keep(
    request: storage_pb2.GetSessionRequest, context: Any
) -> storage_pb2.GetSessionResponse:
    request.session_id = "changed by the handler"
    return KEPT  # e.g. a cached reply


async def _label(
    request: storage_pb2.GetSessionRequest, context: Any
) -> storage_pb2.GetSessionResponse:
    """The request id this handler's context holds (no chain sets one here)."""
    reply = storage_pb2.GetSessionResponse()
    reply.session.label = request_id_var.get()
    return reply


def local_server(max_message_bytes: int = 1 << 20) -> LocalServer:
    """A local server with one method whose handler mutates its request and answers a
    shared message."""
    server = LocalServer(max_message_bytes)
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=storage_pb2.GetSessionRequest.FromString,
            response_serializer=storage_pb2.GetSessionResponse.SerializeToString,
        )
        for name, behavior in (("Keep", _keep), ("Label", _label))
    }
    server.add_handlers([grpc.method_handlers_generic_handler("stello.test.v1.Local", handlers)])
    return server


class TestMessages:
    async def test_the_handler_does_not_see_the_callers_context(
        self, probe_server: RunningServer
    ) -> None:
        """A handler runs in an empty context, as a server's does: the caller's context
        variables (its request id, its principal) are not the handler's."""
        channel = LocalChannel(local_server(), probe_server.channel())
        token = request_id_var.set("the caller's")
        try:
            reply = await probe.call(channel, LABEL)(storage_pb2.GetSessionRequest())
        finally:
            request_id_var.reset(token)
            await channel.close()
        assert reply.session.label == "-"

    async def test_each_side_has_its_own_message(self, probe_server: RunningServer) -> None:
        """The request and the reply are copied as the wire copies them: a handler changing
        its request, or a caller changing the reply, changes nothing on the other side."""
        channel = LocalChannel(local_server(), probe_server.channel())
        sent = storage_pb2.GetSessionRequest(session_id="as sent")
        reply = await probe.call(channel, METHOD)(sent)
        reply.session.id = "changed by the caller"
        assert sent.session_id == "as sent"
        assert KEPT.session.id == "kept"
        await channel.close()

    async def test_the_size_limit_holds(self, probe_server: RunningServer) -> None:
        """A request over the server's limit is RESOURCE_EXHAUSTED before any handler runs."""
        channel = LocalChannel(local_server(max_message_bytes=64), probe_server.channel())
        big = storage_pb2.GetSessionRequest(session_id="x" * 100)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await probe.call(channel, METHOD)(big)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max (102 vs. 64)" in (caught.value.details() or "")
        assert big.session_id == "x" * 100
        await channel.close()
