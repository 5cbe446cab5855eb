"""Turn leases on a short TTL (DESIGN §4.2; issue #13 finding 1): renewed while the turn runs,
and the built-in fork of a retried turn made once.

The outages themselves (storage killed, PostgreSQL restarted, a gateway killed mid-turn) are
in tests/gateway/turns/test_lease_outage.py, with real processes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import asyncpg
import grpc
import pytest

from agent_gateway.background.runner import BackgroundRunner, RunnerLimits
from agent_gateway.clients.rpc import Caller
from agent_gateway.llm import ToolCallSpec
from agent_gateway.tools.base import CREATE_SESSION
from agent_gateway.turns.lease_keeper import LeaseKeeper, LeaseTimes
from stello.agent.v1 import agent_pb2
from stello.errors import Unavailable, error_info_reason
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Counted, Stack, StackMaker, rpc_error
from tests.gateway.turns_support import SpyProvider, answer, send, stream_events, wait_for

pytestmark = pytest.mark.sql

LEASE = """
SELECT turn_token, turn_expires_at - now() AS left FROM sessions WHERE space_id = $1 AND id = $2
"""
CHILDREN = "SELECT count(*) FROM sessions WHERE space_id = $1 AND parent_id = $2"
TAKE_LEASE = """
UPDATE sessions SET turn_token = $3, turn_expires_at = now() + interval '30 seconds'
WHERE space_id = $1 AND id = $2
"""


async def begin_elsewhere(stack: Stack, session_id: str) -> grpc.aio.AioRpcError:
    """BeginTurn straight on storage, as another turn would; it must be refused."""
    request = storage_pb2.BeginTurnRequest(
        space_id=stack.space.sid, session_id=session_id, ttl_s=30
    )
    return await rpc_error(stack.storage.BeginTurn(request))


class TestRenewal:
    async def test_a_turn_longer_than_its_ttl_keeps_the_lease(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """While the model answers for longer than the 2 s TTL, the lease is renewed: it never
        reaches further than one TTL ahead, another turn stays TURN_IN_PROGRESS past the TTL,
        and the turn commits and gives it back."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy, turn_lease_ttl_s=2)
        root = await stack.root()
        turn = asyncio.ensure_future(send(stack, root.id, "slow"))
        await spy.started.wait()
        await asyncio.sleep(3.0)  # one and a half TTLs: the first lease alone has ended
        error = await begin_elsewhere(stack, root.id)
        assert error_info_reason(error) == "TURN_IN_PROGRESS"
        lease = await pool.fetchrow(LEASE, stack.space.id, uuid.UUID(root.id))
        assert lease is not None and lease["left"].total_seconds() <= 2.0
        gate.set()
        reply = await turn
        assert reply.assistant.content == "echo: slow"
        lease = await pool.fetchrow(LEASE, stack.space.id, uuid.UUID(root.id))
        assert lease is not None and lease["turn_token"] is None

    async def test_a_turn_past_its_maximum_is_ended(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """At STELLO_GATEWAY_TURN_MAX_S the turn is ended: its model call (which would never
        answer) is cut short, the call answers DEADLINE_EXCEEDED naming the setting, nothing is
        written and the lease is given back at once (another turn may start)."""
        spy = SpyProvider(gate=asyncio.Event())  # never set
        stack = await make_stack(spy, turn_lease_ttl_s=1, turn_max_s=0.5)
        root = await stack.root()
        error = await rpc_error(asyncio.wait_for(send(stack, root.id, "endless"), 10))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert "STELLO_GATEWAY_TURN_MAX_S" in (error.details() or "")
        assert spy.cancelled == 1
        assert await stack.records(root.id) == []
        lease = await pool.fetchrow(LEASE, stack.space.id, uuid.UUID(root.id))
        assert lease is not None and lease["turn_token"] is None

    async def test_the_maximum_is_kept_between_renewals(self, make_stack: StackMaker) -> None:
        """With renewals 3.3 s apart (a 10 s TTL), a turn past STELLO_GATEWAY_TURN_MAX_S=1 ends
        within half a second of it, DEADLINE_EXCEEDED: not at the next renewal."""
        spy = SpyProvider(gate=asyncio.Event())  # never set
        stack = await make_stack(spy, turn_lease_ttl_s=10, turn_max_s=1)
        root = await stack.root()
        began = time.monotonic()
        error = await rpc_error(asyncio.wait_for(send(stack, root.id, "endless"), 10))
        took = time.monotonic() - began
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert (error.details() or "").startswith(
            "the turn ran past 1 s (STELLO_GATEWAY_TURN_MAX_S)"
        )
        assert 1.0 <= took < 1.5, took

    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_a_lease_taken_by_another_turn_cuts_the_model_call_short(
        self, streamed: bool, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A lease that lapsed and was taken (here: written over, as a turn taking an expired
        lease does) is seen by the next renewal: the model call in flight is cut short and the
        turn answers ABORTED CONCURRENT_MODIFICATION at once, writing nothing; the other turn
        keeps the lease."""
        spy = SpyProvider(gate=asyncio.Event())  # never set: only the cut ends the call
        stack = await make_stack(spy, turn_lease_ttl_s=1)
        root = await stack.root()
        if streamed:
            turn = asyncio.ensure_future(stream_events(stack, root.id, "held"))
        else:
            turn = asyncio.ensure_future(send(stack, root.id, "held"))
        await asyncio.wait_for(spy.started.wait(), 10)
        other = uuid.uuid4()
        await pool.execute(TAKE_LEASE, stack.space.id, uuid.UUID(root.id), other)
        error = await rpc_error(asyncio.wait_for(turn, 10))
        assert error.code() is grpc.StatusCode.ABORTED
        assert error_info_reason(error) == "CONCURRENT_MODIFICATION"
        assert "another turn took it" in (error.details() or "")
        assert spy.cancelled == 1
        assert await stack.records(root.id) == []
        lease = await pool.fetchrow(LEASE, stack.space.id, uuid.UUID(root.id))
        assert lease is not None and lease["turn_token"] == other


class TestBuiltinForkOnce:
    async def test_a_retried_turn_repeats_its_fork(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A Send whose first attempt failed after its built-in fork, retried with its
        request_id, makes no second fork though the model's call id differs this time: the
        fork's request id follows the turn's request and the call's place, not the lease."""
        spy = SpyProvider().then(
            answer("", ToolCallSpec("call-first", CREATE_SESSION, {"label": "Kid"})),
            Unavailable("the model went away"),
            answer("", ToolCallSpec("call-again", CREATE_SESSION, {"label": "Kid"})),
        )
        stack = await make_stack(spy)
        root = await stack.root()
        first = await rpc_error(send(stack, root.id, "fork once", request_id="r-fork"))
        assert first.code() is grpc.StatusCode.UNAVAILABLE
        assert await pool.fetchval(CHILDREN, stack.space.id, uuid.UUID(root.id)) == 1
        reply = await send(stack, root.id, "fork once", request_id="r-fork")
        assert [r.tool_call_id for r in reply.records if r.tool_call_id] == ["call-again"]
        assert await pool.fetchval(CHILDREN, stack.space.id, uuid.UUID(root.id)) == 1

    async def test_turns_without_request_id_fork_each_time(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """Without a request_id every Send is a new turn, and each of its forks is new."""
        call = ToolCallSpec("same-id", CREATE_SESSION, {"label": "Kid"})
        spy = SpyProvider().then(answer("", call), answer("one"), answer("", call), answer("two"))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "fork")
        await send(stack, root.id, "fork")
        assert await pool.fetchval(CHILDREN, stack.space.id, uuid.UUID(root.id)) == 2


class TestDeletedMidTurn:
    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_a_delete_during_a_turn_is_no_warning(
        self, streamed: bool, make_stack: StackMaker, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A session deleted while its turn runs ends the turn NOT_FOUND and the lease's release
        finds no session: an expected outcome of the user's delete, logged at INFO with no
        WARNING (explore4 F6d: "could not release the turn lease of X: session X not found")."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        if streamed:
            turn = asyncio.ensure_future(stream_events(stack, root.id, "doomed"))
        else:
            turn = asyncio.ensure_future(send(stack, root.id, "doomed"))
        await asyncio.wait_for(spy.started.wait(), 10)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="agent_gateway"):
            await stack.gw.DeleteSession(
                agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=root.id)
            )
            gate.set()
            error = await rpc_error(asyncio.wait_for(turn, 10))
            assert error.code() is grpc.StatusCode.NOT_FOUND
            # What happened, not "session S not found" as for a wrong id.
            assert error.details() == DELETED.format(root.id)
            assert error_info_reason(error) == "SESSION_NOT_FOUND"
            await wait_for(lambda: "to release" in caplog.text)  # released after the reply
        released = [r for r in caplog.records if "turn lease of" in r.getMessage()]
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == []
        assert [r.levelno for r in released] == [logging.INFO]
        assert "was deleted" in released[0].getMessage()

    @pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
    async def test_a_delete_cuts_the_model_call_short(
        self, streamed: bool, make_stack: StackMaker
    ) -> None:
        """The next renewal after the delete ends the turn: its model call is cut short (it
        ran on, tool rounds and all, to a commit that could only fail NOT_FOUND), and the
        caller is answered NOT_FOUND saying the session was deleted during the turn."""
        spy = SpyProvider(gate=asyncio.Event())  # never set: only the cut ends the call
        stack = await make_stack(spy, turn_lease_ttl_s=1)
        root = await stack.root()
        if streamed:
            turn = asyncio.ensure_future(stream_events(stack, root.id, "doomed"))
        else:
            turn = asyncio.ensure_future(send(stack, root.id, "doomed"))
        await asyncio.wait_for(spy.started.wait(), 10)
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=root.id)
        )
        error = await rpc_error(asyncio.wait_for(turn, 10))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert error.details() == DELETED.format(root.id)
        assert spy.cancelled == 1


DELETED = "session {} was deleted during the turn; nothing of the turn was written"


class TestEndedByItsCommit:
    async def test_a_renewal_answered_after_the_commit_released_the_lease_is_no_loss(
        self, counted: Counted, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A renewal in flight while the turn's commit released the lease is answered "not
        renewed": once the commit is sent that is the commit's doing (DEBUG), not another
        turn's (the WARNING "taken by another turn" an operator chases, explore11 F9), and the
        lease is not marked lost (the commit's own lease check decides)."""
        stack, storage = counted.stack, counted.clients.storage
        keeper = LeaseKeeper(
            storage, LeaseTimes(ttl_s=1, max_turn_s=60), BackgroundRunner(storage, RunnerLimits())
        )
        caller = Caller(stack.space.key)
        for committing in (True, False):
            session = uuid.UUID((await stack.root()).id)
            token = await storage.begin_turn(caller, stack.space.id, session, 1)
            kept = keeper.keep(caller, stack.space.id, session, token)
            kept.committing = committing
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="agent_gateway.turns.lease_keeper"):
                assert await storage.release_turn(caller, stack.space.id, session, token)
                assert kept.renewal is not None
                await asyncio.wait_for(asyncio.shield(kept.renewal), 5)  # the next renewal
            said = [(r.levelno, r.getMessage()) for r in caplog.records]
            if committing:
                assert kept.lost is None
                assert said == [
                    (logging.DEBUG, f"the turn lease of {session} ended with its turn's commit")
                ]
            else:  # the control: before the commit, it is another turn's doing
                assert kept.lost is not None
                assert said == [
                    (logging.WARNING, f"the turn lease of {session} was taken by another turn")
                ]
            kept.stop()
