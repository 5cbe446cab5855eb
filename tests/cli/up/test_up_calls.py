"""`stello up`'s servers (`start_servers`): the gateway calls storage and tree in-process
by default, over loopback gRPC with ``--network-calls``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.serving.server import ServiceApp, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello_cli.up.suite import Ports, start_servers
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

Running = list[tuple[ServiceApp, grpc.aio.Server]]
Started = tuple[Running, agent_pb2_grpc.AgentGatewayStub, dict[str, str]]
Start = Callable[..., Awaitable[Started]]


@pytest.fixture(name="start")
async def _start(
    settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore, space: TestSpace
) -> AsyncIterator[Start]:
    """Start the three servers as `stello up` does; a gateway stub as `space`, and the
    servers' addresses."""
    runs: list[Running] = []
    channels: list[grpc.aio.Channel] = []

    async def start(local_calls: bool, jobs_key: str | None = None) -> Started:
        running: Running = []
        runs.append(running)
        ports = Ports(storage=0, tree=0, gateway=0, console=None)
        addresses = await start_servers(
            settings, ports, pool, keys, running, local_calls=local_calls, jobs_key=jobs_key
        )
        channel = open_channel(addresses["gateway"], key=space.key)
        channels.append(channel)
        return running, agent_pb2_grpc.AgentGatewayStub(channel), addresses

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
        running, gateway, _ = await start(True)
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
        running, gateway, _ = await start(False)
        root = await gateway.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid, label="R"))
        await close_backend_ports(running)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GetSession(
                agent_pb2.GetSessionRequest(space_id=space.sid, session_id=root.session.id),
                timeout=10,
            )
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


CONSOLIDATE = common_pb2.JOB_KIND_CONSOLIDATE


async def leave_stopped_job(
    storage: storage_pb2_grpc.SessionStorageStub, space: TestSpace, session: str
) -> None:
    """The session's consolidation as a gateway stopping mid-run leaves it: STOPPED."""
    claim = await storage.ClaimJob(
        storage_pb2.ClaimJobRequest(
            space_id=space.sid, session_id=session, kind=CONSOLIDATE, ttl_s=600
        )
    )
    assert claim.granted
    stop = storage_pb2.Operation.UpdateJobOp(
        session_id=session,
        kind=CONSOLIDATE,
        token=claim.token,
        release=True,
        status=common_pb2.JOB_STATUS_STOPPED,
    )
    await storage.Transact(
        storage_pb2.TransactRequest(
            space_id=space.sid, operations=[storage_pb2.Operation(update_job=stop)]
        )
    )


async def consolidation(
    gateway: agent_pb2_grpc.AgentGatewayStub, space: TestSpace, session: str
) -> common_pb2.BackgroundJob:
    view = await gateway.GetSession(
        agent_pb2.GetSessionRequest(space_id=space.sid, session_id=session)
    )
    found: common_pb2.BackgroundJob = next(
        j for j in view.session.progress.jobs if j.kind == CONSOLIDATE
    )
    return found


class TestJobsKey:
    @pytest.mark.parametrize("jobs_key", [True, False])
    async def test_a_stopped_job_is_taken_over_at_start_with_the_local_key(
        self, start: Start, space: TestSpace, jobs_key: bool
    ) -> None:
        """`stello up` gives its gateway's runner the local key (`run_up` passes it to
        `start_servers`): a job a stopped `stello up` left is continued at the next
        start, with no call naming its session. Without a key it waits for its session's
        next trigger."""
        first, gateway, addresses = await start(True)
        root = (await gateway.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid))).session
        channel = open_channel(addresses["storage"], key=space.key)
        try:
            await leave_stopped_job(storage_pb2_grpc.SessionStorageStub(channel), space, root.id)
        finally:
            await channel.close()
        for app, server in reversed(first):
            await shutdown(app, server, 0)
        _, gateway, _ = await start(True, jobs_key=space.key if jobs_key else None)
        # With the key the runner looks once at start (then every 30 s): a moment.
        deadline = asyncio.get_running_loop().time() + (20 if jobs_key else 3)
        while (await consolidation(gateway, space, root.id)).status != common_pb2.JOB_STATUS_DONE:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        done = (await consolidation(gateway, space, root.id)).status == common_pb2.JOB_STATUS_DONE
        assert done is jobs_key
