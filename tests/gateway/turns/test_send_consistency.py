"""Turn consistency (DESIGN §4.2): the lease, the one commit, the insight, request_id retries.

Restates STELLO-SPEC §6.2 item 82 with DESIGN §4.2's fix (an LLM error keeps
the insight) and §6.6 item 57 with its recommendation (turns on one session
are serialised, streamed or not).
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.errors import ResourceExhausted, Unavailable, error_info_metadata, error_info_reason
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import (
    Backends,
    StackMaker,
    gateway_clients,
    record,
    row_counts,
    rpc_error,
)
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    insight,
    put_insight,
    roles,
    send,
    send_stream,
    stream_events,
    submit,
    tool_call,
    tool_definition,
    trim,
    wait_for,
)

pytestmark = pytest.mark.sql

# The lease ends as if no renewal had reached storage for a whole TTL.
LAPSE = (
    "UPDATE sessions SET turn_expires_at = now() - interval '1 second' "
    "WHERE space_id = $1 AND id = $2"
)


class TestLease:
    """One turn at a time per session, before any LLM call."""

    async def test_concurrent_sends_never_interleave(self, make_stack: StackMaker) -> None:
        """Of five Sends at once one runs; the others are TURN_IN_PROGRESS; records stay paired."""
        gate = asyncio.Event()  # the running turn holds the session until the others ended
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        calls = [asyncio.ensure_future(send(stack, root.id, f"m{i}")) for i in range(5)]
        await wait_for(lambda: sum(call.done() for call in calls) == 4)
        gate.set()
        results = await asyncio.gather(*calls, return_exceptions=True)
        errors = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(errors) == 4
        assert {(e.code(), error_info_reason(e)) for e in errors} == {
            (grpc.StatusCode.ABORTED, "TURN_IN_PROGRESS")
        }
        assert len(spy.turns) == 1
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant"]
        assert stored[1].content == f"echo: {stored[0].content}"

    async def test_stream_and_send_are_serialised(self, make_stack: StackMaker) -> None:
        """A Send during a SendStream of the same session is TURN_IN_PROGRESS (§6.6 item 57)."""
        gate = asyncio.Event()  # the streamed turn holds the session until the Send ended
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        stream = send_stream(stack, root.id, "streamed turn")
        await spy.started.wait()
        error = await rpc_error(send(stack, root.id, "other"))
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        gate.set()
        events = []
        while (event := await stream.read()) != grpc.aio.EOF:
            events.append(event)
        assert events[-1].WhichOneof("event") == "done"

    async def test_other_sessions_run_in_parallel(self, make_stack: StackMaker) -> None:
        """Turns of different sessions overlap (§6.6 item 26): both reach the model while
        neither may finish (a gate holds every model call), then both complete."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        a, b = await stack.root(label="a"), await stack.root(label="b")
        turns = asyncio.gather(send(stack, a.id, "x"), send(stack, b.id, "y"))
        try:
            await wait_for(lambda: len(spy.turns) == 2, within_s=10)
        finally:
            gate.set()
        await asyncio.wait_for(turns, 30)

    async def test_lease_lost_before_commit(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A turn whose lease lapsed (no renewal reached storage) and was taken by another is
        ABORTED and writes nothing."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        turn = asyncio.ensure_future(send(stack, root.id, "slow"))
        await spy.started.wait()
        await pool.execute(LAPSE, stack.space.id, uuid.UUID(root.id))
        await stack.storage.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=stack.space.sid, session_id=root.id, ttl_s=30)
        )
        gate.set()
        error = await rpc_error(turn)
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "CONCURRENT_MODIFICATION"
        assert await row_counts(pool, stack.space) == before

    async def test_records_added_meanwhile(self, make_stack: StackMaker) -> None:
        """Records appended to storage during the turn make it ABORTED, writing nothing of it."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(root.id, record("user", "earlier"))
        turn = asyncio.ensure_future(send(stack, root.id, "mine"))
        await spy.started.wait()
        await stack.append(root.id, record("user", "sneaked in"))
        gate.set()
        error = await rpc_error(turn)
        assert error_info_reason(error) == "CONCURRENT_MODIFICATION"
        assert [r.content for r in await stack.records(root.id)] == ["earlier", "sneaked in"]

    async def test_records_added_to_a_new_session_meanwhile(
        self,
        make_stack: StackMaker,
        backends: Backends,
        settings: StelloSettings,
    ) -> None:
        """A session with no record yet that gets one during its first turn: that turn is
        ABORTED in its one Transact, nothing of it written (never committed after them)."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        clients = gateway_clients(backends.gateway_config(), backends, settings, False)
        stack = await make_stack(spy, clients=clients)
        root = await stack.root()
        assert await stack.records(root.id) == []
        turn = asyncio.ensure_future(send(stack, root.id, "mine", request_id="new-1"))
        await spy.started.wait()
        await stack.append(root.id, record("user", "sneaked in"))
        clients.storage.calls.clear()
        gate.set()
        error = await rpc_error(turn)
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "CONCURRENT_MODIFICATION"
        assert clients.storage.calls["Transact"] == 1
        assert [r.content for r in await stack.records(root.id)] == ["sneaked in"]
        view = await stack.view(root.id)
        assert view.turn_count == 0


class TestInsight:
    """The insight is cleared by the commit of the turn that used it, and only then."""

    async def test_put_during_llm_survives(self, make_stack: StackMaker) -> None:
        """An insight put while the model answers survives for the next turn."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        await put_insight(stack, root.id, "old")
        turn = asyncio.ensure_future(send(stack, root.id, "first"))
        await spy.started.wait()
        await put_insight(stack, root.id, "new")
        gate.set()
        await turn
        assert await insight(stack, root.id) == "new"
        spy.gate = None
        await send(stack, root.id, "second")
        contents = [m.content for m in spy.turns[1].messages]
        assert "new" in contents and "old" not in contents
        assert await insight(stack, root.id) is None

    async def test_put_during_llm_without_consumed_insight(self, make_stack: StackMaker) -> None:
        """A turn that used no insight leaves one put meanwhile in place."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        turn = asyncio.ensure_future(send(stack, root.id, "first"))
        await spy.started.wait()
        await put_insight(stack, root.id, "arrived late")
        gate.set()
        await turn
        assert await insight(stack, root.id) == "arrived late"

    @pytest.mark.parametrize(
        "error",
        [
            pytest.param(Unavailable("provider down"), id="unavailable"),
            pytest.param(ResourceExhausted("rate limited"), id="rate-limit"),
        ],
    )
    async def test_llm_error_keeps_insight(
        self, make_stack: StackMaker, pool: asyncpg.Pool, error: Exception
    ) -> None:
        """An LLM error maps to its status, writes nothing and keeps the insight (item 82)."""
        spy = SpyProvider().then(error)
        stack = await make_stack(spy)
        root = await stack.root()
        await put_insight(stack, root.id, "keep")
        before = await row_counts(pool, stack.space)
        failure = await rpc_error(send(stack, root.id, "hi"))
        assert failure.code() is getattr(error, "code")  # noqa: B009
        assert await row_counts(pool, stack.space) == before
        assert await insight(stack, root.id) == "keep"
        view = await stack.view(root.id)
        assert view.turn_count == 0
        reply = await send(stack, root.id, "again")
        assert "keep" in [m.content for m in spy.turns[1].messages]
        assert reply.records[0].seq == 1

    async def test_streamed_llm_error_writes_nothing(self, make_stack: StackMaker) -> None:
        """A stream whose model fails ends with the error and stores nothing."""
        spy = SpyProvider().then(Unavailable("provider down"))
        stack = await make_stack(spy)
        root = await stack.root()
        error = await rpc_error(stream_events(stack, root.id, "hi"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await stack.records(root.id) == []


class TestRequestId:
    """A retried turn answers the stored one without calling the model (DESIGN §2)."""

    async def test_retry_returns_stored_turn(self, make_stack: StackMaker) -> None:
        """The same request_id and request answer the first turn; the model ran once."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        first = await send(stack, root.id, "hello", request_id="r-1")
        again = await send(stack, root.id, "hello", request_id="r-1")
        assert again == first
        assert len(spy.calls) == 1
        assert len(await stack.records(root.id)) == 2
        assert (await stack.view(root.id)).turn_count == 1

    async def test_reuse_with_other_content(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """The same request_id with another message is ALREADY_EXISTS REQUEST_ID_REUSED."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hello", request_id="r-2")
        before = await row_counts(pool, stack.space)
        error = await rpc_error(send(stack, root.id, "other", request_id="r-2"))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert await row_counts(pool, stack.space) == before
        assert len(spy.calls) == 1

    async def test_stream_retry_single_done(self, make_stack: StackMaker) -> None:
        """A retried SendStream yields one done event carrying the stored turn."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        first = await stream_events(stack, root.id, "hello", request_id="r-3")
        again = await stream_events(stack, root.id, "hello", request_id="r-3")
        assert [e.WhichOneof("event") for e in again] == ["done"]
        assert again[0].done == first[-1].done
        unary = await send(stack, root.id, "hello", request_id="r-3")
        assert unary == first[-1].done
        assert len(spy.calls) == 1

    async def test_concurrent_duplicate_is_turn_in_progress(self, make_stack: StackMaker) -> None:
        """A duplicate arriving while the first still runs is TURN_IN_PROGRESS; then it replays."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        first = asyncio.ensure_future(send(stack, root.id, "hello", request_id="r-4"))
        await spy.started.wait()
        error = await rpc_error(send(stack, root.id, "hello", request_id="r-4"))
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        gate.set()
        committed = await first
        assert await send(stack, root.id, "hello", request_id="r-4") == committed
        assert len(spy.calls) == 1

    async def test_failed_turn_not_remembered(self, make_stack: StackMaker) -> None:
        """A turn that failed is not remembered: its retry runs the model again."""
        spy = SpyProvider().then(Unavailable("down"))
        stack = await make_stack(spy)
        root = await stack.root()
        await rpc_error(send(stack, root.id, "hello", request_id="r-5"))
        reply = await send(stack, root.id, "hello", request_id="r-5")
        assert reply.assistant.content == "echo: hello"
        assert len(spy.calls) == 2

    async def test_replay_after_archive(self, make_stack: StackMaker) -> None:
        """A retry of a committed turn answers it even after the session was archived."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        first = await send(stack, root.id, "hello", request_id="r-6")
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        assert await send(stack, root.id, "hello", request_id="r-6") == first

    async def test_archived_during_the_turn(self, make_stack: StackMaker) -> None:
        """A session archived while a turn runs (Archive answered before the turn commits)
        gets nothing of it: the turn answers FAILED_PRECONDITION SESSION_ARCHIVED, nothing
        is written, the insight stays and the lease is given back (unarchived, the next turn
        runs at once). Before, the running turn committed into the archived session; and its
        error lacked the `subject` metadata the other SESSION_ARCHIVED errors carry."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        await put_insight(stack, root.id, "hint")
        turn = asyncio.ensure_future(send(stack, root.id, "late", request_id="a-1"))
        await spy.started.wait()
        target = {"space_id": stack.space.sid, "session_id": root.id}
        await stack.gw.Archive(agent_pb2.ArchiveRequest(**target))
        gate.set()
        error = await rpc_error(turn)
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"
        assert (error.details() or "").startswith(f"session {root.id} was archived during")
        assert error_info_metadata(error) == {"subject": f"session/{root.id}"}
        assert await stack.records(root.id) == []
        assert await insight(stack, root.id) == "hint"
        await stack.gw.Unarchive(agent_pb2.UnarchiveRequest(**target))
        reply = await send(stack, root.id, "again")
        assert [r.content for r in reply.records] == ["again", "echo: again"]

    async def test_submit_retry(self, make_stack: StackMaker) -> None:
        """A retried SubmitToolResults answers the stored continuation; the model ran once."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[tool_definition("lookup")])
        first = await submit(stack, root.id, ("c1", "42"), request_id="s-1")
        again = await submit(stack, root.id, ("c1", "42"), request_id="s-1")
        assert again == first
        assert len(spy.turns) == 2

    async def test_after_full_trim(self, make_stack: StackMaker) -> None:
        """A session trimmed to no records still takes turns, numbered on, and replays them."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "one")
        await trim(stack, root.id, 0)
        reply = await send(stack, root.id, "two", request_id="t-1")
        assert [r.seq for r in reply.records] == [3, 4]
        assert list(reply.records) == await stack.records(root.id)
        assert await send(stack, root.id, "two", request_id="t-1") == reply
        assert len(spy.calls) == 2
