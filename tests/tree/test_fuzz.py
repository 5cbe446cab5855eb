"""Hostile requests to every SessionTree RPC (DESIGN §10): only documented codes, never
UNKNOWN or INTERNAL, no traceback logged, and nothing changed by a failed call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stello.tree.v1 import tree_pb2
from tests.support import fuzz
from tests.support.fixtures import RunningServer, TestSpace
from tests.support.rows import space_rows
from tests.tree.conftest import TreeClient, erased

pytestmark = pytest.mark.sql

SERVICE = tree_pb2.DESCRIPTOR.services_by_name["SessionTree"]
RPCS = fuzz.rpcs(SERVICE, "stello/tree/v1/tree.proto")


@pytest.fixture(name="targets")
async def _targets(tree: TreeClient, space: TestSpace) -> fuzz.Targets:
    root = await tree.create(label="root")
    child = await tree.child(root.id, label="child")
    return fuzz.Targets(space.sid, [root.id, child.id])


@pytest.fixture(name="channel")
async def _channel(tree_server: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with tree_server.channel() as channel:
        yield channel


@pytest.mark.parametrize("rpc", RPCS, ids=[r.name for r in RPCS])
@settings(
    max_examples=fuzz.EXAMPLES,
    deadline=None,
    derandomize=fuzz.DERANDOMIZE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_hostile_requests(
    rpc: fuzz.Rpc,
    data: st.DataObject,
    channel: grpc.aio.Channel,
    space: TestSpace,
    targets: fuzz.Targets,
    pool: asyncpg.Pool,
) -> None:
    """Every answer is a documented code with no internals; a failed call changes no row."""
    request = data.draw(fuzz.request_bytes(rpc, targets))
    before = await space_rows(pool, space.id)
    with fuzz.LogWatch() as logs:
        outcome = await fuzz.call(channel, rpc, request, space.metadata)
    fuzz.check(rpc, outcome)
    assert logs.bad == [], [r.getMessage() for r in logs.bad]
    if outcome.code is not grpc.StatusCode.OK:
        assert await space_rows(pool, space.id) == before, f"{rpc.name} failed but wrote"
    else:
        await erased(pool)  # no background erasure runs into the next example's rows
