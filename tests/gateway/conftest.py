"""Gateway fixtures: real storage, tree and gateway servers.

The stacks' provisioning TTL is `STACK_TTL_S` (a saga's budget is half of it, so a loaded
machine does not run a fixture's Fork out of time); the modules that wait for the sweeper to
remove a provisional session override the `provisioning_ttl_s` fixture with the short `TTL_S`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.app import GatewayClients, create_app
from agent_gateway.config import GatewaySettings
from agent_gateway.forks.compose import Summarizer
from agent_gateway.forks.faults import Faults
from agent_gateway.llm import LLMProvider
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tree_service.app import create_app as tree_app
from tree_service.app import create_sweeper
from tree_service.config import TreeSettings

TTL_S = 4.0
"""The short provisioning TTL of the tests that wait for the sweeper."""
STACK_TTL_S = 20.0
"""Every other stack's TTL (saga budget 10 s)."""
SWEEP_INTERVAL_S = 0.25

PROFILES_TOML = """
[[profiles]]
name = "research"
system_prompt = "You research {topic} in {region}."
system_prompt_mode = "prepend"
context = "inherit"
prompt = "Research started."
skills = ["search"]

[[profiles]]
name = "preset"
system_prompt = "Preset role."
system_prompt_mode = "preset"

[[profiles]]
name = "append"
system_prompt = "Constraints."
system_prompt_mode = "append"
skills = []

[[profiles]]
name = "compressor"
context = "compress"

[[profiles]]
name = "bare"
"""


class FakeSummarizer:
    """A deterministic stand-in for the LLM behind `compose.Summarizer` (records every call)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.given: list[tuple[str | None, int]] = []
        self.error: Exception | None = None

    async def summarize_for_fork(
        self,
        records: Sequence[common_pb2.Record],
        *,
        summary: str | None = None,
        omitted: int = 0,
    ) -> str:
        """Summarise as 'summary of N records: first..last' (the source's summary and the
        omitted count are recorded in `given`)."""
        self.calls.append([r.content for r in records])
        self.given.append((summary, omitted))
        if self.error is not None:
            raise self.error
        return f"summary of {len(records)} records: {records[0].content}..{records[-1].content}"


def record(role: str, content: str, **fields: Any) -> common_pb2.Record:
    """A record with role given by name (user, assistant, tool, system)."""
    return common_pb2.Record(role=f"RECORD_ROLE_{role.upper()}", content=content, **fields)


@dataclass(slots=True)
class Backends:
    """Storage and tree servers (the tree's sweeper runs with `provisioning_ttl_s`)."""

    storage: RunningServer
    tree: RunningServer
    tree_config: TreeSettings

    def gateway_config(self, **overrides: Any) -> GatewaySettings:
        """Gateway settings pointing at these servers (saga budget: half the TTL)."""
        values: dict[str, Any] = {
            "storage_address": self.storage.address,
            "tree_address": self.tree.address,
            "provisioning_ttl_s": self.tree_config.provisioning_ttl_s,
            "call_timeout_s": 5.0,
            "retry_backoff_s": 0.01,
        }
        values.update(overrides)
        return GatewaySettings(**values)


@dataclass(slots=True)
class Stack:
    """A gateway over real storage and tree, with stubs authenticated as one space."""

    backends: Backends
    gateway: RunningServer
    space: TestSpace
    gw: Any
    storage: Any
    tree: Any
    summarizer: FakeSummarizer
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    async def root(self, **fields: Any) -> common_pb2.SessionSummary:
        """CreateRoot in this space."""
        reply: agent_pb2.CreateRootResponse = await self.gw.CreateRoot(
            agent_pb2.CreateRootRequest(space_id=self.space.sid, **fields)
        )
        return reply.session

    async def fork(
        self, source: str, label: str = "child", **fields: Any
    ) -> common_pb2.SessionSummary:
        """Fork `source` in this space."""
        reply: agent_pb2.ForkResponse = await self.gw.Fork(
            agent_pb2.ForkRequest(
                space_id=self.space.sid, source_session_id=source, label=label, **fields
            )
        )
        return reply.session

    async def append(self, session_id: str, *records: common_pb2.Record) -> list[common_pb2.Record]:
        """Append records straight to storage."""
        reply: storage_pb2.AppendRecordsResponse = await self.storage.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=self.space.sid, session_id=session_id, records=list(records)
            )
        )
        return list(reply.records)

    async def view(self, session_id: str) -> agent_pb2.SessionView:
        """GetSession's joined view."""
        reply: agent_pb2.GetSessionResponse = await self.gw.GetSession(
            agent_pb2.GetSessionRequest(space_id=self.space.sid, session_id=session_id)
        )
        return reply.session

    async def records(self, session_id: str) -> list[common_pb2.Record]:
        """Every record of a session, through the gateway."""
        reply: agent_pb2.ListRecordsResponse = await self.gw.ListRecords(
            agent_pb2.ListRecordsRequest(space_id=self.space.sid, session_id=session_id)
        )
        return list(reply.records)


GatewayStarter = Callable[..., Awaitable[RunningServer]]


@pytest.fixture(name="provisioning_ttl_s")
def _provisioning_ttl_s() -> float:
    """The stacks' provisioning TTL (overridden with `TTL_S` where a test waits for a sweep)."""
    return STACK_TTL_S


@pytest.fixture(name="backends")
async def _backends(
    start_server: ServerStarter, pool: asyncpg.Pool, provisioning_ttl_s: float
) -> AsyncIterator[Backends]:
    tree_config = TreeSettings(
        provisioning_ttl_s=provisioning_ttl_s, sweep_interval_s=SWEEP_INTERVAL_S
    )
    storage = await start_server(storage_app)
    tree = await start_server(partial(tree_app, config=tree_config))
    sweeper = create_sweeper(pool, tree_config)
    sweeper.start()
    yield Backends(storage, tree, tree_config)
    await sweeper.stop()


@pytest.fixture(name="local_calls")
def _local_calls() -> bool:
    """Whether the stacks' gateways call storage and tree in-process (`stello.serving.inproc`), as
    `stello up` does; tests/gateway/test_local_calls.py reruns test classes with True."""
    return False


def gateway_clients(
    config: GatewaySettings, backends: Backends, settings: StelloSettings, local_calls: bool
) -> GatewayClients:
    """The gateway's clients of the backends (as `config` sets them up): in-process calls
    with `local_calls`."""
    local = {}
    if local_calls:
        assert backends.storage.app.local is not None and backends.tree.app.local is not None
        local = {"storage": backends.storage.app.local, "tree": backends.tree.app.local}
    return GatewayClients.connect(config, settings, local=local)


@pytest.fixture(name="profiles_file")
def _profiles_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES_TOML, encoding="utf-8")
    return path


@pytest.fixture(name="summarizer")
def _summarizer() -> FakeSummarizer:
    return FakeSummarizer()


@pytest.fixture(name="start_gateway")
def _start_gateway(
    start_server: ServerStarter,
    backends: Backends,
    profiles_file: Path,
    summarizer: FakeSummarizer,
    settings: StelloSettings,
    local_calls: bool,
) -> GatewayStarter:
    """Start a gateway over the backends; keyword overrides go to GatewaySettings (`stello`:
    overrides of the process's StelloSettings, e.g. `max_calls_per_space`).

    COMPRESS forks use the FakeSummarizer unless `fake_summarizer` is False
    (then the gateway's own, over its provider and configured prompts).
    """

    async def start(
        *,
        faults: Faults | None = None,
        summarizer_: Summarizer | None = None,
        clients: GatewayClients | None = None,
        provider: LLMProvider | None = None,
        fake_summarizer: bool = True,
        stello: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> RunningServer:
        overrides.setdefault("profiles_file", profiles_file)
        config = backends.gateway_config(**overrides)
        if clients is None and local_calls:
            clients = gateway_clients(config, backends, settings, local_calls)
        factory = partial(
            create_app,
            config=config,
            faults=faults,
            summarizer=summarizer_ or (summarizer if fake_summarizer else None),
            clients=clients,
            provider=provider,
        )
        if stello:
            made = factory
            factory = partial(_with_settings, made, stello)
        return await start_server(factory)

    return start


def _with_settings(
    factory: Callable[..., Any], stello: dict[str, Any], settings: StelloSettings, *rest: Any
) -> Any:
    """`factory`'s app with `stello` overriding fields of the process's settings."""
    return factory(settings.model_copy(update=stello), *rest)


async def open_stack(
    backends: Backends, gateway: RunningServer, space: TestSpace, summarizer: FakeSummarizer
) -> Stack:
    """Stubs on the three servers as `space` (close with `close_stack`)."""
    channels = [
        gateway.channel(space.key),
        backends.storage.channel(space.key),
        backends.tree.channel(space.key),
    ]
    return Stack(
        backends,
        gateway,
        space,
        agent_pb2_grpc.AgentGatewayStub(channels[0]),
        storage_pb2_grpc.SessionStorageStub(channels[1]),
        tree_pb2_grpc.SessionTreeStub(channels[2]),
        summarizer,
        channels,
    )


async def close_stack(stack: Stack) -> None:
    """Close the stack's channels."""
    for channel in stack.channels:
        await channel.close()


@pytest.fixture(name="stack")
async def _stack(
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
) -> AsyncIterator[Stack]:
    gateway = await start_gateway()
    stack = await open_stack(backends, gateway, space, summarizer)
    yield stack
    await close_stack(stack)


def new_id() -> str:
    """A random session id that exists nowhere."""
    return str(uuid.uuid4())


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """Await a call that must fail and return its error."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


ROW_COUNTS = """
SELECT (SELECT count(*) FROM sessions WHERE space_id = $1) AS sessions,
       (SELECT count(*) FROM records WHERE space_id = $1) AS records,
       (SELECT count(*) FROM session_slots WHERE space_id = $1) AS slots,
       (SELECT count(*) FROM session_configs WHERE space_id = $1) AS configs,
       (SELECT count(*) FROM session_metadata WHERE space_id = $1) AS metadata
"""


async def row_counts(pool: asyncpg.Pool, space: TestSpace) -> dict[str, int]:
    """How many rows of each per-session table the space has (provisional ones included)."""
    row = await pool.fetchrow(ROW_COUNTS, space.id)
    assert row is not None
    return dict(row)


StackMaker = Callable[..., Awaitable[Stack]]


@pytest.fixture(name="make_stack")
async def _make_stack(
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
) -> AsyncIterator[StackMaker]:
    """Start a gateway with the given LLM provider (and settings overrides); open stubs on it."""
    opened: list[Stack] = []

    async def make(provider: LLMProvider | None = None, **overrides: Any) -> Stack:
        gateway = await start_gateway(provider=provider, **overrides)
        stack = await open_stack(backends, gateway, space, summarizer)
        opened.append(stack)
        return stack

    yield make
    for stack in opened:
        await close_stack(stack)


@dataclass(frozen=True, slots=True)
class Counted:
    """A stack whose gateway's storage and tree clients count their calls."""

    stack: Stack
    clients: GatewayClients

    def clear(self) -> None:
        """Forget the calls made so far."""
        self.clients.storage.calls.clear()
        self.clients.tree.calls.clear()

    def calls(self) -> tuple[dict[str, int], dict[str, int]]:
        """The (storage, tree) calls since the last `clear`, by method."""
        return dict(self.clients.storage.calls), dict(self.clients.tree.calls)


@pytest.fixture(name="counted")
async def _counted(
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
    settings: StelloSettings,
    local_calls: bool,
) -> AsyncIterator[Counted]:
    clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
    gateway = await start_gateway(clients=clients)
    stack = await open_stack(backends, gateway, space, summarizer)
    yield Counted(stack, clients)
    await close_stack(stack)
