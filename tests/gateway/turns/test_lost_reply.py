"""A reply lost on the way back: the work was done, the gateway saw UNAVAILABLE.

The gateway's channel to a real service carries an interceptor that lets a
call reach the server and finish there, then reports UNAVAILABLE instead of
its reply (what a connection dropped after the commit looks like). The
gateway's bounded retry then sends the call again. Idempotency must turn that
retry into the first call's answer: one turn, one session, nothing twice. And
a turn is never reported unwritten when it may have been stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.app import GatewayClients
from agent_gateway.clients import StorageClient, TreeClient
from agent_gateway.clients.rpc import CallPolicy
from stello.agent.v1 import agent_pb2
from stello.errors import error_info_reason
from tests.gateway.conftest import Backends, StackMaker, row_counts, rpc_error
from tests.gateway.probes import assert_complete, children_of, fork_request, seeded_source
from tests.gateway.turns_support import SpyProvider, roles, send

pytestmark = pytest.mark.sql

POLICY = CallPolicy(timeout_s=5.0, max_retries=3, backoff_s=0.01)


class LoseReplies(grpc.aio.UnaryUnaryClientInterceptor):
    """Lets the next `times` calls of `method` complete on the server, then drops their answer
    (a reply or an error status alike)."""

    def __init__(self) -> None:
        self.method = ""
        self.times = 0
        self.lost: list[str] = []
        self.meanwhile: Callable[[], Awaitable[None]] | None = None

    def arm(
        self,
        method: str,
        times: int = 1,
        meanwhile: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Lose the replies of the next `times` calls of `method` (e.g. "Transact"), running
        `meanwhile` (once) after the first was lost, before the caller hears of it."""
        self.method, self.times, self.meanwhile = method, times, meanwhile

    async def intercept_unary_unary(
        self,
        continuation: Callable[[Any, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        call = await continuation(client_call_details, request)
        method = client_call_details.method
        name = method.decode() if isinstance(method, bytes) else str(method)
        if self.times and name.rpartition("/")[2] == self.method:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await call  # the server did the work and answered; the answer goes nowhere
            self.times -= 1
            self.lost.append(name)
            meanwhile, self.meanwhile = self.meanwhile, None
            if meanwhile is not None:
                await meanwhile()
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="connection dropped after the call (test)",
            )
        return call


@pytest.fixture(name="losing")
async def _losing(backends: Backends) -> AsyncIterator[tuple[LoseReplies, GatewayClients]]:
    """Gateway clients whose channels to storage and tree pass through one LoseReplies."""
    lose = LoseReplies()
    storage = grpc.aio.insecure_channel(backends.storage.address, interceptors=[lose])
    tree = grpc.aio.insecure_channel(backends.tree.address, interceptors=[lose])
    yield lose, GatewayClients(StorageClient(storage, POLICY), TreeClient(tree, POLICY))
    await storage.close()
    await tree.close()


class TestLostTurnCommit:
    """The turn's one Transact committed, its reply was lost, the gateway retried it."""

    async def test_with_request_id_the_turn_is_answered_once(
        self, make_stack: StackMaker, losing: tuple[LoseReplies, GatewayClients]
    ) -> None:
        """The retried commit meets the released lease; the remembered reply answers the
        Send. One user and one assistant record; a client retry answers the same."""
        lose, clients = losing
        spy = SpyProvider()
        stack = await make_stack(spy, clients=clients)
        root = await stack.root()
        lose.arm("Transact")
        reply = await send(stack, root.id, "hello", request_id="t-1")
        assert lose.lost == ["/stello.storage.v1.SessionStorage/Transact"]
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant"]
        assert [r.seq for r in reply.records] == [r.seq for r in stored]
        assert reply.assistant.content == stored[1].content
        again = await send(stack, root.id, "hello", request_id="t-1")
        assert again == reply
        assert len(spy.turns) == 1
        view = await stack.view(root.id)
        assert view.turn_count == 1

    async def test_without_request_id_the_turn_is_answered_once(
        self, make_stack: StackMaker, losing: tuple[LoseReplies, GatewayClients]
    ) -> None:
        """Without a request_id the retried commit proves the first one stored the turn (the
        lease token it released): the Send answers that turn, stored exactly once."""
        lose, clients = losing
        spy = SpyProvider()
        stack = await make_stack(spy, clients=clients)
        root = await stack.root()
        lose.arm("Transact")
        reply = await send(stack, root.id, "hello")
        assert lose.lost == ["/stello.storage.v1.SessionStorage/Transact"]
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant"]
        assert list(reply.records) == stored
        assert len(spy.turns) == 1
        assert (await stack.view(root.id)).turn_count == 1
        await send(stack, root.id, "next")  # the lease was given back with the commit
        assert roles(await stack.records(root.id)) == ["user", "assistant"] * 2

    async def test_every_answer_lost_may_have_been_stored(
        self, make_stack: StackMaker, losing: tuple[LoseReplies, GatewayClients]
    ) -> None:
        """When no attempt of the commit is answered, the client is told the turn may have
        been stored (UNAVAILABLE OUTCOME_UNKNOWN), never that nothing was written; it was
        stored once, and a retry with the request_id answers it."""
        lose, clients = losing
        spy = SpyProvider()
        stack = await make_stack(spy, clients=clients)
        root = await stack.root()
        lose.arm("Transact", times=POLICY.max_retries + 1)
        error = await rpc_error(send(stack, root.id, "hello", request_id="lost-all"))
        assert len(lose.lost) == POLICY.max_retries + 1
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert error_info_reason(error) == "OUTCOME_UNKNOWN"
        assert "may have been stored" in (error.details() or "")
        stored = await stack.records(root.id)
        assert roles(stored) == ["user", "assistant"]
        again = await send(stack, root.id, "hello", request_id="lost-all")
        assert list(again.records) == stored
        assert len(spy.turns) == 1

    async def test_another_turn_between_may_have_been_stored(
        self, make_stack: StackMaker, losing: tuple[LoseReplies, GatewayClients]
    ) -> None:
        """A commit whose answer was lost, and another turn that took and committed the lease
        before the retry came: nothing can tell whether the first was stored, so its client
        is told it may have been (UNAVAILABLE OUTCOME_UNKNOWN), not ABORTED."""
        lose, clients = losing
        stack = await make_stack(SpyProvider(), clients=clients)
        root = await stack.root()
        other: list[agent_pb2.SendResponse] = []

        async def another_turn() -> None:
            other.append(await send(stack, root.id, "second"))

        lose.arm("Transact", meanwhile=another_turn)
        error = await rpc_error(send(stack, root.id, "first"))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert error_info_reason(error) == "OUTCOME_UNKNOWN"
        assert len(other) == 1
        contents = [r.content for r in await stack.records(root.id)]
        assert contents == ["first", "echo: first", "second", "echo: second"]


class TestLostSagaReplies:
    """A reply of each write of the Fork saga lost: the retried call answers the first one's
    result, and the Fork ends with one complete session."""

    @pytest.mark.parametrize("method", ["CreateSession", "Transact", "CommitSession"])
    async def test_fork_survives_a_lost_reply(
        self,
        method: str,
        make_stack: StackMaker,
        losing: tuple[LoseReplies, GatewayClients],
        pool: asyncpg.Pool,
    ) -> None:
        """One lost reply of `method` mid-saga: one child, complete, no leftover row."""
        lose, clients = losing
        stack = await make_stack(clients=clients)
        source = await seeded_source(stack)
        before = await row_counts(pool, stack.space)
        lose.arm(method)
        reply = await stack.gw.Fork(fork_request(stack, source, ""))
        assert [name.rpartition("/")[2] for name in lose.lost] == [method]
        assert await children_of(stack, source) == [reply.session.id]
        await assert_complete(stack, reply.session.id)
        after = await row_counts(pool, stack.space)
        assert after["sessions"] == before["sessions"] + 1  # no second, provisional session
