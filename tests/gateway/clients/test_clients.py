"""The typed clients: key and request id forwarded, deadlines propagated, bounded retries.

The transport behaviour (what metadata and deadline arrive, how UNAVAILABLE is
retried) is observed on a small scripted SessionTree server: the real services
cannot be told to fail on demand. Everything else runs against the real ones.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from agent_gateway.clients import Caller, CallPolicy, TreeClient
from agent_gateway.clients.rpc import both
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.errors import DeadlineExceeded, NotFound, PermissionDenied, Unavailable
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from stello_cli.admin.reconcile import reconcile
from tests.gateway.conftest import Backends
from tests.support.fixtures import TestSpace

SPACE = uuid.uuid4()
SESSION = uuid.uuid4()


@dataclass(slots=True)
class ScriptedTree(tree_pb2_grpc.SessionTreeServicer):
    """Answers GetNode and DeleteSubtree with the scripted failures first, then OK."""

    failures: list[grpc.StatusCode] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def _answer(self, context: Any) -> None:
        self.seen.append(
            {"metadata": dict(context.invocation_metadata()), "remaining": context.time_remaining()}
        )
        if self.failures:
            await context.abort(self.failures.pop(0), "scripted failure")

    async def GetNode(self, request: Any, context: Any) -> tree_pb2.GetNodeResponse:
        """Record the call; fail as scripted, else answer a node."""
        await self._answer(context)
        return tree_pb2.GetNodeResponse(node=common_pb2.TopologyNode(id=request.session_id))

    async def DeleteSubtree(self, request: Any, context: Any) -> tree_pb2.DeleteSubtreeResponse:
        """Record the call; fail as scripted, else answer the id."""
        await self._answer(context)
        return tree_pb2.DeleteSubtreeResponse(deleted_ids=[request.session_id])


@pytest.fixture(name="scripted")
async def _scripted() -> AsyncIterator[tuple[ScriptedTree, TreeClient]]:
    servicer = ScriptedTree()
    server = grpc.aio.server()
    tree_pb2_grpc.add_SessionTreeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}")
    policy = CallPolicy(timeout_s=5.0, max_retries=2, backoff_s=0.01)
    yield servicer, TreeClient(channel, policy)
    await channel.close()
    await server.stop(None)


class TestForwarding:
    """What every internal call carries."""

    async def test_key_request_id_and_deadline(
        self, scripted: tuple[ScriptedTree, TreeClient]
    ) -> None:
        """The caller's key, request id and remaining deadline travel with the call."""
        servicer, client = scripted
        caller = Caller("secret-key", time.monotonic() + 2.0, "req-1")
        await client.get_node_with_config(caller, SPACE, SESSION)
        [call] = servicer.seen
        assert call["metadata"]["authorization"] == "Bearer secret-key"
        assert call["metadata"]["x-request-id"] == "req-1"
        assert 1.0 < call["remaining"] < 2.1  # gRPC rounds deadlines up a little

    async def test_timeout_capped(self, scripted: tuple[ScriptedTree, TreeClient]) -> None:
        """Without a caller deadline each call still gets the per-call timeout."""
        servicer, client = scripted
        await client.get_node_with_config(Caller("k"), SPACE, SESSION)
        assert 4.0 < servicer.seen[0]["remaining"] < 5.1

    async def test_deadline_passed(self, scripted: tuple[ScriptedTree, TreeClient]) -> None:
        """A caller whose deadline has passed gets DEADLINE_EXCEEDED and no call is made."""
        servicer, client = scripted
        with pytest.raises(DeadlineExceeded, match="GetNode"):
            await client.get_node_with_config(Caller("k", time.monotonic() - 1), SPACE, SESSION)
        assert servicer.seen == []


class TestRetries:
    """UNAVAILABLE is retried a bounded number of times; other errors are mapped at once."""

    async def test_unavailable_retried(self, scripted: tuple[ScriptedTree, TreeClient]) -> None:
        """Two UNAVAILABLE answers then OK: the call succeeds after three attempts."""
        servicer, client = scripted
        servicer.failures = [grpc.StatusCode.UNAVAILABLE] * 2
        node, _, _ = await client.get_node_with_config(Caller("k"), SPACE, SESSION)
        assert node.id == str(SESSION)
        assert len(servicer.seen) == 3
        assert client.calls["GetNode"] == 3

    async def test_retries_bounded(self, scripted: tuple[ScriptedTree, TreeClient]) -> None:
        """UNAVAILABLE beyond max_retries surfaces as Unavailable."""
        servicer, client = scripted
        servicer.failures = [grpc.StatusCode.UNAVAILABLE] * 5
        with pytest.raises(Unavailable):
            await client.get_node_with_config(Caller("k"), SPACE, SESSION)
        assert len(servicer.seen) == 3

    async def test_other_errors_mapped_without_retry(
        self, scripted: tuple[ScriptedTree, TreeClient]
    ) -> None:
        """NOT_FOUND is not retried and comes back as the domain NotFound."""
        servicer, client = scripted
        servicer.failures = [grpc.StatusCode.NOT_FOUND]
        with pytest.raises(NotFound, match="scripted"):
            await client.get_node_with_config(Caller("k"), SPACE, SESSION)
        assert len(servicer.seen) == 1

    async def test_delete_not_retried(self, scripted: tuple[ScriptedTree, TreeClient]) -> None:
        """DeleteSubtree (not idempotent) is never retried."""
        servicer, client = scripted
        servicer.failures = [grpc.StatusCode.UNAVAILABLE]
        with pytest.raises(Unavailable):
            await client.delete_subtree(Caller("k"), SPACE, SESSION)
        assert len(servicer.seen) == 1

    async def test_nothing_listening(self) -> None:
        """A service that is down answers Unavailable after the bounded retries."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with open_channel(f"127.0.0.1:{port}") as channel:
            client = TreeClient(channel, CallPolicy(timeout_s=2.0, max_retries=2, backoff_s=0.01))
            with pytest.raises(Unavailable):
                await client.get_node_with_config(Caller("k"), SPACE, SESSION)
        assert client.calls["GetNode"] == 3


@pytest.mark.sql
class TestReconcile:
    """`stello reconcile` = SweepProvisional with an admin key."""

    async def test_sweeps_old_provisional_sessions(
        self, backends: Backends, space: TestSpace, admin_key: str
    ) -> None:
        """Reconcile lists (dry run) then removes provisional sessions; committed ones stay."""
        async with backends.tree.channel(space.key) as channel:
            tree = tree_pb2_grpc.SessionTreeStub(channel)
            kept = await tree.CreateSession(tree_pb2.CreateSessionRequest(space_id=space.sid))
            stale = await tree.CreateSession(
                tree_pb2.CreateSessionRequest(space_id=space.sid, provisional=True)
            )
        await asyncio.sleep(1.1)
        listed = await reconcile(backends.tree.address, admin_key, older_than_s=1, dry_run=True)
        assert stale.node.id in listed
        assert kept.node.id not in listed
        removed = await reconcile(backends.tree.address, admin_key, older_than_s=1)
        assert stale.node.id in removed
        assert stale.node.id not in await reconcile(backends.tree.address, admin_key, 1, True)

    async def test_tenant_key_refused(self, backends: Backends, space: TestSpace) -> None:
        """A tenant key may not reconcile (PERMISSION_DENIED)."""
        with pytest.raises(PermissionDenied):
            await reconcile(backends.tree.address, space.key)


class TestBoth:
    """`both`: two calls in parallel, gather's outcome for two."""

    async def test_results_in_order_run_in_parallel(self) -> None:
        """Each result in its place; the two run at once (each waits for the other)."""
        first_started, second_started = asyncio.Event(), asyncio.Event()

        async def first() -> str:
            first_started.set()
            await second_started.wait()
            return "first"

        async def second() -> int:
            second_started.set()
            await first_started.wait()
            return 2

        assert await asyncio.wait_for(both(first(), second()), 5) == ("first", 2)

    async def test_a_failure_of_either_is_raised(self) -> None:
        """The first's failure after the second answered, or the second's."""

        async def fails() -> None:
            raise NotFound("session x not found")

        async def answers() -> int:
            return 1

        with pytest.raises(NotFound):
            await both(fails(), answers())
        with pytest.raises(NotFound):
            await both(answers(), fails())

    async def test_the_second_failing_cancels_the_first(self) -> None:
        """A read nobody will use is cancelled, and nothing is left running."""
        forever = asyncio.Event()
        cancelled = asyncio.Event()

        async def waits() -> None:
            try:
                await forever.wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async def fails() -> None:
            await asyncio.sleep(0)
            raise NotFound("session x not found")

        with pytest.raises(NotFound):
            await both(waits(), fails())
        await asyncio.wait_for(cancelled.wait(), 5)

    async def test_a_cancelled_caller_cancels_both(self) -> None:
        """Cancelling the waiting caller cancels the call in the task and the one inline."""
        cancelled: list[str] = []
        started = asyncio.Event()

        async def waits(name: str) -> None:
            try:
                started.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        caller = asyncio.ensure_future(both(waits("first"), waits("second")))
        await started.wait()
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert sorted(cancelled) == ["first", "second"]
