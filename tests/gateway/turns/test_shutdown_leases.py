"""A gateway stopped gracefully (SIGTERM: `shutdown`) while turns run gives their sessions back
at once: each turn's lease is released before `shutdown` returns, not left to expire with its
TTL (a session TURN_IN_PROGRESS for up to 10 s after a rolling restart). A guard: it held
when written (a review asked whether grpc's `server.stop` returned before the cancelled
handlers had given their leases back)."""

from __future__ import annotations

import asyncio
from functools import partial

import asyncpg
import pytest

from agent_gateway.app import create_app as gateway_app
from stello.agent.v1 import agent_pb2_grpc
from stello.channels import open_channel
from stello.serving.server import shutdown
from storage_service.app import create_app as storage_app
from tests.gateway.outage_support import held_leases
from tests.gateway.turns.test_lease_outage import (
    SESSIONS,
    gateway_config,
    roots,
    turns_stuck_in_the_model,
)
from tests.gateway.turns_support import SpyProvider
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tree_service.app import create_app as tree_app

pytestmark = pytest.mark.sql


@pytest.fixture(name="tree")
async def _tree(start_server: ServerStarter) -> RunningServer:
    return await start_server(tree_app)


async def test_a_gateway_stopped_mid_turn_releases_its_leases(
    start_server: ServerStarter, tree: RunningServer, pool: asyncpg.Pool, space: TestSpace
) -> None:
    """Four turns wait for the model when the gateway shuts down (no grace): once `shutdown`
    returns, no session's lease is held."""
    storage = await start_server(storage_app)
    spy = SpyProvider(gate=asyncio.Event())
    config = gateway_config(storage.address, tree.address)
    gateway = await start_server(partial(gateway_app, config=config, provider=spy))
    async with open_channel(gateway.address, key=space.key) as channel:
        gw = agent_pb2_grpc.AgentGatewayStub(channel)
        ids = await roots(gw, space, SESSIONS)
        sends = await turns_stuck_in_the_model(gw, space, ids, spy)
        assert await held_leases(pool, space.id, ids) == set(ids)
        await shutdown(gateway.app, gateway.server, 0)
        assert await held_leases(pool, space.id, ids) == set()
        await asyncio.gather(*sends, return_exceptions=True)
