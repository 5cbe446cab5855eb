"""The call chain: access-line levels, request ids, codes counted, streams abandoned, the space."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import asyncpg
import grpc
import pytest

from stello.auth import KeyStore
from stello.errors import InvalidArgument, error_info_metadata, error_info_reason
from stello.serving.access_log import AccessLog
from stello.serving.interceptors import RequestIds
from stello.serving.server import ServiceApp
from stello.serving.space_calls import Slot, SpaceCalls, current_slot, waiting_aside
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from stello.validation import checked_space, space_uuid
from tests.support import probe
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace

SESSION = "00000000-0000-4000-8000-000000000001"
OK = grpc.StatusCode.OK
AppFactory = Callable[[StelloSettings, asyncpg.Pool, KeyStore], ServiceApp]


def probe_with(**changes: object) -> AppFactory:
    """The probe app with these settings changed (e.g. ``access_log=True``)."""

    def factory(settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore) -> ServiceApp:
        return probe.probe_app(settings.model_copy(update=changes), pool, keys)

    return factory


def request(space_id: str) -> storage_pb2.GetSessionRequest:
    """A probe request naming `space_id`."""
    return storage_pb2.GetSessionRequest(space_id=space_id, session_id=SESSION)


@pytest.fixture(name="rpc_logs")
def _rpc_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="stello.rpc")
    return caplog


def access_lines(logs: pytest.LogCaptureFixture, method: str) -> list[logging.LogRecord]:
    """The access lines written for `method`."""
    prefix = f"rpc {method} "
    return [r for r in logs.records if r.getMessage().startswith(prefix)]


async def logged(
    logs: pytest.LogCaptureFixture, method: str, count: int = 1
) -> list[logging.LogRecord]:
    """The access lines of `method` once there are `count` (the server writes a call's line
    after its reply is sent, so the client may hear the answer first); fewer after 5 s."""
    lines = access_lines(logs, method)
    for _ in range(500):
        if len(lines) >= count:
            break
        await asyncio.sleep(0.01)
        lines = access_lines(logs, method)
    return lines


async def call_echo(
    running: RunningServer, space: TestSpace, metadata: tuple[tuple[str, str], ...] | None = None
) -> grpc.StatusCode:
    """Call the probe's Echo once; the status it ended with."""
    async with running.channel() as channel:
        try:
            await probe.call(channel, probe.ECHO)(
                request(space.sid), metadata=space.metadata if metadata is None else metadata
            )
        except grpc.aio.AioRpcError as error:
            return error.code()
    return OK


def calls_counted(running: RunningServer, method: str, code: str) -> float:
    """How many calls of `method` the server counted with `code`."""
    metrics = running.app.metrics
    assert metrics is not None
    labels = {"service": "probe", "method": method, "code": code}
    return metrics.registry.get_sample_value("stello_rpc_calls_total", labels) or 0.0


def codes_counted(running: RunningServer, method: str) -> dict[str, float]:
    """Every code the server counted calls of `method` under (what a failed wait saw)."""
    metrics = running.app.metrics
    assert metrics is not None
    return {
        sample.labels["code"]: sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "stello_rpc_calls_total" and sample.labels.get("method") == method
    }


@pytest.mark.sql
class TestAccessLines:
    """A line per call at DEBUG, INFO when asked, and INFO always for failed and slow calls."""

    async def test_default_is_debug(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """By default a fast OK call's access line is DEBUG (invisible at INFO)."""
        running = await start_server(probe.probe_app)
        assert await call_echo(running, space) is OK
        assert [r.levelno for r in await logged(rpc_logs, probe.ECHO)] == [logging.DEBUG]

    async def test_access_log_on_is_info(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """With STELLO_ACCESS_LOG on, every call has one INFO line: method, code, time."""
        running = await start_server(probe_with(access_log=True))
        assert await call_echo(running, space) is OK
        (line,) = await logged(rpc_logs, probe.ECHO)
        assert line.levelno == logging.INFO
        assert re.fullmatch(rf"rpc {probe.ECHO} OK \d+\.\dms", line.getMessage())

    async def test_failed_call_is_info(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A call that failed is INFO with its code even when the access log is off."""
        running = await start_server(probe.probe_app)
        assert await call_echo(running, space, metadata=()) is grpc.StatusCode.UNAUTHENTICATED
        (line,) = await logged(rpc_logs, probe.ECHO)
        assert line.levelno == logging.INFO
        assert " UNAUTHENTICATED " in line.getMessage()

    @pytest.mark.parametrize(
        ("named", "code"),
        [
            pytest.param("not-a-uuid", grpc.StatusCode.INVALID_ARGUMENT, id="its-check"),
            pytest.param("other", grpc.StatusCode.NOT_FOUND, id="its-space"),
        ],
    )
    async def test_a_refused_call_names_its_key(
        self,
        start_server: ServerStarter,
        space: TestSpace,
        other_space: TestSpace,
        rpc_logs: pytest.LogCaptureFixture,
        named: str,
        code: grpc.StatusCode,
    ) -> None:
        """A call with a valid key refused by its check or its space names that key in its
        access line's fields (which client sends what is refused), and no space."""
        running = await start_server(probe.probe_app)
        asked = other_space.sid if named == "other" else named
        async with running.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await probe.call(channel, probe.ECHO)(request(asked), metadata=space.metadata)
        assert refused.value.code() is code
        (line,) = await logged(rpc_logs, probe.ECHO)
        assert getattr(line, "key_id", None) == str(space.key_id)
        assert getattr(line, "space_id", None) is None

    async def test_slow_call_is_info(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """An OK call slower than STELLO_SLOW_CALL_MS (1.5 s > 1000 ms) is INFO."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            await probe.call(channel, probe.SLOW)(request(space.sid), metadata=space.metadata)
        (line,) = await logged(rpc_logs, probe.SLOW)
        assert line.levelno == logging.INFO
        assert " OK " in line.getMessage()


class TestAccessLevels:
    @pytest.mark.parametrize(
        ("access", "code", "seconds", "level"),
        [
            pytest.param(AccessLog(), OK, 0.999, logging.DEBUG, id="fast-ok"),
            pytest.param(AccessLog(), OK, 1.0, logging.INFO, id="slow-ok"),
            pytest.param(AccessLog(), grpc.StatusCode.NOT_FOUND, 0.0, logging.INFO, id="failed"),
            pytest.param(AccessLog(), grpc.StatusCode.CANCELLED, 0.0, logging.INFO, id="cancel"),
            pytest.param(AccessLog(every_call=True), OK, 0.0, logging.INFO, id="access-log"),
            pytest.param(AccessLog(slow_s=0.01), OK, 0.02, logging.INFO, id="threshold"),
        ],
    )
    def test_level(
        self, access: AccessLog, code: grpc.StatusCode, seconds: float, level: int
    ) -> None:
        """DEBUG only for an OK call under the threshold while the access log is off."""
        assert access.level(code, seconds) == level

    def test_read_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """STELLO_ACCESS_LOG=1 and STELLO_SLOW_CALL_MS=250 are read by the settings."""
        monkeypatch.setenv("STELLO_ACCESS_LOG", "1")
        monkeypatch.setenv("STELLO_SLOW_CALL_MS", "250")
        assert AccessLog.of(StelloSettings()) == AccessLog(every_call=True, slow_s=0.25)

    def test_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Unset, the access log is off and the slow threshold is one second."""
        monkeypatch.delenv("STELLO_ACCESS_LOG", raising=False)
        monkeypatch.delenv("STELLO_SLOW_CALL_MS", raising=False)
        assert AccessLog.of(StelloSettings()) == AccessLog(every_call=False, slow_s=1.0)


class TestRequestIds:
    def test_unique_within_and_across_chains(self) -> None:
        """Two chains (two processes, or one restarted) never hand out the same id."""
        first, second = RequestIds(), RequestIds()
        ids = [first.new() for _ in range(5000)] + [second.new() for _ in range(5000)]
        assert len(set(ids)) == len(ids)
        assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)

    @pytest.mark.sql
    async def test_each_call_has_its_own(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """Calls without x-request-id get distinct ids; a caller's own is kept."""
        running = await start_server(probe_with(access_log=True))
        for _ in range(3):
            assert await call_echo(running, space) is OK
        mine = (*space.metadata, ("x-request-id", "mine-1"))
        assert await call_echo(running, space, metadata=mine) is OK
        ids = [getattr(r, "request_id", None) for r in await logged(rpc_logs, probe.ECHO, 4)]
        assert ids[3] == "mine-1"
        assert len(set(ids)) == 4

    @pytest.mark.sql
    async def test_a_failed_call_says_its_id(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A failed call's trailers carry its request id (``x-request-id``): the server's own,
        which its log line names, or the caller's; unary and streamed, a refusal or a bug."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            failures = []
            for metadata in (space.metadata, (*space.metadata, ("x-request-id", "mine-2"))):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await probe.call(channel, probe.ECHO)(request("nope"), metadata=metadata)
                failures.append(refused.value)
            with pytest.raises(grpc.aio.AioRpcError) as broke:
                await probe.call(channel, probe.BOOM)(request(space.sid), metadata=space.metadata)
            failures.append(broke.value)
            stream = channel.unary_stream(
                probe.BOOM_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as broke_later:
                async for _ in stream(request(space.sid), metadata=space.metadata):
                    pass
            failures.append(broke_later.value)
        said = [dict(f.trailing_metadata() or ()).get("x-request-id") for f in failures]
        logged_ids = [getattr(r, "request_id", None) for r in await logged(rpc_logs, probe.ECHO, 2)]
        assert said[:2] == logged_ids == [logged_ids[0], "mine-2"]
        assert re.fullmatch(r"[0-9a-f]{32}", said[0] or "")
        assert all(re.fullmatch(r"[0-9a-f]{32}", i or "") for i in said[2:]), said
        assert len(set(said)) == 4


async def settled(running: RunningServer, method: str, code: str, calls: int = 1) -> bool:
    """Wait (bounded) until the server has counted `calls` calls of `method` as `code`."""
    for _ in range(100):
        if calls_counted(running, method, code) == calls:
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.sql
class TestCodesCounted:
    """Each call is counted once under its final code; an abandoned stream is never OK."""

    async def test_codes_are_counted_apart(
        self, start_server: ServerStarter, space: TestSpace, other_space: TestSpace
    ) -> None:
        """OK, UNAUTHENTICATED, NOT_FOUND and INVALID_ARGUMENT calls each count under their code."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            echo = probe.call(channel, probe.ECHO)
            for space_id, metadata in [
                (space.sid, space.metadata),
                (space.sid, ()),
                (other_space.sid, space.metadata),
                ("nope", space.metadata),
            ] * 2:
                try:
                    await echo(request(space_id), metadata=metadata)
                except grpc.aio.AioRpcError:
                    pass
        for code in ("OK", "UNAUTHENTICATED", "NOT_FOUND", "INVALID_ARGUMENT"):
            assert calls_counted(running, probe.ECHO, code) == 2, code
        metrics = running.app.metrics
        assert metrics is not None
        timed = metrics.registry.get_sample_value(
            "stello_rpc_duration_seconds_count", {"service": "probe", "method": probe.ECHO}
        )
        assert timed == 8

    async def test_answered_in_time_is_ok_however_close_to_the_deadline(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A call answered with less than DEADLINE_SLACK_S of its deadline left (here every
        call of a 50 ms deadline) reached its client OK, and is counted and logged OK: it was
        DEADLINE_EXCEEDED (explore4 F9: a client using short deadlines had every call so)."""
        running = await start_server(probe_with(access_log=True))
        async with running.channel() as channel:
            echo = probe.call(channel, probe.ECHO)
            for _ in range(3):
                await echo(request(space.sid), metadata=space.metadata, timeout=0.05)
        assert calls_counted(running, probe.ECHO, "OK") == 3
        assert calls_counted(running, probe.ECHO, "DEADLINE_EXCEEDED") == 0
        lines = await logged(rpc_logs, probe.ECHO, 3)
        assert all(" OK " in line.getMessage() for line in lines)

    async def test_cancelled_stream(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A stream the client cancelled after its first message is CANCELLED, logged and
        counted."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            stream = channel.unary_stream(
                probe.SLOW_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            call = stream(request(space.sid), metadata=space.metadata)
            first = await call.read()
            assert isinstance(first, storage_pb2.GetSessionResponse)
            call.cancel()
            assert await settled(running, probe.SLOW_STREAM, "CANCELLED"), codes_counted(
                running, probe.SLOW_STREAM
            )
        assert calls_counted(running, probe.SLOW_STREAM, "OK") == 0
        (line,) = await logged(rpc_logs, probe.SLOW_STREAM)
        assert " CANCELLED " in line.getMessage()
        assert line.levelno == logging.INFO

    async def test_a_stream_cancelled_while_it_flows_is_cancelled_not_unknown(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A stream the client cancels while messages flow meets the cancel at a `yield`
        (grpc closes the generator: GeneratorExit, not CancelledError): CANCELLED too; it was
        logged and counted UNKNOWN, the code operators alert on as a bug (explore11 F5)."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            stream = channel.unary_stream(
                probe.FLOWING_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            for _ in range(5):
                call = stream(request(space.sid), metadata=space.metadata)
                for _ in range(20):
                    assert isinstance(await call.read(), storage_pb2.GetSessionResponse)
                call.cancel()
            assert await settled(running, probe.FLOWING_STREAM, "CANCELLED", 5), codes_counted(
                running, probe.FLOWING_STREAM
            )
        assert calls_counted(running, probe.FLOWING_STREAM, "UNKNOWN") == 0

    async def test_stream_past_its_deadline(
        self, start_server: ServerStarter, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A stream that outlived its deadline is DEADLINE_EXCEEDED, logged and counted."""
        running = await start_server(probe.probe_app)
        async with running.channel() as channel:
            stream = channel.unary_stream(
                probe.SLOW_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                async for _ in stream(request(space.sid), metadata=space.metadata, timeout=0.4):
                    pass
            assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert await settled(running, probe.SLOW_STREAM, "DEADLINE_EXCEEDED"), codes_counted(
                running, probe.SLOW_STREAM
            )
        assert calls_counted(running, probe.SLOW_STREAM, "OK") == 0
        (line,) = await logged(rpc_logs, probe.SLOW_STREAM)
        assert " DEADLINE_EXCEEDED " in line.getMessage()


class TestSpaceHandedOver:
    @pytest.mark.sql
    async def test_servicer_gets_the_parsed_space(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """The handler finds the space_id the auth check parsed, as sent and as a UUID."""
        running = await start_server(probe.probe_app)
        sent = space.sid.upper()
        async with running.channel() as channel:
            reply = await probe.call(channel, probe.SPACE)(request(sent), metadata=space.metadata)
        assert (reply.session.label, reply.session.id) == (sent, space.sid)

    def test_parsed_here_outside_a_call(self) -> None:
        """space_uuid answers the checked space for its text, else parses (naming space_id)."""
        value = uuid.uuid4()
        assert space_uuid(str(value)) == value
        with pytest.raises(InvalidArgument, match="space_id"):
            space_uuid("nope")

        other = uuid.uuid4()

        def inside_a_call() -> tuple[uuid.UUID, uuid.UUID]:
            checked_space.set((str(value), value))
            return space_uuid(str(value)), space_uuid(str(other))

        assert contextvars.copy_context().run(inside_a_call) == (value, other)


class TestWaitingAside:
    def test_a_waiting_call_lends_its_place_within_a_bound(self) -> None:
        """A call waiting aside (a queued turn) gives its place in the space's count to
        others and takes it again after; as many calls as the cap may wait aside, one more
        keeps its place (waiters are not unbounded); every place comes back once."""
        calls, aside, space = SpaceCalls(2), SpaceCalls(2), uuid.uuid4()
        assert calls.try_take(space) and calls.try_take(space)
        first, second = Slot(calls, space, aside), Slot(calls, space, aside)
        assert not calls.try_take(space)
        with _waiting(first), _waiting(second):
            assert calls.try_take(space)  # both wait: two other calls of the space run
            assert calls.try_take(space)
            third = Slot(calls, space, aside)  # the second of them, which waits in turn
            with _waiting(third):  # past the bound: it keeps its place
                assert not calls.try_take(space)
            third.give()
        for slot in (first, second):
            slot.give()
        calls.give(space)  # the other call that ran
        assert calls.try_take(space) and calls.try_take(space)
        assert not calls.try_take(space)


@contextmanager
def _waiting(slot: Slot) -> Iterator[None]:
    """Inside `waiting_aside` as the call that holds `slot`."""
    token = current_slot.set(slot)
    try:
        with waiting_aside():
            yield
    finally:
        current_slot.reset(token)


@pytest.mark.sql
class TestSpaceCalls:
    async def test_a_space_past_its_calls_in_progress_is_refused_at_the_door(
        self, start_server: ServerStarter, space: TestSpace, other_space: TestSpace
    ) -> None:
        """With STELLO_MAX_CALLS_PER_SPACE=2 and two calls of a space in progress, its third is
        RESOURCE_EXHAUSTED SPACE_BUSY naming the space and the limit, before the handler
        runs; another space's call is served; once one call ends the space is served again
        (explore11 F1: one tenant's 150 streams were all served, every other tenant's calls
        queued behind them)."""
        running = await start_server(probe_with(max_calls_per_space=2, max_watches_per_space=1))
        async with running.channel() as channel:
            stream = channel.unary_stream(
                probe.SLOW_STREAM,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            held = [stream(request(space.sid), metadata=space.metadata) for _ in range(2)]
            for call in held:
                await call.read()  # in progress: its handler waits before its second message
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await probe.call(channel, probe.ECHO)(request(space.sid), metadata=space.metadata)
            assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error_info_reason(caught.value) == "SPACE_BUSY"
            assert error_info_metadata(caught.value) == {"space_id": space.sid, "limit": "2"}
            assert "STELLO_MAX_CALLS_PER_SPACE" in (caught.value.details() or "")
            assert await call_echo(running, other_space) is OK
            held[0].cancel()
            for _ in range(100):  # the cancelled call's slot comes back as its handler ends
                if await call_echo(running, space) is OK:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the space stayed busy after one of its calls ended")
            held[1].cancel()

    async def test_watch_streams_have_a_cap_of_their_own(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """A space's open WatchSpace streams count against STELLO_MAX_WATCHES_PER_SPACE, not
        its calls in progress: one open watch (the cap) refuses a second watch, SPACE_BUSY
        naming that setting, while the space's calls are served (explore11 F6: 200 streams
        of one tenant were all served)."""
        running = await start_server(probe_with(max_calls_per_space=1, max_watches_per_space=1))
        async with running.channel() as channel:
            watch = channel.unary_stream(
                probe.WATCH_SPACE,
                request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                response_deserializer=storage_pb2.GetSessionResponse.FromString,
            )
            first = watch(request(space.sid), metadata=space.metadata)
            await first.read()
            assert await call_echo(running, space) is OK  # the watch holds no call's place
            second = watch(request(space.sid), metadata=space.metadata)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await second.read()
            assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error_info_reason(caught.value) == "SPACE_BUSY"
            assert "STELLO_MAX_WATCHES_PER_SPACE" in (caught.value.details() or "")
            first.cancel()
