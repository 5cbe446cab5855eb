"""The gateway reads only the slots it uses: digests memory and insight, turns the system
prompt and insight through BeginTurn (a listing never carries every long system prompt), and a
turn without compression makes two storage calls (DESIGN §4.3, §9)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from agent_gateway.app import GatewayClients
from agent_gateway.clients import StorageClient, TreeClient
from agent_gateway.clients.rpc import CallPolicy
from stello.agent.v1 import agent_pb2
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Backends, StackMaker
from tests.gateway.turns_support import send

pytestmark = pytest.mark.sql

SYSTEM_PROMPT = storage_pb2.SLOT_KIND_SYSTEM_PROMPT
MEMORY, INSIGHT = storage_pb2.SLOT_KIND_MEMORY, storage_pb2.SLOT_KIND_INSIGHT


class RecordSlotReads(grpc.aio.UnaryUnaryClientInterceptor):
    """Keeps the `slots` of every BatchGetSlots and GetSession request that goes through, and
    the name of every call."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []
        self.methods: list[str] = []

    async def intercept_unary_unary(
        self,
        continuation: Callable[[Any, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        if isinstance(request, storage_pb2.BatchGetSlotsRequest | storage_pb2.GetSessionRequest):
            self.asked.append(list(request.slots))
        method = client_call_details.method
        self.methods.append(
            (method.decode() if isinstance(method, bytes) else method).split("/")[-1]
        )
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
    """ListSessionDigests asks for memory and insight, a turn no slot (BeginTurn answers its
    system prompt and insight, never the memory), GetSession all three with the meta; the
    answers still carry what they did."""
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
    assert record.asked == []
    record.asked.clear()
    view = await stack.view(root.id)
    assert (view.system_prompt, view.memory) == ("a long system prompt", "m")
    assert record.asked == [[SYSTEM_PROMPT, MEMORY, INSIGHT]]


async def test_a_turn_is_two_storage_calls(
    make_stack: StackMaker, recorded: tuple[RecordSlotReads, GatewayClients]
) -> None:
    """A turn without compression is BeginTurn and the commit Transact, whatever the history
    (with a request_id too: BeginTurn answers the remembered reply first)."""
    record, clients = recorded
    stack = await make_stack(clients=clients)
    root = await stack.root(system_prompt="be brief")
    for i in range(3):
        record.methods.clear()
        await send(stack, root.id, f"turn {i}", request_id=f"r{i}")
        assert record.methods == ["BeginTurn", "Transact"]
    record.methods.clear()
    await send(stack, root.id, "turn 2", request_id="r2")  # the stored reply
    assert record.methods == ["BeginTurn"]
