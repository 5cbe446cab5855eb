"""The fork guard of stello_create_session (STELLO-SPEC §4.11, §6.7; DESIGN §4.5).

Its counter lives in the database, so the guard holds across gateway processes:
the last test runs two `python -m agent_gateway` processes over one storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.clients.rpc import Caller
from agent_gateway.forks.guard import ForkGuard
from agent_gateway.llm.prompts.messages import Prompts
from agent_gateway.tools.base import CREATE_SESSION
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from storage_service.guard import service as storage_guard
from tests.gateway.conftest import Backends, Counted, Stack, StackMaker
from tests.gateway.processes import gateway_process
from tests.gateway.turns_support import SpyProvider, answer, send, send_when_free, tool_call

pytestmark = pytest.mark.sql


def fork_command(label: str, **extra: Any) -> str:
    """What the echo model turns into one stello_create_session call."""
    return f"/tool {CREATE_SESSION} {json.dumps({'label': label, **extra})}"


def tool_result(reply: Any) -> tuple[str, bool]:
    """The first tool record of a turn: (content, is_error)."""
    record = next(r for r in reply.records if r.role == 4)
    return record.content, bool(record.metadata.fields["is_error"].bool_value)


async def child_labels(stack: Stack, session_id: str) -> list[str]:
    """The labels of the session's children."""
    view = await stack.view(session_id)
    return [(await stack.view(child)).node.label for child in view.node.children]


class HoldAt:
    """Holds the saga at `point`, once set (it never goes on there), and says when it got
    there."""

    def __init__(self) -> None:
        self.point = ""
        self.reached = asyncio.Event()

    async def hit(self, point: str) -> None:
        """At the point: wait for good (until the call is cancelled)."""
        if point == self.point:
            self.reached.set()
            await asyncio.Event().wait()


class TestGuard:
    async def test_off_by_default(self, stack: Stack) -> None:
        """Without the settings a session forks itself at its first turn."""
        root = await stack.root()
        content, is_error = tool_result(await send(stack, root.id, fork_command("early")))
        assert not is_error and json.loads(content)["label"] == "early"

    async def test_too_early_then_cooling_down_then_allowed(self, make_stack: StackMaker) -> None:
        """Min 2 turns and cooldown 2: refused at 0, allowed at 2, refused at 3, allowed at 4."""
        stack = await make_stack(fork_min_turns=2, fork_cooldown_turns=2)
        root = await stack.root()
        outcomes = []
        for turn in range(5):
            reply = await send(stack, root.id, fork_command(f"at {turn}"))
            outcomes.append(tool_result(reply))
        assert [is_error for _, is_error in outcomes] == [True, True, False, True, False]
        assert outcomes[0][0] == (
            "Not enough turns to create a session yet: this session has 0 committed turn(s), "
            "2 are needed"
        )
        assert outcomes[3][0] == (
            "Cooling down: this session created a session at turn 2; the next one is allowed "
            "from turn 4 (now 3)"
        )
        assert await child_labels(stack, root.id) == ["at 2", "at 4"]

    async def test_the_zh_preset_carries_the_reference_reasons(
        self, make_stack: StackMaker
    ) -> None:
        """Under the zh preset the refusals contain 轮次不足 and 冷却期 (spec §6.7 1, 3)."""
        stack = await make_stack(fork_min_turns=1, fork_cooldown_turns=5, prompts="zh")
        root = await stack.root()
        early, _ = tool_result(await send(stack, root.id, fork_command("a")))
        await send(stack, root.id, fork_command("b"))
        cooling, _ = tool_result(await send(stack, root.id, fork_command("c")))
        assert "轮次不足" in early and "冷却期" in cooling

    async def test_calls_of_one_answer_fork_once_within_a_cooldown(
        self, make_stack: StackMaker
    ) -> None:
        """Three calls in one answer with a cooldown: one fork, two refusals."""
        spy = SpyProvider().then(
            answer("", *(tool_call(CREATE_SESSION, f"c{i}", label=f"k{i}") for i in range(3))),
            answer("done"),
        )
        stack = await make_stack(spy, fork_cooldown_turns=3)
        root = await stack.root()
        reply = await send(stack, root.id, "fan out")
        errors = [
            bool(r.metadata.fields["is_error"].bool_value) for r in reply.records if r.role == 4
        ]
        assert sorted(errors) == [False, True, True]
        assert len(await child_labels(stack, root.id)) == 1

    async def test_a_failed_fork_gives_its_claim_back(self, make_stack: StackMaker) -> None:
        """A fork that fails after its claim (a missing profile variable) keeps no cooldown."""
        stack = await make_stack(fork_cooldown_turns=5)
        root = await stack.root()
        failed, is_error = tool_result(
            await send(stack, root.id, fork_command("bad", profile="research"))
        )
        assert is_error and "topic" in failed
        content, is_error = tool_result(await send(stack, root.id, fork_command("good")))
        assert not is_error, content
        assert await child_labels(stack, root.id) == ["good"]

    async def test_a_turn_cancelled_during_its_fork_gives_the_claim_back(
        self, make_stack: StackMaker
    ) -> None:
        """The client leaves (or its deadline passes) while the model's stello_create_session
        is making its fork: nothing was committed, so the claim is given back and the next
        turn's fork is made. Before, the claim stayed: every fork of the session through the
        tool was refused as cooling down for the next 5 turns, after a fork never made."""
        hold = HoldAt()
        stack = await make_stack(faults=hold, fork_cooldown_turns=5)
        root = await stack.root()
        hold.point = "fork.after_create"
        turn = asyncio.ensure_future(send(stack, root.id, fork_command("cut short")))
        await asyncio.wait_for(hold.reached.wait(), 10)
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await turn
        hold.point = ""  # the next fork goes through
        reply = await send_when_free(stack, root.id, fork_command("after"))
        content, is_error = tool_result(reply)
        assert not is_error, content
        assert await child_labels(stack, root.id) == ["after"]

    async def test_the_client_fork_rpc_is_not_guarded(self, make_stack: StackMaker) -> None:
        """The guard is the tool's: a client's Fork at turn 0 is made."""
        stack = await make_stack(fork_min_turns=5)
        root = await stack.root()
        assert (await stack.fork(root.id, label="by client")).label == "by client"


@pytest.mark.subprocess
@pytest.mark.slow
async def test_the_guard_holds_across_two_gateway_processes(
    stack: Stack, backends: Backends, database_env: dict[str, str], pool: asyncpg.Pool
) -> None:
    """Two gateway processes share one session's counter: a fork through one cools the other."""
    settings = {"STELLO_GATEWAY_FORK_MIN_TURNS": "1", "STELLO_GATEWAY_FORK_COOLDOWN_TURNS": "3"}
    root = await stack.root()
    async with (
        gateway_process(backends, database_env, "", **settings) as (_, first),
        gateway_process(backends, database_env, "", **settings) as (_, second),
        grpc.aio.insecure_channel(first) as one,
        grpc.aio.insecure_channel(second) as two,
    ):
        gateways = [agent_pb2_grpc.AgentGatewayStub(c) for c in (one, two)]

        async def fork_through(index: int, label: str) -> tuple[str, bool]:
            reply = await gateways[index].Send(
                agent_pb2.SendRequest(
                    space_id=stack.space.sid, session_id=root.id, content=fork_command(label)
                ),
                metadata=stack.space.metadata,
            )
            return tool_result(reply)

        outcomes = [
            await fork_through(0, "t0"),  # 0 turns: too early
            await fork_through(1, "t1"),  # 1: allowed, through the second process
            await fork_through(0, "t2"),  # 2: cooling down, seen by the first
            await fork_through(0, "t3"),  # 3: still cooling down
            await fork_through(0, "t4"),  # 4: allowed again
        ]
    assert [is_error for _, is_error in outcomes] == [True, False, True, True, False]
    assert "allowed from turn 4" in outcomes[2][0]
    assert await child_labels(stack, root.id) == ["t1", "t4"]
    stored = await pool.fetchval(
        "SELECT last_fork_turn FROM sessions WHERE space_id = $1 AND id = $2",
        stack.space.id,
        root.id,
    )
    assert stored == 4


async def test_a_claim_given_back_after_its_session_was_deleted_is_no_warning(
    counted: Counted, caplog: pytest.LogCaptureFixture
) -> None:
    """A fork claim given back once its session was deleted (its fork failed because of the
    delete) has nothing to give back: DEBUG, not the WARNING of a claim that could not be
    returned (the deletes during turns log none)."""
    stack = counted.stack
    guard = ForkGuard(counted.clients.storage, Prompts.preset(), min_turns=0, cooldown_turns=2)
    caller = Caller(stack.space.key)
    root = uuid.UUID((await stack.root()).id)
    claim = await guard.claim(caller, stack.space.id, root)
    assert not isinstance(claim, str)
    await stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=str(root))
    )
    with caplog.at_level(logging.DEBUG, logger="agent_gateway.forks.guard"):
        await guard.give_back(caller, stack.space.id, root, claim)
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.endswith("guard")]
    assert said == [
        (logging.DEBUG, f"fork claim of {root} not given back: the session was deleted")
    ]


class HeldClaims:
    """Storage's ClaimFork held once its claim is recorded (committed), before it answers:
    says when one got there, goes on when `release` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        claim = storage_guard.ForkGuard.claim

        async def held(guard: storage_guard.ForkGuard, *args: Any) -> storage_guard.ForkClaim:
            made = await claim(guard, *args)
            self.reached.set()
            await self.release.wait()
            return made

        monkeypatch.setattr(storage_guard.ForkGuard, "claim", held)


async def test_a_turn_cancelled_while_storage_grants_its_claim_gives_the_claim_back(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn is cancelled (the client left, its deadline passed) while its ClaimFork is in
    flight, once storage has recorded the claim: the claim's answer is still awaited and the
    granted claim given back before the cancellation is raised. Before, the call was cut, the
    answer never seen and the claim kept: the session's next fork through the tool was
    refused as cooling down, for a fork never made."""
    stack = counted.stack
    guard = ForkGuard(counted.clients.storage, Prompts.preset(), min_turns=0, cooldown_turns=5)
    caller = Caller(stack.space.key)
    root = uuid.UUID((await stack.root()).id)
    held = HeldClaims(monkeypatch)
    claiming = asyncio.ensure_future(guard.claim(caller, stack.space.id, root))
    try:
        await asyncio.wait_for(held.reached.wait(), 10)
        # Cancelled before the answer can come: the cancellation reaches the claiming task
        # at the loop's next step, the answer only after storage's reply crossed the channel.
        claiming.cancel()
    finally:
        held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await claiming
    monkeypatch.undo()
    again = await guard.claim(caller, stack.space.id, root)
    assert not isinstance(again, str), again
    assert again.granted
