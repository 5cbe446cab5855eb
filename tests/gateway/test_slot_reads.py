"""The gateway reads only the slots it uses: digests memory and insight, turns the system
prompt and insight (a listing never carries every long system prompt)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from agent_gateway.app import GatewayClients
from agent_gateway.clients import StorageClient, TreeClient
from agent_gateway.rpc import CallPolicy
from stello.agent.v1 import agent_pb2
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Backends, StackMaker
from tests.gateway.turns_support import send

pytestmark = pytest.mark.sql

SYSTEM_PROMPT, MEMORY, INSIGHT = (
    storage_pb2.SLOT_KIND_SYSTEM_PROMPT,
    storage_pb2.SLOT_KIND_MEMORY,
    storage_pb2.SLOT_KIND_INSIGHT,
)


class RecordSlotReads(grpc.aio.UnaryUnaryClientInterceptor):
    """Keeps the `slots` of every BatchGetSlots request that goes through."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    async def intercept_unary_unary(
        self,
        continuation: Callable[[Any, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        if isinstance(request, storage_pb2.BatchGetSlotsRequest):
            self.asked.append(list(request.slots))
        return await continuation(client_call_details, request)


@pytest.fixture(name="recorded")
async def _recorded(backends: Backends) -> AsyncIterator[tuple[RecordSlotReads, GatewayClients]]:
    record = RecordSlotReads()
    policy = CallPolicy(timeout_s=5.0)
    storage = grpc.aio.insecure_channel(backends.storage.address, interceptors=[record])
    tree = grpc.aio.insecure_channel(backends.tree.address)
    yield record, GatewayClients(StorageClient(storage, policy), TreeClient(tree, policy))
    await storage.close()
    await tree.close()


async def test_digests_and_turns_read_only_their_slots(
    make_stack: StackMaker, recorded: tuple[RecordSlotReads, GatewayClients]
) -> None:
    """ListSessionDigests asks for memory and insight, a turn for system prompt and insight,
    GetSession for all; the answers still carry what they did."""
    record, clients = recorded
    stack = await make_stack(clients=clients)
    root = await stack.root(system_prompt="a long system prompt")
    await stack.gw.PutMemory(
        agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=root.id, content="m")
    )
    record.asked.clear()
    page = await stack.gw.ListSessionDigests(
        agent_pb2.ListSessionDigestsRequest(space_id=stack.space.sid)
    )
    assert [(d.id, d.memory) for d in page.digests] == [(root.id, "m")]
    assert record.asked == [[MEMORY, INSIGHT]]
    record.asked.clear()
    await send(stack, root.id, "hello")
    assert record.asked == [[SYSTEM_PROMPT, INSIGHT]]
    record.asked.clear()
    view = await stack.view(root.id)
    assert (view.system_prompt, view.memory) == ("a long system prompt", "m")
    assert record.asked == [[]]
