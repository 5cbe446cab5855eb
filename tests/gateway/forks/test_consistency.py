"""A Fork appears all at once or not at all (DESIGN §4.1), proven with a fault at every point.

In-process: a `Faults` object stops the gateway's real server at the point (the
RPC is cut off mid-saga, as a crash would). Subprocess: ``python -m
agent_gateway`` with ``STELLO_GATEWAY_FAULT=<point>:exit`` dies with status 137
there. Either way no read RPC of any service shows a half-made session, the
tree's sweeper (a 4 s TTL here) removes every leftover row, and retrying the same
Fork (same request_id) ends with exactly one, complete session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.forks.faults import EXIT_CODE, FAULT_POINTS
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from tests.gateway.conftest import (
    TTL_S,
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    close_stack,
    open_stack,
    rpc_error,
)
from tests.gateway.probes import (
    assert_complete,
    assert_invisible,
    children_of,
    fork_request,
    provisional_ids,
    seeded_source,
    wait_until_gone,
)
from tests.gateway.processes import gateway_process
from tests.support.fixtures import TestSpace
from tree_service.unit import TreeRepository

pytestmark = pytest.mark.sql

BEFORE_COMMIT = [p for p in FAULT_POINTS if p != "fork.after_commit"]
SWEEP_WITHIN_S = TTL_S + 3.0


@pytest.fixture(name="provisioning_ttl_s")
def _provisioning_ttl_s() -> float:
    """The short TTL: these tests wait for the sweeper to remove what a failed saga left."""
    return TTL_S


class StopServerAt:
    """Stops the gateway's own server when the saga reaches `point`, cutting the RPC off."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.server: grpc.aio.Server | None = None
        self.stopping: asyncio.Task[None] | None = None

    async def hit(self, point: str) -> None:
        """At the point: stop the server (aborting this very call) and never return."""
        if point != self.point:
            return
        assert self.server is not None
        self.stopping = asyncio.create_task(self.server.stop(None))
        await asyncio.Event().wait()


class RaiseAt:
    """Fails the saga with an unexpected error at `point` (the process lives on)."""

    def __init__(self, point: str) -> None:
        self.point = point

    async def hit(self, point: str) -> None:
        """At the point: raise."""
        if point == self.point:
            raise RuntimeError(f"injected fault at {point}")


async def fork_as_told(stack: Stack, source: str, request_id: str) -> agent_pb2.ForkResponse:
    """Fork, sent again with the same request_id while it answers DEADLINE_EXCEEDED, as its
    message tells a client to (the module's short provisioning TTL gives a saga 2 s, which a
    loaded CI machine ran out of once)."""
    for _ in range(3):
        try:
            reply: agent_pb2.ForkResponse = await stack.gw.Fork(
                fork_request(stack, source, request_id)
            )
            return reply
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
            assert "retry with the same request_id" in (error.details() or "")
    last: agent_pb2.ForkResponse = await stack.gw.Fork(fork_request(stack, source, request_id))
    return last


async def check_aftermath(
    stack: Stack, pool: asyncpg.Pool, source: str, point: str, request_id: str
) -> None:
    """After a saga died at `point`: invisible, swept, then one complete session on retry."""
    leftovers = await provisional_ids(pool, stack.space)
    if point == "fork.after_commit":
        assert leftovers == []
        [child] = await children_of(stack, source)
        await assert_complete(stack, child)
    else:
        assert len(leftovers) == 1, leftovers
        await assert_invisible(stack, leftovers[0], source)
        assert await wait_until_gone(pool, stack.space, leftovers, SWEEP_WITHIN_S) == 0
        assert await children_of(stack, source) == []
    reply = await fork_as_told(stack, source, request_id)
    again = await stack.gw.Fork(fork_request(stack, source, request_id))
    assert again.session.id == reply.session.id
    assert await children_of(stack, source) == [reply.session.id]
    await assert_complete(stack, reply.session.id)


class TestInProcessFaults:
    """The saga cut off inside a running gateway process."""

    @pytest.mark.parametrize("point", FAULT_POINTS)
    async def test_server_stopped_at_point(
        self,
        point: str,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        pool: asyncpg.Pool,
    ) -> None:
        """A server stopped at each point leaves nothing visible, and the sweeper cleans up."""
        faults = StopServerAt(point)
        dying = await start_gateway(faults=faults)
        faults.server = dying.server
        healthy = await start_gateway()
        stack = await open_stack(backends, healthy, space, summarizer)
        try:
            source = await seeded_source(stack)
            async with dying.channel(space.key) as channel:
                stub = agent_pb2_grpc.AgentGatewayStub(channel)
                error = await rpc_error(stub.Fork(fork_request(stack, source, f"r-{point}")))
            assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
            assert faults.stopping is not None
            await faults.stopping
            await check_aftermath(stack, pool, source, point, f"r-{point}")
        finally:
            await close_stack(stack)

    @pytest.mark.parametrize("point", FAULT_POINTS)
    async def test_saga_error_at_point(
        self,
        point: str,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        pool: asyncpg.Pool,
    ) -> None:
        """A saga failing at each point shows no half-made session; a retry finishes one session."""
        gateway = await start_gateway(faults=RaiseAt(point))
        healthy = await start_gateway()
        failing = await open_stack(backends, gateway, space, summarizer)
        stack = await open_stack(backends, healthy, space, summarizer)
        try:
            source = await seeded_source(stack)
            error = await rpc_error(failing.gw.Fork(fork_request(stack, source, "rid")))
            assert error.code() is grpc.StatusCode.INTERNAL
            assert "injected fault" not in (error.details() or "")
            leftovers = await provisional_ids(pool, space)
            if point != "fork.after_commit":
                await assert_invisible(stack, leftovers[0], source)
            # Retried at once, within the TTL: the same provisional session is finished.
            reply = await stack.gw.Fork(fork_request(stack, source, "rid"))
            assert leftovers in ([], [reply.session.id])
            assert await children_of(stack, source) == [reply.session.id]
            await assert_complete(stack, reply.session.id)
        finally:
            await close_stack(failing)
            await close_stack(stack)


class OnceAt:
    """Runs `action` (with the provisional session's id) the first time the saga reaches
    `point`."""

    def __init__(self, point: str, action: Callable[[], Awaitable[Any]]) -> None:
        self.point, self.action = point, action
        self.done: Any = None

    async def hit(self, point: str) -> None:
        """At the point, once: run the action."""
        if point == self.point and self.done is None:
            self.done = await self.action()


class TestRacingDelete:
    """What the saga says when its provisional session is gone before the commit."""

    async def test_a_fork_whose_source_is_deleted_meanwhile_logs_no_warning(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        pool: asyncpg.Pool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A Fork whose parent is deleted between its provisional session and the commit
        answers NOT_FOUND; the delete's reply lists the provisional session among the erased
        ids (it was erased with the subtree, as agent.proto says), and the gateway logs at INFO
        that it went with the deleted session, no WARNING (explore4 F6c: "is gone (swept
        before a retry); trying again", when nothing was swept)."""
        healthy = await start_gateway()
        stack = await open_stack(backends, healthy, space, summarizer)
        source = await seeded_source(stack)

        async def delete() -> Any:
            return await stack.gw.DeleteSession(
                agent_pb2.DeleteSessionRequest(space_id=space.sid, session_id=source)
            )

        faults = OnceAt("fork.after_create", delete)
        racing = await open_stack(backends, await start_gateway(faults=faults), space, summarizer)
        try:
            with caplog.at_level(logging.INFO, logger="agent_gateway"):
                error = await rpc_error(racing.gw.Fork(fork_request(stack, source, "r-race")))
            assert error.code() is grpc.StatusCode.NOT_FOUND
            [provisional] = [i for i in faults.done.deleted_ids if i != source]
            assert faults.done.deleted_ids[0] == source
            said = [r for r in caplog.records if provisional in r.getMessage()]
            assert [r.levelno for r in said] == [logging.INFO]
            assert "went with a session deleted meanwhile" in said[0].getMessage()
            warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert warnings == []
        finally:
            await close_stack(racing)
            await close_stack(stack)

    async def test_a_swept_provisional_session_is_a_warning(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        pool: asyncpg.Pool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A provisional session swept before its saga filled it (the saga ran past the TTL)
        is still a WARNING naming the setting, and the Fork ends on a new session."""
        healthy = await start_gateway()
        stack = await open_stack(backends, healthy, space, summarizer)
        source = await seeded_source(stack)

        async def sweep() -> Any:  # this space's: other tests' provisional sessions stay
            return await TreeRepository(pool).sweeps.sweep(
                0.001, 1000, wait=True, space_id=space.id
            )

        faults = OnceAt("fork.after_create", sweep)
        racing = await open_stack(backends, await start_gateway(faults=faults), space, summarizer)
        try:
            with caplog.at_level(logging.INFO, logger="agent_gateway"):
                reply = await racing.gw.Fork(fork_request(stack, source, "r-swept"))
            [swept] = [s.id for s in faults.done]
            warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warned) == 1
            assert str(swept) in warned[0].getMessage()
            assert "STELLO_TREE_PROVISIONING_TTL_S" in warned[0].getMessage()
            assert reply.session.id in warned[0].getMessage()
            await assert_complete(stack, reply.session.id)
        finally:
            await close_stack(racing)
            await close_stack(stack)


class TestProcessExits:
    """The gateway process dies (exit 137) at each point of the saga."""

    @pytest.mark.parametrize("point", FAULT_POINTS)
    async def test_process_exit_at_point(
        self,
        point: str,
        stack: Stack,
        backends: Backends,
        database_env: dict[str, str],
        pool: asyncpg.Pool,
    ) -> None:
        """A gateway that dies at each point leaves nothing visible; the sweeper cleans up."""
        source = await seeded_source(stack)
        async with gateway_process(backends, database_env, f"{point}:exit") as (process, address):
            async with grpc.aio.insecure_channel(address) as channel:
                stub = agent_pb2_grpc.AgentGatewayStub(channel)
                error = await rpc_error(
                    stub.Fork(
                        fork_request(stack, source, f"p-{point}"), metadata=stack.space.metadata
                    )
                )
            assert error.code() is grpc.StatusCode.UNAVAILABLE
            assert await process.wait() == EXIT_CODE
        await check_aftermath(stack, pool, source, point, f"p-{point}")


async def test_gateway_process_serves(
    stack: Stack, backends: Backends, database_env: dict[str, str]
) -> None:
    """`python -m agent_gateway` answers reads like the in-process gateway."""
    source = await seeded_source(stack)
    async with gateway_process(backends, database_env, "fork.after_commit:exit") as (_, address):
        async with grpc.aio.insecure_channel(address) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            reply = await stub.GetTree(
                agent_pb2.GetTreeRequest(space_id=stack.space.sid), metadata=stack.space.metadata
            )
    assert [n.id for n in reply.nodes] == [source]
