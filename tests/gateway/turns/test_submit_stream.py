"""SubmitToolResultsStream: SubmitToolResults' continuation, streamed as SendStream streams a turn.

The same turn loop serves both forms (`TurnService.submit_events`), so these
tests check what the streamed form adds or must keep: the events and their
order, `done` as the unary reply, refusals before any event, the shared
request_id scope and a cancellation that stores nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from tests.gateway.conftest import Stack, StackMaker, row_counts, rpc_error
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    calls_ended,
    put_insight,
    send,
    submit,
    submit_stream,
    submit_stream_events,
    tool_call,
    tool_definition,
)

pytestmark = pytest.mark.sql
LOOKUP = tool_definition("lookup")


def kinds(events: list[Any]) -> list[str]:
    """The oneof field each event sets."""
    return [event.WhichOneof("event") for event in events]


def undated(records: Any) -> list[common_pb2.Record]:
    """Records with their creation time cleared (two sessions' turns differ only there)."""
    copies = []
    for record in records:
        copy = common_pb2.Record()
        copy.CopyFrom(record)
        copy.ClearField("created_at")
        copies.append(copy)
    return copies


async def pending_root(stack: Stack) -> str:
    """A root whose last turn stopped on the client tool call `c1` (the spy's next answer)."""
    root = await stack.root()
    await send(stack, root.id, "go", tools=[LOOKUP])
    return str(root.id)


class TestEvents:
    """Deltas and tool calls as they arrive, then one `done` after the commit."""

    async def test_deltas_then_done(self, make_stack: StackMaker) -> None:
        """The continuation's text streams in deltas, then `done` holds the stored records."""
        spy = SpyProvider(stream_chunks=2).then(
            answer("", tool_call("lookup", "c1")), answer("你好，世界")
        )
        stack = await make_stack(spy)
        root = await pending_root(stack)
        events = await submit_stream_events(stack, root, ("c1", "42"))
        assert kinds(events) == ["text_delta", "text_delta", "done"]
        assert [e.text_delta.text for e in events[:-1]] == ["你好，", "世界"]
        done = events[-1].done
        assert isinstance(done, agent_pb2.SubmitToolResultsResponse)
        assert done.assistant.content == "你好，世界"
        assert [(r.tool_call_id, r.content) for r in done.records] == [
            ("c1", "42"),
            ("", "你好，世界"),
        ]
        assert list(done.records) == (await stack.records(root))[2:]
        assert spy.turns[1].streamed
        assert (await stack.view(root)).turn_count == 1

    async def test_tool_call_events(self, make_stack: StackMaker) -> None:
        """A client tool call in the continuation streams as `tool_call`, then `done` with it
        pending, which a second streamed submit answers."""
        spy = SpyProvider().then(
            answer("", tool_call("lookup", "c1")),
            answer("", tool_call("lookup", "c2", q="x")),
            answer("final"),
        )
        stack = await make_stack(spy)
        root = await pending_root(stack)
        events = await submit_stream_events(stack, root, ("c1", "1"), tools=[LOOKUP])
        assert kinds(events) == ["tool_call", "done"]
        assert events[0].tool_call.arguments_json == '{"q":"x"}'
        assert [c.id for c in events[1].done.pending_tool_calls] == ["c2"]
        final = await submit_stream_events(stack, root, ("c2", "2"))
        assert final[-1].done.assistant.content == "final"
        assert not final[-1].done.pending_tool_calls

    async def test_done_is_the_unary_reply(self, make_stack: StackMaker) -> None:
        """`done` is what SubmitToolResults answers for the same continuation, and the two
        store the same records."""
        spy = SpyProvider().then(
            answer("", tool_call("lookup", "c1")), answer("", tool_call("lookup", "c1"))
        )
        stack = await make_stack(spy)
        streamed, unary = await pending_root(stack), await pending_root(stack)
        done = (await submit_stream_events(stack, streamed, ("c1", "42")))[-1].done
        reply = await submit(stack, unary, ("c1", "42"))
        assert undated([done.assistant]) == undated([reply.assistant])
        assert undated(done.records) == undated(reply.records)
        assert list(done.pending_tool_calls) == list(reply.pending_tool_calls)
        assert done.usage == reply.usage
        assert undated(await stack.records(streamed)) == undated(await stack.records(unary))


class TestRefusals:
    """Validation and the session checks end the stream before any event, writing nothing."""

    @pytest.mark.parametrize(
        ("results", "field"),
        [
            pytest.param([("c1", "y")], "results", id="unanswered"),
            pytest.param(
                [("c9", "x"), ("c1", "y"), ("c2", "z")], "results[0].tool_call_id", id="unknown"
            ),
            pytest.param([], "results", id="none"),
        ],
    )
    async def test_invalid_results(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        results: list[tuple[str, str]],
        field: str,
    ) -> None:
        """Results that do not answer exactly the pending calls are INVALID_ARGUMENT naming
        the field, at the first read; no model call, nothing written."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1"), tool_call("lookup", "c2")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        before = await row_counts(pool, stack.space)
        error = await rpc_error(submit_stream(stack, root, *results).read())
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]
        assert await row_counts(pool, stack.space) == before
        assert len(spy.turns) == 1

    async def test_no_pending_tool_calls(self, make_stack: StackMaker) -> None:
        """A session waiting for no tool result is FAILED_PRECONDITION NO_PENDING_TOOL_CALLS."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await send(stack, root.id, "plain")
        error = await rpc_error(submit_stream(stack, root.id, ("c1", "x")).read())
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "NO_PENDING_TOOL_CALLS"

    async def test_turn_in_progress(self, make_stack: StackMaker) -> None:
        """While a continuation runs, a second one is ABORTED TURN_IN_PROGRESS before any
        event; the first then ends with its `done`."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        spy.gate, spy.started = asyncio.Event(), asyncio.Event()
        first = asyncio.ensure_future(submit_stream_events(stack, root, ("c1", "42")))
        await spy.started.wait()
        error = await rpc_error(submit_stream(stack, root, ("c1", "42")).read())
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        spy.gate.set()
        assert kinds(await first)[-1] == "done"


class TestIdempotency:
    """SubmitToolResults and SubmitToolResultsStream share one request_id scope."""

    async def test_replay_is_one_done(self, make_stack: StackMaker) -> None:
        """A retried stream yields one `done`, the first one; a unary retry answers the same;
        the model ran once; another request under the id is REQUEST_ID_REUSED."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        first = await submit_stream_events(stack, root, ("c1", "42"), request_id="r-1")
        again = await submit_stream_events(stack, root, ("c1", "42"), request_id="r-1")
        assert kinds(again) == ["done"] and again[0].done == first[-1].done
        assert await submit(stack, root, ("c1", "42"), request_id="r-1") == first[-1].done
        assert len(spy.turns) == 2
        other = submit_stream(stack, root, ("c1", "43"), request_id="r-1")
        error = await rpc_error(other.read())
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"

    async def test_unary_then_stream(self, make_stack: StackMaker) -> None:
        """A stream retrying a unary SubmitToolResults' request_id yields its reply as the
        one `done`, without calling the model."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        reply = await submit(stack, root, ("c1", "42"), request_id="r-2")
        events = await submit_stream_events(stack, root, ("c1", "42"), request_id="r-2")
        assert kinds(events) == ["done"] and events[0].done == reply
        assert len(spy.turns) == 2


class TestCancellation:
    """A stream cancelled or interrupted before its commit stores nothing."""

    async def test_cancel_after_first_delta(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Cancelling after the first delta stores neither the results nor the answer, keeps
        the insight and the pending call, and stops the model."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        await put_insight(stack, root, "keep me")
        before = await row_counts(pool, stack.space)
        spy.delay_s = 0.2
        call = submit_stream(stack, root, ("c1", "a result long enough"))
        assert (await call.read()).WhichOneof("event") == "text_delta"
        call.cancel()
        await calls_ended(stack)
        assert spy.cancelled == 1
        assert await row_counts(pool, stack.space) == before
        assert len(await stack.records(root)) == 2
        assert (await stack.view(root)).insight == "keep me"
        spy.delay_s = 0
        reply = await submit(stack, root, ("c1", "again"))
        assert reply.records[0].content == "again"

    async def test_interrupted_mid_stream(self, make_stack: StackMaker) -> None:
        """An INTERRUPT Send while the continuation streams ends the stream ABORTED
        TURN_INTERRUPTED after its deltas; none of it (not the results) is stored."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await pending_root(stack)
        spy.delay_s = 0.2
        call = submit_stream(stack, root, ("c1", "a result long enough"))
        assert (await call.read()).WhichOneof("event") == "text_delta"
        spy.delay_s = 0
        interrupt = common_pb2.BUSY_POLICY_INTERRUPT
        reply = await send(stack, root, "second", busy=interrupt)
        assert reply.assistant.content == "echo: second"
        error = await rpc_error(_drain(call))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "TURN_INTERRUPTED"
        contents = [r.content for r in await stack.records(root)]
        assert contents == ["go", "", "second", "echo: second"]


async def _drain(call: Any) -> None:
    """Read a stream to its end (its error raised)."""
    while await call.read() != grpc.aio.EOF:
        pass
