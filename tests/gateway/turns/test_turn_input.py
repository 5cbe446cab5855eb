"""Bad turn requests: each a clear status, no LLM call, nothing written."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.errors import FieldViolation, error_info_reason, field_violations
from tests.gateway.conftest import Stack, StackMaker, new_id, row_counts, rpc_error
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    send,
    send_stream,
    submit,
    submit_stream,
    tool_call,
    tool_definition,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


async def refused(
    stack: Stack, pool: asyncpg.Pool, spy: SpyProvider, call: Any
) -> grpc.aio.AioRpcError:
    """Await a turn that must fail; check it called no LLM and wrote nothing."""
    before = await row_counts(pool, stack.space)
    calls = len(spy.calls)
    error = await rpc_error(call)
    assert len(spy.calls) == calls
    assert await row_counts(pool, stack.space) == before
    return error


class TestSendInput:
    """Send's own validation and the session checks before the lease."""

    @pytest.mark.parametrize(
        ("content", "field"),
        [
            pytest.param("", "content", id="empty"),
            pytest.param("   \n", "content", id="blank"),
            pytest.param("x" * 101, "content", id="oversize"),
        ],
    )
    async def test_bad_content(
        self, make_stack: StackMaker, pool: asyncpg.Pool, content: str, field: str
    ) -> None:
        """An empty or oversize message is INVALID_ARGUMENT naming `content`."""
        spy = SpyProvider()
        stack = await make_stack(spy, max_content_bytes=100)
        root = await stack.root()
        error = await refused(stack, pool, spy, send(stack, root.id, content))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [field]

    async def test_bad_ids_all_named(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """A malformed session id and a too-long request_id are named at once."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        error = await refused(
            stack, pool, spy, send(stack, "not-a-uuid", "hi", request_id="r" * 201)
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert {v.field for v in field_violations(error)} == {"session_id", "request_id"}

    async def test_unknown_session(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """A session that does not exist is NOT_FOUND."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        error = await refused(stack, pool, spy, send(stack, new_id(), "hi"))
        assert error.code() is grpc.StatusCode.NOT_FOUND

    async def test_other_space(self, make_stack: StackMaker, other_space: TestSpace) -> None:
        """A session of another space is NOT_FOUND, never PERMISSION_DENIED."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        other = agent_pb2.SendRequest(space_id=other_space.sid, session_id=root.id, content="x")
        error = await rpc_error(
            stack.gw.Send(other, metadata=(("authorization", f"Bearer {other_space.key}"),))
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert spy.calls == []

    async def test_archived(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """Send, SendStream, SubmitToolResults and SubmitToolResultsStream on an archived
        session are FAILED_PRECONDITION SESSION_ARCHIVED (DESIGN §5.4)."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("lookup")])
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        for call in (
            send(stack, root.id, "hi"),
            send_stream(stack, root.id, "hi").read(),
            submit(stack, root.id, ("c1", "x")),
            submit_stream(stack, root.id, ("c1", "x")).read(),
        ):
            error = await refused(stack, pool, spy, call)
            assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert error_info_reason(error) == "SESSION_ARCHIVED"

    async def test_no_key(self, make_stack: StackMaker) -> None:
        """A call without a key is UNAUTHENTICATED."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        error = await rpc_error(
            stack.gw.Send(
                agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="x"),
                metadata=(("authorization", ""),),
            )
        )
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED


class TestSubmitInput:
    """SubmitToolResults' own validation."""

    @pytest.mark.parametrize(
        ("results", "fields"),
        [
            pytest.param([], {"results"}, id="none"),
            pytest.param([("", "x")], {"results[0].tool_call_id"}, id="empty-id"),
            pytest.param([("c1", "x"), ("c1", "y")], {"results[1].tool_call_id"}, id="twice"),
            pytest.param([("c1", "x" * 101)], {"results[0].content"}, id="oversize"),
        ],
    )
    async def test_bad_results(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        results: list[tuple[str, str]],
        fields: set[str],
    ) -> None:
        """Missing, empty, duplicate or oversize results are INVALID_ARGUMENT; nothing written."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy, max_content_bytes=100)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("lookup")])
        error = await refused(stack, pool, spy, submit(stack, root.id, *results))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert {v.field for v in field_violations(error)} == fields

    async def test_unknown_call_id(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """A result for a call the model never made is INVALID_ARGUMENT; nothing written."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("lookup")])
        error = await refused(stack, pool, spy, submit(stack, root.id, ("c9", "x")))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "c9" in (error.details() or "")

    async def test_many_long_unknown_call_ids(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """100 results for calls the model never made, each id 5,000 characters long, are
        INVALID_ARGUMENT listing the first 10 (ids cut to 64 characters) and how many more:
        listed whole, the trailers passed gRPC's metadata limit and the client saw
        RESOURCE_EXHAUSTED "Stream removed" instead."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("lookup")])
        results = [(f"{i:03}" + "a" * 5_000, "x") for i in range(100)] + [("c1", "y")]
        error = await refused(stack, pool, spy, submit(stack, root.id, *results))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        violations = field_violations(error)
        assert [v.field for v in violations[:2]] == [
            "results[0].tool_call_id",
            "results[1].tool_call_id",
        ]
        assert violations[0].description == f"'000{'a' * 58}…' answers no pending tool call"
        assert violations[10:] == [FieldViolation("", "and 90 more violations not listed")]

    async def test_unknown_session(self, make_stack: StackMaker) -> None:
        """Submitting to an unknown session is NOT_FOUND."""
        stack = await make_stack(SpyProvider())
        error = await rpc_error(submit(stack, new_id(), ("c1", "x")))
        assert error.code() is grpc.StatusCode.NOT_FOUND
