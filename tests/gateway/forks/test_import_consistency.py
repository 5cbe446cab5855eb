"""An ImportSession appears all at once or not at all (DESIGN §4.1), a fault at every point.

The same seam as Fork's (tests/gateway/forks/test_consistency.py): the saga stopped by its
server being cut off, failing with an unexpected error, or its process exiting 137.
Nothing half-made is ever visible, the sweeper removes what is left, and a retry
with the same request_id ends with exactly one complete session.
"""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from agent_gateway.forks.faults import EXIT_CODE, FAULT_POINTS
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from tests.gateway.conftest import (
    TTL_S,
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    close_stack,
    open_stack,
    record,
    rpc_error,
)
from tests.gateway.forks.test_consistency import SWEEP_WITHIN_S, RaiseAt, StopServerAt
from tests.gateway.probes import assert_invisible, provisional_ids, wait_until_gone
from tests.gateway.processes import gateway_process
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


@pytest.fixture(name="provisioning_ttl_s")
def _provisioning_ttl_s() -> float:
    """The short TTL: these tests wait for the sweeper to remove what a failed saga left."""
    return TTL_S


def request(stack: Stack, parent: str, request_id: str) -> agent_pb2.ImportSessionRequest:
    """An import that writes every kind of thing: config, three slots, records, turns."""
    return agent_pb2.ImportSessionRequest(
        space_id=stack.space.sid,
        parent_id=parent,
        label="imported",
        config=common_pb2.SessionConfig(system_prompt="p"),
        system_prompt="p",
        memory="m",
        insight="i",
        records=[record("user", "q"), record("assistant", "a")],
        turn_count=1,
        request_id=request_id,
    )


async def children(stack: Stack, parent: str) -> list[str]:
    """The visible children of `parent`."""
    return list((await stack.view(parent)).node.children)


async def assert_complete(stack: Stack, session_id: str) -> None:
    """Everything `request` asked for is there."""
    view = await stack.view(session_id)
    assert (view.config.system_prompt, view.system_prompt, view.memory, view.insight) == (
        "p",
        "p",
        "m",
        "i",
    )
    assert view.turn_count == 1
    assert [r.content for r in await stack.records(session_id)] == ["q", "a"]


async def aftermath(stack: Stack, pool: asyncpg.Pool, parent: str, point: str, rid: str) -> None:
    """After an import died at `point`: invisible then swept, and a retry makes one session."""
    leftovers = await provisional_ids(pool, stack.space)
    if point == "fork.after_commit":
        assert leftovers == []
        [made] = await children(stack, parent)
        await assert_complete(stack, made)
    else:
        assert len(leftovers) == 1, leftovers
        await assert_invisible(stack, leftovers[0], parent)
        assert await wait_until_gone(pool, stack.space, leftovers, SWEEP_WITHIN_S) == 0
        assert await children(stack, parent) == []
    first = await stack.gw.ImportSession(request(stack, parent, rid))
    again = await stack.gw.ImportSession(request(stack, parent, rid))
    assert again.session.id == first.session.id
    assert await children(stack, parent) == [first.session.id]
    await assert_complete(stack, first.session.id)


@pytest.mark.parametrize("point", FAULT_POINTS)
async def test_server_stopped_at_point(
    point: str,
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
    pool: asyncpg.Pool,
) -> None:
    """A gateway cut off at each point of the import leaves nothing visible; a retry finishes."""
    faults = StopServerAt(point)
    dying = await start_gateway(faults=faults)
    faults.server = dying.server
    stack = await open_stack(backends, await start_gateway(), space, summarizer)
    try:
        parent = (await stack.root(label="parent")).id
        async with dying.channel(space.key) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            error = await rpc_error(stub.ImportSession(request(stack, parent, f"s-{point}")))
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        assert faults.stopping is not None
        await faults.stopping
        await aftermath(stack, pool, parent, point, f"s-{point}")
    finally:
        await close_stack(stack)


@pytest.mark.parametrize("point", FAULT_POINTS)
async def test_saga_error_at_point(
    point: str,
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
    pool: asyncpg.Pool,
) -> None:
    """An import failing at each point shows nothing half-made; a retry at once finishes it."""
    failing = await open_stack(
        backends, await start_gateway(faults=RaiseAt(point)), space, summarizer
    )
    stack = await open_stack(backends, await start_gateway(), space, summarizer)
    try:
        parent = (await stack.root(label="parent")).id
        await rpc_error(failing.gw.ImportSession(request(stack, parent, "rid")))
        leftovers = await provisional_ids(pool, space)
        if point != "fork.after_commit":
            await assert_invisible(stack, leftovers[0], parent)
        reply = await stack.gw.ImportSession(request(stack, parent, "rid"))
        assert leftovers in ([], [reply.session.id])
        assert await children(stack, parent) == [reply.session.id]
        await assert_complete(stack, reply.session.id)
    finally:
        await close_stack(failing)
        await close_stack(stack)


async def test_process_exit_after_storage(
    stack: Stack, backends: Backends, database_env: dict[str, str], pool: asyncpg.Pool
) -> None:
    """A gateway process that dies (137) between storage and commit leaves nothing visible."""
    point = "fork.after_storage"
    parent = (await stack.root(label="parent")).id
    async with gateway_process(backends, database_env, f"{point}:exit") as (process, address):
        async with grpc.aio.insecure_channel(address) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            error = await rpc_error(
                stub.ImportSession(request(stack, parent, "p"), metadata=stack.space.metadata)
            )
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert await process.wait() == EXIT_CODE
    await aftermath(stack, pool, parent, point, "p")
