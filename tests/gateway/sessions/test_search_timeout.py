"""The gateway's searches answer storage's own bound (FAILED_PRECONDITION SEARCH_TOO_BROAD past
STELLO_STORAGE_SEARCH_TIMEOUT_S, agent.proto SearchRecords), not the gateway's per-call cap."""

from __future__ import annotations

from functools import partial

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.errors import error_info_reason
from stello.reasons import SEARCH_TOO_BROAD
from storage_service.app import create_app as storage_app
from storage_service.config import StorageSettings
from tests.gateway.conftest import GatewayStarter, rpc_error
from tests.support.fixtures import ServerStarter, TestSpace

pytestmark = pytest.mark.sql


@pytest.mark.parametrize("rpc", ["SearchRecords", "SearchSessions"])
async def test_a_search_past_storages_bound_is_search_too_broad(
    start_gateway: GatewayStarter,
    start_server: ServerStarter,
    pool: asyncpg.Pool,
    space: TestSpace,
    rpc: str,
) -> None:
    """A search that runs to storage's bound (a read held up by a lock on the table stands
    for one that reads too much) answers SEARCH_TOO_BROAD, telling the client to narrow it,
    though the bound is past the gateway's per-call cap. It answered DEADLINE_EXCEEDED
    "SessionStorage.SearchRecords: did not answer within the deadline" (at the defaults, both
    10 s, the cap fired first), which a client retries as it is."""
    storage = await start_server(partial(storage_app, config=StorageSettings(search_timeout_s=1.0)))
    gateway = await start_gateway(storage_address=storage.address, call_timeout_s=0.25)
    table = "records" if rpc == "SearchRecords" else "sessions"
    request = (
        agent_pb2.SearchRecordsRequest(space_id=space.sid, query="zanzibar")
        if rpc == "SearchRecords"
        else agent_pb2.SearchSessionsRequest(space_id=space.sid, query="zanzibar")
    )
    async with gateway.channel(space.key) as channel:
        call = getattr(agent_pb2_grpc.AgentGatewayStub(channel), rpc)
        async with pool.acquire() as holder, holder.transaction():
            await holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            error = await rpc_error(call(request))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error.details()
        assert error_info_reason(error) == SEARCH_TOO_BROAD
        await call(request)  # the lock gone, the same search is answered
