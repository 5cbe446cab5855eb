"""Hostile requests to every AgentGateway RPC (DESIGN §10), with the echo provider: only
documented codes, never UNKNOWN or INTERNAL, no traceback logged in any of the three
servers, and nothing changed by a failed call."""

from __future__ import annotations

import asyncpg
import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stello.agent.v1 import agent_pb2
from tests.gateway.conftest import Stack
from tests.support import fuzz
from tests.support.rows import space_rows
from tests.tree.conftest import erased

pytestmark = pytest.mark.sql

SERVICE = agent_pb2.DESCRIPTOR.services_by_name["AgentGateway"]
RPCS = fuzz.rpcs(SERVICE, "stello/agent/v1/agent.proto")


@pytest.fixture(name="targets")
async def _targets(stack: Stack) -> fuzz.Targets:
    root = await stack.root(label="root")
    child = await stack.fork(root.id, label="child")
    return fuzz.Targets(stack.space.sid, [root.id, child.id])


@pytest.mark.parametrize("rpc", RPCS, ids=[r.name for r in RPCS])
@settings(
    max_examples=fuzz.EXAMPLES,
    deadline=None,
    derandomize=fuzz.DERANDOMIZE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_hostile_requests(
    rpc: fuzz.Rpc, data: st.DataObject, stack: Stack, targets: fuzz.Targets, pool: asyncpg.Pool
) -> None:
    """Every answer is a documented code with no internals; a failed call changes no row."""
    request = data.draw(fuzz.request_bytes(rpc, targets))
    before = await space_rows(pool, stack.space.id)
    with fuzz.LogWatch() as logs:
        outcome = await fuzz.call(stack.channels[0], rpc, request, stack.space.metadata)
    fuzz.check(rpc, outcome)
    assert logs.bad == [], [r.getMessage() for r in logs.bad]
    if outcome.code is not grpc.StatusCode.OK:
        assert await space_rows(pool, stack.space.id) == before, f"{rpc.name} failed but wrote"
    else:
        await erased(pool)  # no background erasure runs into the next example's rows
