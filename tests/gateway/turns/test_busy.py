"""Busy sessions (DESIGN §4.2, issue #38): what a turn does while another turn holds its session.

ENQUEUE waits in the session's line, kept in the database (so across gateways) and woken by
the space's event poller; INTERRUPT stops the running turn, which stores nothing. A slow model
behind the provider interface keeps the first turn running while the others arrive.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.llm import (
    Completion,
    Done,
    LLMMessage,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
)
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.settings import StelloSettings
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    StackMaker,
    close_stack,
    gateway_clients,
    open_stack,
    rpc_error,
)
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    cancel_reached,
    put_insight,
    roles,
    send,
    send_stream,
    submit,
    tool_call,
    tool_definition,
    wait_for,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

ENQUEUE = common_pb2.BUSY_POLICY_ENQUEUE
INTERRUPT = common_pb2.BUSY_POLICY_INTERRUPT
ROLLBACK = common_pb2.BUSY_POLICY_ROLLBACK
TICKETS = "SELECT count(*) FROM turn_waiters WHERE space_id = $1 AND session_id = $2"
LEASE = "SELECT turn_token FROM sessions WHERE space_id = $1 AND id = $2"


@dataclass(slots=True)
class Slow:
    """A slow model: the first `held` calls wait for `gate` (a stream after its first
    piece); it answers "echo: <last message>", and records the messages it was asked in
    call order, the most calls running at once, and the calls cut short."""

    held: int = 1_000_000
    delay_s: float = 0.01
    max_context_tokens: int = 1_000_000
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[list[LLMMessage]] = field(default_factory=list)
    running: int = 0
    most: int = 0
    cancelled: int = 0

    @property
    def last_messages(self) -> list[str]:
        """The last message of each call, in call order."""
        return [messages[-1].content for messages in self.asked]

    async def _hold(self, index: int) -> None:
        if index < self.held:
            await self.gate.wait()
        await asyncio.sleep(self.delay_s)

    def _enter(self, messages: Sequence[LLMMessage]) -> int:
        self.asked.append(list(messages))
        self.running += 1
        self.most = max(self.most, self.running)
        self.started.set()
        return len(self.asked) - 1

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Wait if held, then echo the last message."""
        index = self._enter(messages)
        try:
            await self._hold(index)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        return Completion(f"echo: {messages[-1].content}", (), Usage(1, 1, 2))

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream "echo: " at once, then (once let go) the rest."""
        index = self._enter(messages)
        try:
            yield TextDelta("echo: ")
            await self._hold(index)
            yield TextDelta(messages[-1].content)
            yield Done(Completion(f"echo: {messages[-1].content}", (), Usage(1, 1, 2)))
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        finally:
            self.running -= 1


async def tickets(pool: asyncpg.Pool, stack: Stack, session_id: str) -> int:
    """How many calls wait in the session's line."""
    return int(await pool.fetchval(TICKETS, stack.space.id, uuid.UUID(session_id)))


async def queued(pool: asyncpg.Pool, stack: Stack, session_id: str, count: int) -> None:
    """Wait until `count` calls wait in the session's line."""
    await wait_for(lambda: _has(pool, stack, session_id, count), within_s=10)


async def _has(pool: asyncpg.Pool, stack: Stack, session_id: str, count: int) -> bool:
    return await tickets(pool, stack, session_id) == count


async def _lease_free(pool: asyncpg.Pool, stack: Stack, session_id: str) -> bool:
    token = await pool.fetchval(LEASE, stack.space.id, uuid.UUID(session_id))
    return token is None


def enqueue(stack: Stack, session_id: str, content: str, **fields: Any) -> asyncio.Future[Any]:
    """A Send with ENQUEUE, running."""
    return asyncio.ensure_future(send(stack, session_id, content, busy=ENQUEUE, **fields))


def users(records: Sequence[common_pb2.Record]) -> list[str]:
    """The user messages of records, in order."""
    return [r.content for r in records if r.role == common_pb2.RECORD_ROLE_USER]


class TestEnqueue:
    async def test_ten_sends_run_one_at_a_time_in_arrival_order(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Ten ENQUEUE Sends to one session, each arriving while the first runs, all answer:
        the model never runs two at once, and the turns are stored in arrival order."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        calls = [enqueue(stack, root.id, "m0")]
        await asyncio.wait_for(slow.started.wait(), 10)
        for i in range(1, 10):
            calls.append(enqueue(stack, root.id, f"m{i}"))
            await queued(pool, stack, root.id, i)
        slow.gate.set()
        replies = await asyncio.wait_for(asyncio.gather(*calls), 60)
        assert [r.assistant.content for r in replies] == [f"echo: m{i}" for i in range(10)]
        assert slow.most == 1
        assert slow.last_messages == [f"m{i}" for i in range(10)]
        assert users(await stack.records(root.id)) == [f"m{i}" for i in range(10)]
        assert await tickets(pool, stack, root.id) == 0

    async def test_a_handover_wakes_about_one_waiter(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        settings: StelloSettings,
        pool: asyncpg.Pool,
    ) -> None:
        """Ten queued Sends ask storage a number of BeginTurns that grows with the line, not
        with its square: a waiter asks again only after as many of its session's events as
        there are calls ahead of it (here at most 4 per Send)."""
        slow = Slow()
        clients = gateway_clients(backends.gateway_config(), backends, settings, False)
        gateway = await start_gateway(clients=clients, provider=slow)
        stack = await open_stack(backends, gateway, space, summarizer)
        try:
            root = await stack.root()
            calls = [enqueue(stack, root.id, "m0")]
            await asyncio.wait_for(slow.started.wait(), 10)
            for i in range(1, 10):
                calls.append(enqueue(stack, root.id, f"m{i}"))
                await queued(pool, stack, root.id, i)
            slow.gate.set()
            await asyncio.wait_for(asyncio.gather(*calls), 60)
        finally:
            await close_stack(stack)
        assert clients.storage.calls["BeginTurn"] <= 4 * 10

    async def test_two_gateways_share_one_line(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Sends queued alternately on two gateways over one database run one at a time in
        their arrival order (the line is the database's, not a process's)."""
        slow = Slow()
        first = await make_stack(slow)
        second = await make_stack(slow)
        root = await first.root()
        calls = [enqueue(first, root.id, "m0")]
        await asyncio.wait_for(slow.started.wait(), 10)
        for i in range(1, 6):
            calls.append(enqueue(second if i % 2 else first, root.id, f"m{i}"))
            await queued(pool, first, root.id, i)
        slow.gate.set()
        await asyncio.wait_for(asyncio.gather(*calls), 60)
        assert slow.most == 1
        assert users(await first.records(root.id)) == [f"m{i}" for i in range(6)]

    async def test_a_caller_that_cancels_leaves_the_line(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A queued call that its client cancels takes its ticket out of line at once and
        writes nothing; the next queued call runs after the first."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        gone = enqueue(stack, root.id, "gone")
        await queued(pool, stack, root.id, 1)
        gone.cancel()
        await queued(pool, stack, root.id, 0)
        last = enqueue(stack, root.id, "last")
        await queued(pool, stack, root.id, 1)
        slow.gate.set()
        await asyncio.wait_for(asyncio.gather(running, last), 30)
        assert users(await stack.records(root.id)) == ["first", "last"]
        assert slow.last_messages == ["first", "last"]

    async def test_a_caller_cancelled_before_its_ticket_is_told_leaves_the_line(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        backends: Backends,
        settings: StelloSettings,
        local_calls: bool,
    ) -> None:
        """A call cancelled after storage put its ticket in line but before the gateway had
        BeginTurn's answer still takes the ticket out (the answer is awaited, shielded): the
        calls behind it do not wait for the ticket to expire."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        told = asyncio.Event()
        hold = asyncio.Event()
        start_turn = clients.storage.start_turn

        async def held_start_turn(caller: Any, request: Any) -> Any:
            reply = await start_turn(caller, request)
            if reply.HasField("queued") and not hold.is_set():
                told.set()
                await hold.wait()
            return reply

        clients.storage.start_turn = held_start_turn  # type: ignore[method-assign]
        slow = Slow()
        stack = await make_stack(slow, clients=clients)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        gone = enqueue(stack, root.id, "gone")
        await asyncio.wait_for(told.wait(), 10)
        await queued(pool, stack, root.id, 1)
        gone.cancel()
        await cancel_reached(stack)  # the gateway sees the cancellation while the answer is held
        hold.set()
        await queued(pool, stack, root.id, 0)
        slow.gate.set()
        await asyncio.wait_for(running, 30)
        assert users(await stack.records(root.id)) == ["first"]

    async def test_a_cancelled_caller_leaves_the_line_before_its_poller_stops(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        backends: Backends,
        settings: StelloSettings,
        local_calls: bool,
    ) -> None:
        """A waiting call that ends takes its ticket out of line first, and only then leaves
        the space's poller: a poller slow to stop (its read of the events slow to end) does
        not keep the ticket in line, the calls behind it waiting."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        reading = asyncio.Event()
        hold = asyncio.Event()
        read_events = clients.storage.read_events

        async def slow_to_end(*args: Any, **kwargs: Any) -> Any:
            if hold.is_set():
                return await read_events(*args, **kwargs)
            reading.set()
            try:
                await hold.wait()
            finally:
                await asyncio.shield(hold.wait())  # a read whose end takes a while
            return await read_events(*args, **kwargs)

        clients.storage.read_events = slow_to_end  # type: ignore[method-assign]
        slow = Slow()
        stack = await make_stack(slow, clients=clients)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        gone = enqueue(stack, root.id, "gone")
        await asyncio.wait_for(reading.wait(), 10)
        await queued(pool, stack, root.id, 1)
        gone.cancel()
        try:
            await queued(pool, stack, root.id, 0)
        finally:
            hold.set()
        slow.gate.set()
        await asyncio.wait_for(running, 30)
        assert users(await stack.records(root.id)) == ["first"]

    async def test_a_caller_cancelled_as_it_leaves_the_poller_gives_its_lease_back(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        backends: Backends,
        settings: StelloSettings,
        local_calls: bool,
    ) -> None:
        """A waiting call that got the lease, cancelled while it leaves the space's poller
        (whose stop waits for its read to end), gives the lease back: it is not left held
        for a TTL with nobody to release it (the session refusing every other turn)."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        hold_reads, reading, stopping, cut, hold = (asyncio.Event() for _ in range(5))
        waiters: set[str] = set()
        start_turn, read_events = clients.storage.start_turn, clients.storage.read_events

        async def start_then_hold_reads(caller: Any, request: Any) -> Any:
            reply = await start_turn(caller, request)
            if reply.HasField("queued"):
                waiters.add(request.waiter)
            elif reply.token and request.waiter in waiters and not hold_reads.is_set():
                hold_reads.set()  # the poller's next read is slow to end
                await reading.wait()
            return reply

        async def slow_to_end(*args: Any, **kwargs: Any) -> Any:
            if hold_reads.is_set() and not hold.is_set():
                reading.set()
                try:
                    await hold.wait()
                except asyncio.CancelledError:
                    stopping.set()  # the leaving call stops the poller
                    while not hold.is_set():
                        try:
                            await asyncio.shield(hold.wait())
                        except asyncio.CancelledError:
                            cut.set()  # the leaving call was cancelled as it waited
                    raise
            return await read_events(*args, **kwargs)

        clients.storage.start_turn = start_then_hold_reads  # type: ignore[method-assign]
        clients.storage.read_events = slow_to_end  # type: ignore[method-assign]
        slow = Slow(held=1)
        stack = await make_stack(slow, clients=clients)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        gone = enqueue(stack, root.id, "gone")
        await queued(pool, stack, root.id, 1)
        slow.gate.set()
        await asyncio.wait_for(running, 30)
        await asyncio.wait_for(stopping.wait(), 10)
        gone.cancel()
        try:
            await asyncio.wait_for(cut.wait(), 10)
        finally:
            hold.set()
        await wait_for(lambda: _lease_free(pool, stack, root.id), within_s=10)
        reply = await asyncio.wait_for(send(stack, root.id, "next"), 30)
        assert reply.assistant.content == "echo: next"
        assert users(await stack.records(root.id)) == ["first", "next"]

    async def test_past_the_deadline_nothing_is_written(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A queued call whose deadline passes while it waits answers DEADLINE_EXCEEDED,
        leaves the line and writes nothing; the running turn is unaffected. The gateway's
        own answer, saying so, comes before the deadline (it met gRPC's at the deadline,
        and the client got gRPC's bare "Deadline Exceeded")."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        error = await rpc_error(
            stack.gw.Send(
                _request(stack, root.id, "late", busy=ENQUEUE),
                timeout=1.0,
            )
        )
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert error.details() == (
            f"the turn waited in line for session {root.id} until its deadline (busy policy "
            "enqueue); it left the line and nothing was written: retry, with a later deadline "
            "to wait longer"
        )
        await queued(pool, stack, root.id, 0)
        slow.gate.set()
        await asyncio.wait_for(running, 30)
        assert users(await stack.records(root.id)) == ["first"]
        assert slow.last_messages == ["first"]

    async def test_with_no_deadline_it_waits_at_most_the_turn_limit(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A queued call with no deadline of its own waits at most STELLO_GATEWAY_TURN_MAX_S:
        DEADLINE_EXCEEDED naming that setting (it said "until its deadline", which the
        client never set), out of line, nothing written."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy, turn_max_s=0.5)
        root = await stack.root()
        await send(stack, root.id, "look it up", tools=[tool_definition("lookup")])
        error = await rpc_error(send(stack, root.id, "and then?", busy=ENQUEUE))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert "STELLO_GATEWAY_TURN_MAX_S" in (error.details() or "")
        assert "(busy policy enqueue)" in (error.details() or "")  # a client's word, not ENQUEUE
        assert await tickets(pool, stack, root.id) == 0
        assert users(await stack.records(root.id)) == ["look it up"]

    async def test_waiting_calls_leave_the_space_cap_to_others(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Calls waiting in a session's line do no work, so they hold no place in the space's
        STELLO_MAX_CALLS_PER_SPACE: with the cap (2) taken by two queued Sends, the
        SubmitToolResults they wait for (and any other call of the space) was SPACE_BUSY,
        and the line could only end at the waiters' deadlines. Now it runs, then they do."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")), answer("found it"))
        stack = await make_stack(spy, stello={"max_calls_per_space": 2})
        root = await stack.root()
        await send(stack, root.id, "look it up", tools=[tool_definition("lookup")])
        waiting = [enqueue(stack, root.id, f"w{i}") for i in range(2)]
        await queued(pool, stack, root.id, 2)
        await submit(stack, root.id, ("c1", "42"))
        await asyncio.wait_for(asyncio.gather(*waiting), 10)
        assert sorted(users(await stack.records(root.id))) == ["look it up", "w0", "w1"]
        await send(stack, root.id, "after")  # the waiters' places were given back, once

    async def test_the_line_is_capped(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """With STELLO_GATEWAY_TURN_QUEUE_MAX calls waiting, one more is RESOURCE_EXHAUSTED
        TURN_QUEUE_FULL at once, naming the cap, and nothing of it is written."""
        slow = Slow()
        stack = await make_stack(slow, turn_queue_max=2)
        root = await stack.root()
        calls = [enqueue(stack, root.id, "m0")]
        await asyncio.wait_for(slow.started.wait(), 10)
        for i in (1, 2):
            calls.append(enqueue(stack, root.id, f"m{i}"))
            await queued(pool, stack, root.id, i)
        error = await rpc_error(send(stack, root.id, "one too many", busy=ENQUEUE))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info_reason(error) == "TURN_QUEUE_FULL"
        # What sets the line's length is named (it said "the most allowed (2)").
        assert error.details() == (
            f"2 turns already wait in line for session {root.id} (busy policy enqueue), the "
            "most this gateway lets wait (STELLO_GATEWAY_TURN_QUEUE_MAX=2); nothing was "
            "written: retry later, or set busy to interrupt (stop the running "
            "turn and run this one)"
        )
        slow.gate.set()
        await asyncio.wait_for(asyncio.gather(*calls), 30)
        assert users(await stack.records(root.id)) == ["m0", "m1", "m2"]

    async def test_a_queued_send_waits_for_pending_tool_calls(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A turn that stopped on a client tool call keeps the session busy for a queued Send:
        it waits for SubmitToolResults (which the line lets through), so the group is not
        dropped, then runs after it."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")), answer("found it"))
        stack = await make_stack(spy)
        root = await stack.root()
        first = await send(stack, root.id, "look it up", tools=[tool_definition("lookup")])
        assert [c.id for c in first.pending_tool_calls] == ["c1"]
        waiting = enqueue(stack, root.id, "and then?")
        await queued(pool, stack, root.id, 1)
        assert not waiting.done()
        await submit(stack, root.id, ("c1", "42"))
        reply = await asyncio.wait_for(waiting, 10)
        assert reply.assistant.content == "echo: and then?"
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant", "tool", "assistant", "user", "assistant"]

    async def test_a_queued_submit_whose_calls_were_answered_says_so(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A second SubmitToolResults for the same pending calls, queued behind the first,
        finds them answered once it runs: FAILED_PRECONDITION NO_PENDING_TOOL_CALLS saying
        how a session comes to have none (it said only "has no pending tool calls to
        answer"), and nothing of it is stored."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate).then(answer("", tool_call("lookup", "c1")), answer("done"))
        stack = await make_stack(spy)
        root = await stack.root()
        turn = asyncio.ensure_future(
            send(stack, root.id, "look it up", tools=[tool_definition("lookup")])
        )
        gate.set()
        await asyncio.wait_for(turn, 10)
        gate.clear()
        first = asyncio.ensure_future(submit(stack, root.id, ("c1", "42"), busy=ENQUEUE))
        await wait_for(lambda: len(spy.calls) == 2)
        second = asyncio.ensure_future(submit(stack, root.id, ("c1", "43"), busy=ENQUEUE))
        await queued(pool, stack, root.id, 1)
        gate.set()
        await asyncio.wait_for(first, 10)
        error = await rpc_error(asyncio.wait_for(second, 10))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "NO_PENDING_TOOL_CALLS"
        assert error.details() == (
            f"session {root.id} has no pending tool calls to answer: its last turn asked for "
            "none, or they were answered since (by another SubmitToolResults) or dropped (by "
            "a Send); nothing was written"
        )
        assert roles(await stack.records(root.id)) == ["user", "assistant", "tool", "assistant"]

    async def test_a_retried_request_id_answers_the_first_turn(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A Send retried with its request_id while the first call still runs waits in line
        (the policy is not part of the request) and answers the first call's turn once it
        commits: the model is called once, the turn stored once."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        first = asyncio.ensure_future(send(stack, root.id, "once", request_id="r-once"))
        await asyncio.wait_for(slow.started.wait(), 10)
        retry = enqueue(stack, root.id, "once", request_id="r-once")
        await queued(pool, stack, root.id, 1)
        slow.gate.set()
        replies = await asyncio.wait_for(asyncio.gather(first, retry), 30)
        assert replies[0] == replies[1]
        assert slow.last_messages == ["once"]
        assert users(await stack.records(root.id)) == ["once"]

    async def test_a_queued_stream_streams_after_the_running_turn(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """SendStream with ENQUEUE waits in line while another turn runs (showing nothing),
        then streams its own answer and is stored after it."""
        slow = Slow(held=1)
        stack = await make_stack(slow)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        stream = send_stream(stack, root.id, "second", busy=ENQUEUE)
        await queued(pool, stack, root.id, 1)
        assert len(slow.asked) == 1
        slow.gate.set()
        events = await asyncio.wait_for(_events(stream), 30)
        await asyncio.wait_for(running, 30)
        text = "".join(e.text_delta.text for e in events if e.HasField("text_delta"))
        assert text == "echo: second"
        assert events[-1].HasField("done")
        assert slow.most == 1
        assert users(await stack.records(root.id)) == ["first", "second"]

    async def test_a_delete_ends_the_line_with_no_warning(
        self, make_stack: StackMaker, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A session deleted while a turn runs and another waits in line ends both NOT_FOUND;
        the gateway logs the line and the lease gone with the session at INFO, no WARNING
        (explore4 F6d)."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        waiting = enqueue(stack, root.id, "second")
        await queued(pool, stack, root.id, 1)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="agent_gateway"):
            await stack.gw.DeleteSession(
                agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=root.id)
            )
            slow.gate.set()
            for turn in (running, waiting):
                error = await rpc_error(asyncio.wait_for(turn, 10))
                assert error.code() is grpc.StatusCode.NOT_FOUND
            # The waiting call says what happened while it waited ("session ... not found").
            assert error.details() == (
                f"session {root.id} was deleted while the turn waited in line (busy policy "
                "enqueue); nothing of the turn was written"
            )
            assert error_info_reason(error) == "SESSION_NOT_FOUND"
            await wait_for(lambda: "to release" in caplog.text)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == []

    async def test_an_archive_ends_the_line_saying_so(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A session archived while a turn waits in line ends it FAILED_PRECONDITION
        SESSION_ARCHIVED saying so (it said "session S is archived", as for a session
        archived before the call), out of line, nothing of it written."""
        slow = Slow()
        stack = await make_stack(slow)
        root = await stack.root()
        running = enqueue(stack, root.id, "first")
        await asyncio.wait_for(slow.started.wait(), 10)
        waiting = enqueue(stack, root.id, "second")
        await queued(pool, stack, root.id, 1)
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        slow.gate.set()
        await rpc_error(asyncio.wait_for(running, 10))
        error = await rpc_error(asyncio.wait_for(waiting, 10))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "SESSION_ARCHIVED"
        assert error.details() == (
            f"session {root.id} was archived while the turn waited in line (busy policy "
            "enqueue); nothing of the turn was written: unarchive it to go on"
        )
        assert await tickets(pool, stack, root.id) == 0
        assert users(await stack.records(root.id)) == []


class TestInterrupt:
    async def test_an_interrupt_on_the_same_gateway_does_not_wait_for_a_renewal(
        self, make_stack: StackMaker
    ) -> None:
        """With a lease of 600 s (renewed every 200 s), an INTERRUPT of a turn running on the
        same gateway cuts it at once: it does not wait for the running turn's next renewal
        to learn of the take-over."""
        slow = Slow(held=1)
        stack = await make_stack(slow, turn_lease_ttl_s=600)
        root = await stack.root()
        running = asyncio.ensure_future(send(stack, root.id, "first"))
        await asyncio.wait_for(slow.started.wait(), 10)
        reply = await asyncio.wait_for(send(stack, root.id, "second", busy=INTERRUPT), 10)
        assert reply.assistant.content == "echo: second"
        error = await rpc_error(asyncio.wait_for(running, 10))
        assert error_info_reason(error) == "TURN_INTERRUPTED"
        assert "(busy policy interrupt or rollback)" in (error.details() or "")  # a client's word
        assert slow.cancelled == 1
        assert users(await stack.records(root.id)) == ["second"]

    async def test_an_interrupt_mid_stream_stops_the_first(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """An INTERRUPT Send while a stream shows its text: the stream ends ABORTED
        TURN_INTERRUPTED, its model call cut, nothing of it stored and the insight kept (the
        second turn's context carries it); the second answers at once."""
        slow = Slow(held=1)
        stack = await make_stack(slow)
        root = await stack.root()
        await put_insight(stack, root.id, "remember the blue door")
        stream = send_stream(stack, root.id, "first")
        event = await asyncio.wait_for(stream.read(), 10)
        assert event.text_delta.text == "echo: "
        reply = await asyncio.wait_for(send(stack, root.id, "second", busy=INTERRUPT), 10)
        assert reply.assistant.content == "echo: second"
        error = await rpc_error(_drain(stream))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "TURN_INTERRUPTED"
        assert slow.cancelled == 1
        assert users(await stack.records(root.id)) == ["second"]
        second_context = " ".join(m.content for m in slow.asked[1])
        assert "remember the blue door" in second_context

    async def test_an_interrupt_from_another_gateway(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """ROLLBACK (INTERRUPT's twin) through a second gateway stops a turn running on the
        first: its lease renewal learns of the take-over, cuts the model call and answers
        ABORTED TURN_INTERRUPTED; only the second turn is stored."""
        held = Slow(held=1)
        first = await make_stack(held, turn_lease_ttl_s=1)
        second = await make_stack(Slow(held=0), turn_lease_ttl_s=1)
        root = await first.root()
        running = asyncio.ensure_future(send(first, root.id, "first"))
        await asyncio.wait_for(held.started.wait(), 10)
        reply = await asyncio.wait_for(send(second, root.id, "second", busy=ROLLBACK), 10)
        assert reply.assistant.content == "echo: second"
        error = await rpc_error(asyncio.wait_for(running, 10))
        assert error_info_reason(error) == "TURN_INTERRUPTED"
        assert held.cancelled == 1
        assert users(await first.records(root.id)) == ["second"]

    async def test_a_chain_of_interrupts_across_gateways_tells_each_turn(
        self, make_stack: StackMaker
    ) -> None:
        """A turn on the first gateway stopped by an INTERRUPT on the second, itself stopped
        by an INTERRUPT on the first before the first turn's renewal: both stopped turns are
        answered TURN_INTERRUPTED (the first was told CONCURRENT_MODIFICATION: storage kept
        only the latest stopped token); only the last turn is stored."""
        first_model, second_model = Slow(held=1), Slow(held=1)
        first = await make_stack(first_model, turn_lease_ttl_s=3)
        second = await make_stack(second_model, turn_lease_ttl_s=3)
        root = await first.root()
        oldest = asyncio.ensure_future(send(first, root.id, "oldest"))
        await asyncio.wait_for(first_model.started.wait(), 10)
        middle = asyncio.ensure_future(send(second, root.id, "middle", busy=INTERRUPT))
        await asyncio.wait_for(second_model.started.wait(), 10)
        reply = await asyncio.wait_for(send(first, root.id, "last", busy=INTERRUPT), 10)
        assert reply.assistant.content == "echo: last"
        for stopped in (oldest, middle):
            error = await rpc_error(asyncio.wait_for(stopped, 10))
            assert error_info_reason(error) == "TURN_INTERRUPTED", error.details()
        assert users(await first.records(root.id)) == ["last"]

    async def test_an_interrupt_jumps_the_line(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """An INTERRUPT runs at once, ahead of the queued turns, which keep their places and
        run after it."""
        slow = Slow(held=1)
        stack = await make_stack(slow)
        root = await stack.root()
        running = asyncio.ensure_future(send(stack, root.id, "first"))
        await asyncio.wait_for(slow.started.wait(), 10)
        waiting = enqueue(stack, root.id, "queued")
        await queued(pool, stack, root.id, 1)
        await asyncio.wait_for(send(stack, root.id, "now", busy=INTERRUPT), 10)
        await asyncio.wait_for(waiting, 10)
        assert error_info_reason(await rpc_error(running)) == "TURN_INTERRUPTED"
        assert users(await stack.records(root.id)) == ["now", "queued"]


def _request(stack: Stack, session_id: str, content: str, **fields: Any) -> Any:
    return agent_pb2.SendRequest(
        space_id=stack.space.sid, session_id=session_id, content=content, **fields
    )


async def _events(stream: Any) -> list[Any]:
    """Every event of a stream, read to its end."""
    events = []
    while (event := await stream.read()) != grpc.aio.EOF:
        events.append(event)
    return events


async def _drain(stream: Any) -> None:
    """Read a stream to its end (its error raised)."""
    while await stream.read() != grpc.aio.EOF:
        pass
