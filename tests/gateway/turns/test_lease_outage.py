"""A short outage never locks a session (issue #13, finding 1; DESIGN §4.2), with real parts:
a gateway process killed mid-turn, a storage process SIGKILLed and started again, and a
PostgreSQL of the test's own stopped and started again.

What each shows is read from the database, not from a clock: a lease released (its token
cleared; an expiry keeps it), a lease reaching no further than one TTL ahead.

Not `sql`-marked: the SQL they run is the storage tests' (which run on every PostgreSQL
pass); the restart test brings its own cluster whatever the pass.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from agent_gateway.tools.base import CREATE_SESSION
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.errors import error_info_reason
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.gateway.outage_support import ServiceProcess, held_leases
from tests.gateway.turns_support import SpyProvider, wait_for
from tests.support.database import create_test_database, restartable_postgres
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace, new_space
from tests.support.ports import free_port
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

SESSIONS = 4
PROVISIONING_TTL_S = 30.0
LEASE = """
SELECT turn_expires_at - now() AS left FROM sessions WHERE space_id = $1 AND id = $2
"""
CHILDREN = "SELECT id FROM sessions WHERE space_id = $1 AND parent_id = $2"
RECORDS = "SELECT count(*) FROM records WHERE space_id = $1 AND session_id = ANY($2::uuid[])"


def send_request(space: TestSpace, session_id: str, content: str, request_id: str) -> Any:
    """A Send with its request_id."""
    return agent_pb2.SendRequest(
        space_id=space.sid, session_id=session_id, content=content, request_id=request_id
    )


async def send_when_free(
    gw: agent_pb2_grpc.AgentGatewayStub, request: Any, *, within_s: float
) -> agent_pb2.SendResponse:
    """Send, retried while the session is TURN_IN_PROGRESS (as the README advises)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        try:
            reply: agent_pb2.SendResponse = await gw.Send(request, timeout=30)
            return reply
        except grpc.aio.AioRpcError as error:
            if error_info_reason(error) != "TURN_IN_PROGRESS":
                raise
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("the session stayed TURN_IN_PROGRESS") from error
        await asyncio.sleep(0.1)


async def roots(gw: agent_pb2_grpc.AgentGatewayStub, space: TestSpace, count: int) -> list[str]:
    """`count` new root sessions."""
    made = [
        await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid, label=f"s{i}"))
        for i in range(count)
    ]
    return [reply.session.id for reply in made]


async def turns_stuck_in_the_model(
    gw: agent_pb2_grpc.AgentGatewayStub, space: TestSpace, ids: list[str], spy: SpyProvider
) -> list[asyncio.Future[Any]]:
    """One Send per session, each holding its lease while the model waits."""
    sends = [
        asyncio.ensure_future(gw.Send(send_request(space, sid, "hello", f"r-{sid}"), timeout=60))
        for sid in ids
    ]
    await wait_for(lambda: len(spy.calls) == len(ids), within_s=20)
    return sends


async def retried_turns(
    gw: agent_pb2_grpc.AgentGatewayStub, space: TestSpace, ids: list[str]
) -> list[agent_pb2.SendResponse]:
    """Each Send again with its own request_id (no pause needed: the sessions are free)."""
    return [await gw.Send(send_request(space, sid, "hello", f"r-{sid}"), timeout=30) for sid in ids]


@pytest.fixture(name="tree")
async def _tree(start_server: ServerStarter) -> RunningServer:
    return await start_server(
        partial(tree_app, config=TreeSettings(provisioning_ttl_s=PROVISIONING_TTL_S))
    )


def gateway_config(storage: str, tree: str, **overrides: Any) -> GatewaySettings:
    """A gateway over these addresses (default lease TTL: 10 s)."""
    values: dict[str, Any] = {
        "storage_address": storage,
        "tree_address": tree,
        "provisioning_ttl_s": PROVISIONING_TTL_S,
        "call_timeout_s": 5.0,
        "retry_backoff_s": 0.01,
    }
    return GatewaySettings(**(values | overrides))


class TestGatewayKilledMidTurn:
    async def test_its_session_is_free_within_the_ttl_and_its_fork_is_not_repeated(
        self,
        start_server: ServerStarter,
        tree: RunningServer,
        database_env: dict[str, str],
        pool: asyncpg.Pool,
        space: TestSpace,
        tmp_path: Path,
    ) -> None:
        """A gateway process whose turn (slow echo model, 2 s lease TTL) forked through the
        built-in tool is SIGKILLed past the TTL: until then its lease was renewed (another turn
        was TURN_IN_PROGRESS), it reaches no further than one TTL ahead, and the Send retried
        with its request_id on another gateway takes the session over and answers the turn
        with that same fork, not a second one."""
        storage = await start_server(storage_app)
        port = free_port()
        env = {
            **database_env,
            "STELLO_AUTH_CACHE_TTL_S": "0",
            "STELLO_LLM_PROVIDER": "echo",
            "STELLO_GATEWAY_PORT": str(port),
            "STELLO_GATEWAY_STORAGE_ADDRESS": storage.address,
            "STELLO_GATEWAY_TREE_ADDRESS": tree.address,
            "STELLO_GATEWAY_PROVISIONING_TTL_S": str(PROVISIONING_TTL_S),
            "STELLO_GATEWAY_TURN_LEASE_TTL_S": "2",
            "STELLO_GATEWAY_ECHO_DELAY_S": "2.5",
        }
        doomed = ServiceProcess("agent_gateway", env, port, tmp_path / "gateway.log")
        other = await start_server(
            partial(
                gateway_app,
                config=gateway_config(storage.address, tree.address, turn_lease_ttl_s=2),
            )
        )
        await doomed.start()
        try:
            async with (
                open_channel(doomed.address, key=space.key) as first,
                open_channel(other.address, key=space.key) as second,
                open_channel(storage.address, key=space.key) as direct,
            ):
                gw = agent_pb2_grpc.AgentGatewayStub(second)
                [root] = await roots(gw, space, 1)
                command = f"/tool {CREATE_SESSION} " + json.dumps({"label": "Kid"})
                request = send_request(space, root, command, "r-kill")
                turn = asyncio.ensure_future(
                    agent_pb2_grpc.AgentGatewayStub(first).Send(request, timeout=60)
                )
                kids = partial(pool.fetch, CHILDREN, space.id, uuid.UUID(root))
                await wait_for(kids, within_s=30)  # the fork is made: the turn is past 2.5 s
                taken = storage_pb2.BeginTurnRequest(space_id=space.sid, session_id=root, ttl_s=30)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await storage_pb2_grpc.SessionStorageStub(direct).BeginTurn(taken)
                assert error_info_reason(refused.value) == "TURN_IN_PROGRESS"
                await doomed.kill()
                left = await pool.fetchval(LEASE, space.id, uuid.UUID(root))
                assert left.total_seconds() <= 2.0
                with pytest.raises(grpc.aio.AioRpcError):
                    await turn
                reply = await send_when_free(gw, request, within_s=30)
        finally:
            await doomed.close()
        [kid] = await kids()
        tool = next(r for r in reply.records if r.role == 4)
        assert json.loads(tool.content)["sessionId"] == str(kid["id"])
        assert reply.assistant.content.startswith("tool results: ")
        assert await held_leases(pool, space.id, [root]) == set()


class TestStorageKilledMidTurn:
    async def test_leases_are_released_once_it_is_back(
        self,
        start_server: ServerStarter,
        tree: RunningServer,
        database_env: dict[str, str],
        pool: asyncpg.Pool,
        space: TestSpace,
        tmp_path: Path,
    ) -> None:
        """Storage is SIGKILLed while four turns wait for the model: their commits fail
        UNAVAILABLE and their leases stay taken; once a new storage process serves the same
        port, the gateway's retried releases free every session (not their expiry, 10 s
        later), and each Send retried with its request_id runs its turn once."""
        port = free_port()
        env = {**database_env, "STELLO_AUTH_CACHE_TTL_S": "0", "STELLO_STORAGE_PORT": str(port)}
        storage = ServiceProcess("storage_service", env, port, tmp_path / "storage.log")
        await storage.start()
        try:
            gate = asyncio.Event()
            spy = SpyProvider(gate=gate)
            config = gateway_config(storage.address, tree.address)
            gateway = await start_server(partial(gateway_app, config=config, provider=spy))
            async with open_channel(gateway.address, key=space.key) as channel:
                gw = agent_pb2_grpc.AgentGatewayStub(channel)
                ids = await roots(gw, space, SESSIONS)
                sends = await turns_stuck_in_the_model(gw, space, ids, spy)
                await storage.kill()
                gate.set()
                failed = await asyncio.gather(*sends, return_exceptions=True)
                assert {e.code() for e in failed if isinstance(e, grpc.aio.AioRpcError)} == {
                    grpc.StatusCode.UNAVAILABLE
                }, failed
                assert await held_leases(pool, space.id, ids) == set(ids)
                await storage.start()
                await wait_for(
                    lambda: _none_held(pool, space.id, ids), within_s=20
                )  # released, not expired: an expired lease keeps its token
                replies = await retried_turns(gw, space, ids)
        finally:
            await storage.close()
        assert [r.assistant.content for r in replies] == ["echo: hello"] * SESSIONS
        assert await pool.fetchval(RECORDS, space.id, [uuid.UUID(s) for s in ids]) == 2 * SESSIONS


async def _none_held(pool: asyncpg.Pool, space_id: uuid.UUID, ids: list[str]) -> bool:
    try:
        return not await held_leases(pool, space_id, ids)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        return False  # a pooled connection PostgreSQL closed while it was down


@asynccontextmanager
async def serving(app: ServiceApp) -> AsyncIterator[str]:
    """`app` on a loopback port for the block; its address."""
    server, port = await create_server(app, "127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await shutdown(app, server, 0)


class TestPostgresRestarted:
    async def test_leases_are_released_once_it_is_back(self) -> None:
        """PostgreSQL (a cluster of this test's own) stops while four turns wait for the model
        and starts again 2 s later: the commits failed UNAVAILABLE, the gateway's retried
        releases free every session once it is back, and each Send retried with its request_id
        runs its turn once."""
        with restartable_postgres() as postgres:
            dsn = await create_test_database(postgres.admin_dsn)
            settings = StelloSettings(
                database_url=dsn, database_direct_url=dsn, auth_cache_ttl_s=0, shutdown_grace_s=1
            )
            async with create_pool(dsn, settings) as pool:
                keys = KeyStore(pool, cache_ttl_s=0)
                space = await new_space(keys)
                tree_config = TreeSettings(provisioning_ttl_s=PROVISIONING_TTL_S)
                gate = asyncio.Event()
                spy = SpyProvider(gate=gate)
                async with (
                    serving(storage_app(settings, pool, keys)) as storage,
                    serving(tree_app(settings, pool, keys, config=tree_config)) as tree,
                ):
                    config = gateway_config(storage, tree)
                    app = gateway_app(settings, pool, keys, config=config, provider=spy)
                    async with (
                        serving(app) as gateway,
                        open_channel(gateway, key=space.key) as channel,
                    ):
                        gw = agent_pb2_grpc.AgentGatewayStub(channel)
                        ids = await roots(gw, space, SESSIONS)
                        sends = await turns_stuck_in_the_model(gw, space, ids, spy)
                        await asyncio.to_thread(postgres.stop)
                        gate.set()
                        failed = await asyncio.gather(*sends, return_exceptions=True)
                        codes = {e.code() for e in failed if isinstance(e, grpc.aio.AioRpcError)}
                        assert codes == {grpc.StatusCode.UNAVAILABLE}, failed
                        await asyncio.sleep(2.0)  # the outage
                        await asyncio.to_thread(postgres.start)
                        await wait_for(lambda: _none_held(pool, space.id, ids), within_s=20)
                        replies = await retried_turns(gw, space, ids)
                contents = [r.assistant.content for r in replies]
                assert contents == ["echo: hello"] * SESSIONS
                records = await pool.fetchval(RECORDS, space.id, [uuid.UUID(s) for s in ids])
                assert records == 2 * SESSIONS
