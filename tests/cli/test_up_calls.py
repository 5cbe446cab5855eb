"""`stello up`'s servers (`start_servers`): the gateway calls storage and tree in-process
by default, over loopback gRPC with ``--network-calls``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.server import ServiceApp, shutdown
from stello.settings import StelloSettings
from stello_cli.up import Ports, start_servers
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

Running = list[tuple[ServiceApp, grpc.aio.Server]]
Start = Callable[[bool], Awaitable[tuple[Running, agent_pb2_grpc.AgentGatewayStub]]]


@pytest.fixture(name="start")
async def _start(
    settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore, space: TestSpace
) -> AsyncIterator[Start]:
    """Start the three servers as `stello up` does; a gateway stub as `space`."""
    runs: list[Running] = []
    channels: list[grpc.aio.Channel] = []

    async def start(local_calls: bool) -> tuple[Running, agent_pb2_grpc.AgentGatewayStub]:
        running: Running = []
        runs.append(running)
        ports = Ports(storage=0, tree=0, gateway=0, console=None)
        addresses = await start_servers(
            settings, ports, pool, keys, running, local_calls=local_calls
        )
        channel = open_channel(addresses["gateway"], key=space.key)
        channels.append(channel)
        return running, agent_pb2_grpc.AgentGatewayStub(channel)

    yield start
    for channel in channels:
        await channel.close()
    for running in runs:
        for app, server in reversed(running):
            await shutdown(app, server, 0)


async def close_backend_ports(running: Running) -> None:
    """Stop storage's and tree's gRPC servers (their ports), leaving their handlers."""
    for app, server in running:
        if app.name in ("storage", "tree"):
            await server.stop(0)


class TestUpCalls:
    async def test_the_gateway_calls_in_process(self, start: Start, space: TestSpace) -> None:
        """With the backends' ports closed the gateway still forks and reads: its calls
        never used them; the backends' own metrics counted the calls."""
        running, gateway = await start(True)
        root = await gateway.CreateRoot(
            agent_pb2.CreateRootRequest(space_id=space.sid, label="Root", system_prompt="p")
        )
        await close_backend_ports(running)
        child = await gateway.Fork(
            agent_pb2.ForkRequest(space_id=space.sid, source_session_id=root.session.id, label="c")
        )
        view = await gateway.GetSession(
            agent_pb2.GetSessionRequest(space_id=space.sid, session_id=child.session.id)
        )
        assert view.session.node.parent_id == root.session.id
        assert view.session.system_prompt == "p"
        storage = next(app for app, _ in running if app.name == "storage")
        assert storage.metrics is not None
        assert storage.metrics.method("/stello.storage.v1.SessionStorage/GetSession").by_code == {
            grpc.StatusCode.OK: 1
        }

    async def test_network_calls_need_the_ports(self, start: Start, space: TestSpace) -> None:
        """With ``--network-calls`` the same read needs storage's port: closed, UNAVAILABLE
        naming the hop."""
        running, gateway = await start(False)
        root = await gateway.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid, label="R"))
        await close_backend_ports(running)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GetSession(
                agent_pb2.GetSessionRequest(space_id=space.sid, session_id=root.session.id),
                timeout=10,
            )
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
