"""The error boundary every server has: what a client sees when a request or a handler fails."""

from __future__ import annotations

import asyncio
import logging
import math
import re

import grpc
import pytest
from google.protobuf import struct_pb2

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.serving.server import create_server, shutdown
from stello.storage.v1 import storage_pb2
from tests.support import probe
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tests.support.hostile import (
    MARKER,
    deep_struct_bytes,
    invalid_utf8,
    length_delimited,
    nested_struct,
)

pytestmark = pytest.mark.sql

SESSION = "00000000-0000-4000-8000-000000000001"
INVALID = grpc.StatusCode.INVALID_ARGUMENT
LEAKS = re.compile(r"Traceback|Error\b|SELECT|asyncpg|debug_error_string|Unexpected <class")


@pytest.fixture(name="running")
async def _running(start_server: ServerStarter) -> RunningServer:
    return await start_server(probe.probe_app)


@pytest.fixture(name="rpc_logs")
def _rpc_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    return caplog


def records_request(space: TestSpace, *records: common_pb2.Record) -> bytes:
    """A serialized AppendRecordsRequest for the probe's Records method."""
    message = storage_pb2.AppendRecordsRequest(
        space_id=space.sid, session_id=SESSION, records=list(records)
    )
    return message.SerializeToString()


async def raw_error(
    running: RunningServer, space: TestSpace, method: str, data: bytes
) -> grpc.aio.AioRpcError:
    """Send raw bytes to `method`; the error it answers."""
    async with running.channel() as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await probe.raw_call(channel, method)(data, metadata=space.metadata)
    return caught.value


def no_traceback(logs: pytest.LogCaptureFixture) -> bool:
    """Whether no log record carries a traceback."""
    return all(r.exc_info is None for r in logs.records)


class TestUnparsable:
    """Bytes the parser refuses are INVALID_ARGUMENT naming the field, never UNKNOWN."""

    async def test_invalid_utf8_names_the_field(
        self, running: RunningServer, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A lone surrogate in session_id is INVALID_ARGUMENT on session_id, no traceback."""
        data = invalid_utf8(storage_pb2.GetSessionRequest(space_id=space.sid, session_id=MARKER))
        error = await raw_error(running, space, probe.ECHO, data)
        assert error.code() is INVALID, error
        assert [v.field for v in field_violations(error)] == ["session_id"]
        assert "UTF-8" in (error.details() or "")
        assert no_traceback(rpc_logs)

    async def test_invalid_utf8_in_a_nested_field(
        self, running: RunningServer, space: TestSpace
    ) -> None:
        """Invalid UTF-8 deep in a record is named by its path (records[1].tool_calls[0].name)."""
        call = common_pb2.ToolCall(id="c", name=MARKER, arguments_json="{}")
        data = invalid_utf8(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid,
                session_id=SESSION,
                records=[
                    common_pb2.Record(content="fine"),
                    common_pb2.Record(content="x", tool_calls=[call]),
                ],
            )
        )
        error = await raw_error(running, space, probe.RECORDS, data)
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["records[1].tool_calls[0].name"]

    async def test_struct_past_the_parser_depth(
        self, running: RunningServer, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A Struct nested past protobuf's parser depth is INVALID_ARGUMENT on its field."""
        number = common_pb2.Record.DESCRIPTOR.fields_by_name["metadata"].number
        record = length_delimited(number, deep_struct_bytes(60))
        data = records_request(space) + length_delimited(3, record)  # records = field 3
        error = await raw_error(running, space, probe.RECORDS, data)
        assert error.code() is INVALID, error
        (violation,) = field_violations(error)
        assert violation.field == "records[0].metadata"
        assert "deeper than" in violation.description
        assert no_traceback(rpc_logs)

    async def test_garbage_bytes(self, running: RunningServer, space: TestSpace) -> None:
        """Bytes that are no message at all are INVALID_ARGUMENT on the request."""
        error = await raw_error(running, space, probe.ECHO, b"\xff\xff\xff\xff")
        assert error.code() is INVALID
        assert [v.field for v in field_violations(error)] == ["request"]

    async def test_without_a_key_the_key_is_checked_first(self, running: RunningServer) -> None:
        """Bytes that do not parse, sent with no key or an unknown one, are UNAUTHENTICATED:
        a caller without a valid key learns nothing of a request's rules (explore16 A5: it
        was INVALID_ARGUMENT, the request checked before the key)."""
        unknown = (("authorization", "Bearer stello_000000000000_nope"),)
        for metadata in ((), unknown):
            async with running.channel() as channel:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await probe.raw_call(channel, probe.ECHO)(b"\xff\xff", metadata=metadata)
            assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED, metadata


class TestUnstorableText:
    """What PostgreSQL text and jsonb cannot hold is refused by field, before the handler."""

    @pytest.mark.parametrize(
        ("record", "field"),
        [
            pytest.param(common_pb2.Record(content="a\x00b"), "records[0].content", id="content"),
            pytest.param(
                common_pb2.Record(tool_calls=[common_pb2.ToolCall(id="c", name="n\x00")]),
                "records[0].tool_calls[0].name",
                id="tool-call-name",
            ),
            pytest.param(
                common_pb2.Record(tool_call_id="\x00"), "records[0].tool_call_id", id="optional"
            ),
            pytest.param(
                common_pb2.Record(metadata=nested_struct(3, struct_pb2.Value(string_value="\x00"))),
                "records[0].metadata",
                id="struct-value",
            ),
            pytest.param(
                common_pb2.Record(metadata=nested_struct(17)), "records[0].metadata", id="depth-17"
            ),
            pytest.param(
                common_pb2.Record(
                    metadata=nested_struct(2, struct_pb2.Value(number_value=math.nan))
                ),
                "records[0].metadata",
                id="nan",
            ),
        ],
    )
    async def test_refused_naming_the_field(
        self, running: RunningServer, space: TestSpace, record: common_pb2.Record, field: str
    ) -> None:
        """U+0000, a Struct deeper than 16 levels or a NaN is INVALID_ARGUMENT naming the field."""
        error = await raw_error(running, space, probe.RECORDS, records_request(space, record))
        assert error.code() is INVALID, error
        assert [v.field for v in field_violations(error)] == [field]

    async def test_sixteen_levels_pass(self, running: RunningServer, space: TestSpace) -> None:
        """A Struct of exactly 16 levels reaches the handler."""
        record = common_pb2.Record(metadata=nested_struct(16))
        async with running.channel() as channel:
            reply = await probe.raw_call(channel, probe.RECORDS)(
                records_request(space, record), metadata=space.metadata
            )
        answer = storage_pb2.AppendRecordsResponse.FromString(reply)
        assert answer.records[0].metadata == record.metadata


class TestUnexpectedErrors:
    """A bug is INTERNAL with an error id; its text stays in the server's log."""

    @pytest.mark.parametrize("method", [probe.BOOM, probe.BOOM_STREAM], ids=["unary", "stream"])
    async def test_internal_with_an_id(
        self,
        running: RunningServer,
        space: TestSpace,
        rpc_logs: pytest.LogCaptureFixture,
        method: str,
    ) -> None:
        """The client sees "internal error (id X)"; the log line has X, the method, the trace."""
        request = storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION)
        async with running.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                if method == probe.BOOM:
                    await probe.call(channel, method)(request, metadata=space.metadata)
                else:
                    stream = channel.unary_stream(
                        method,
                        request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
                        response_deserializer=storage_pb2.GetSessionResponse.FromString,
                    )
                    async for _ in stream(request, metadata=space.metadata):
                        pass
        error = caught.value
        assert error.code() is grpc.StatusCode.INTERNAL
        details = error.details() or ""
        matched = re.fullmatch(r"internal error \(id ([0-9a-f]+)\)", details)
        assert matched, details
        (logged,) = [r for r in rpc_logs.records if r.exc_info is not None]
        assert matched.group(1) in logged.getMessage()
        assert method in logged.getMessage()
        assert "SELECT secret" in rpc_logs.text

    async def test_driver_state_error_is_unavailable(
        self, running: RunningServer, space: TestSpace
    ) -> None:
        """A driver state error is UNAVAILABLE (retryable) with no class or driver text."""
        request = storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION)
        async with running.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await probe.call(channel, probe.DRIVER)(request, metadata=space.metadata)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert not LEAKS.search(caught.value.details() or ""), caught.value.details()
        assert "state 15" not in (caught.value.details() or "")


class TestAbandonedCalls:
    """A call the client gave up on is logged and counted as such, never as OK."""

    def count(self, running: RunningServer, code: str) -> float:
        """How many Slow calls the server counted with `code`."""
        metrics = running.app.metrics
        assert metrics is not None
        labels = {"service": "probe", "method": probe.SLOW, "code": code}
        return metrics.registry.get_sample_value("stello_rpc_calls_total", labels) or 0.0

    async def settled(self, running: RunningServer, code: str) -> bool:
        """Wait (bounded) until the server has counted one Slow call as `code`."""
        for _ in range(100):
            if self.count(running, code) == 1:
                return True
            await asyncio.sleep(0.05)
        return False

    async def test_cancelled(
        self, running: RunningServer, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A call the client cancelled is CANCELLED in the log line and the metrics."""
        request = storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION)
        async with running.channel() as channel:
            call = probe.call(channel, probe.SLOW)(request, metadata=space.metadata)
            chain = running.app.chain
            assert chain is not None
            for _ in range(200):  # until the server runs it: a call cancelled before is not
                if chain.in_flight:
                    break
                await asyncio.sleep(0.05)
            assert chain.in_flight, "the call never reached the server"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert await self.settled(running, "CANCELLED")
        assert self.count(running, "OK") == 0
        assert f"rpc {probe.SLOW} CANCELLED" in rpc_logs.text

    async def test_deadline_exceeded(
        self, running: RunningServer, space: TestSpace, rpc_logs: pytest.LogCaptureFixture
    ) -> None:
        """A call past its deadline is DEADLINE_EXCEEDED in the log line and the metrics."""
        request = storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION)
        async with running.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await probe.call(channel, probe.SLOW)(request, metadata=space.metadata, timeout=0.4)
            assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert await self.settled(running, "DEADLINE_EXCEEDED")
        assert self.count(running, "OK") == 0
        assert f"rpc {probe.SLOW} DEADLINE_EXCEEDED" in rpc_logs.text


class TestOnePortOneProcess:
    async def test_second_server_on_a_taken_port_fails(self, running: RunningServer) -> None:
        """A second server on a port another one serves fails at start, naming the address."""
        app = probe.probe_app(running.app.settings, running.app.pool, running.app.keys)
        with pytest.raises(OSError, match="port is in use") as caught:
            server, _ = await create_server(app, running.address)
            await shutdown(app, server, 0)
        assert running.address in str(caught.value)
