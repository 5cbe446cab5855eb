"""The SDK across a gateway restart: a turn retried with its request id is stored exactly once,
and a watch resumes from its cursor, missing and repeating nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from agent_gateway.app import create_app
from agent_gateway.llm import Completion, LLMMessage, ToolSpec
from agent_gateway.llm.echo import EchoProvider
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello_cli.parser import build_parser
from stello_client import AsyncClient, Retry
from stello_client.exceptions import Unavailable
from tests.gateway.conftest import Backends, FakeSummarizer, record
from tests.sdk.conftest import QUICK_RETRY
from tests.support.fixtures import RunningServer, TestSpace
from tests.support.ports import free_port

pytestmark = pytest.mark.sql


class HeldEcho(EchoProvider):
    """The echo model that, while `hold` is set, waits in `complete` (`started` tells when)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = True
        self.started = asyncio.Event()
        self.calls = 0

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Count the call; wait forever while held; then answer as the echo does."""
        self.calls += 1
        if self.hold:
            self.started.set()
            await asyncio.Event().wait()
        return await super().complete(messages, tools=tools, max_tokens=max_tokens)


@dataclass
class Gateway:
    """A gateway that can be stopped and started again on the same port."""

    backends: Backends
    profiles_file: Path
    summarizer: FakeSummarizer
    settings: StelloSettings
    pool: asyncpg.Pool
    keys: KeyStore
    provider: HeldEcho
    address: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")
    running: list[RunningServer] = field(default_factory=list)

    async def start(self) -> None:
        """Start a gateway on the address: a free port below the kernel's ephemeral range,
        where no outgoing connection takes it while the gateway is down (port 0's, of that
        range, was taken so in a CI pass: PortInUse at the restart)."""
        config = self.backends.gateway_config(profiles_file=self.profiles_file)
        app = create_app(
            self.settings,
            self.pool,
            self.keys,
            config,
            summarizer=self.summarizer,
            provider=self.provider,
        )
        server, port = await create_server(app, self.address)
        await server.start()
        self.address = f"127.0.0.1:{port}"
        self.running.append(RunningServer(app, server, port))

    async def stop(self) -> None:
        """Stop it at once: its calls end, its port is free."""
        await self.running[-1].server.stop(0)


@pytest.fixture(name="gateway")
async def _gateway(
    backends: Backends,
    profiles_file: Path,
    summarizer: FakeSummarizer,
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
) -> AsyncIterator[Gateway]:
    gateway = Gateway(backends, profiles_file, summarizer, settings, pool, keys, HeldEcho())
    await gateway.start()
    yield gateway
    for running in reversed(gateway.running):
        await shutdown(running.app, running.server, 0)


def client_on(gateway: Gateway, space: TestSpace) -> AsyncClient:
    """An AsyncClient on the restartable gateway, as `space`."""
    return AsyncClient(gateway.address, space.key, space.sid, plaintext=True, retry=QUICK_RETRY)


async def records_of(client: AsyncClient, session_id: str) -> list[tuple[str, str]]:
    """(role, content) of every record of the session."""
    return [
        (common_pb2.RecordRole.Name(r.role), r.content) async for r in client.records(session_id)
    ]


async def test_a_turn_cut_by_a_restart_is_retried_and_stored_once(
    gateway: Gateway, space: TestSpace
) -> None:
    """A send whose gateway stops mid-turn is retried by the SDK with the same request id
    once a gateway is back: the turn is stored exactly once."""
    async with client_on(gateway, space) as client:
        root = await client.create_root()
        turn = asyncio.create_task(client.send(root.id, "survive", request_id="restart-turn"))
        await asyncio.wait_for(gateway.provider.started.wait(), 10)
        await gateway.stop()
        gateway.provider.hold = False
        await gateway.start()
        done = await asyncio.wait_for(turn, 30)
        assert done.assistant.content == "echo: survive"
        assert await records_of(client, root.id) == [
            ("RECORD_ROLE_USER", "survive"),
            ("RECORD_ROLE_ASSISTANT", "echo: survive"),
        ]
        assert (await client.get_session(root.id)).turn_count == 1
        again = await client.send(root.id, "survive", request_id="restart-turn")
        assert again.assistant.seq == done.assistant.seq  # the stored turn, not a new one
        assert gateway.provider.calls == 2
        assert len(await records_of(client, root.id)) == 2


async def test_a_watch_resumes_across_a_restart(
    gateway: Gateway, space: TestSpace, backends: Backends
) -> None:
    """A watch whose gateway restarts resumes after its last cursor: the events committed
    meanwhile (written to storage while no gateway ran) come once each, in order, then the
    live ones."""
    gateway.provider.hold = False
    async with client_on(gateway, space) as client:
        root = await client.create_root(label="watched")
        async with client.watch(kinds=["records_appended", "session_committed"]) as watch:
            await watch.start()
            first = await client.create_root(label="before")
            seen = [await asyncio.wait_for(anext(watch), 10)]
            await gateway.stop()
            storage = backends.storage.channel(space.key)
            try:
                stub = storage_pb2_grpc.SessionStorageStub(storage)
                for text in ("while", "down"):
                    await stub.AppendRecords(
                        storage_pb2.AppendRecordsRequest(
                            space_id=space.sid, session_id=root.id, records=[record("user", text)]
                        )
                    )
            finally:
                await storage.close()
            await gateway.start()
            seen += [await asyncio.wait_for(anext(watch), 30) for _ in range(2)]
            after = await client.create_root(label="after")
            seen.append(await asyncio.wait_for(anext(watch), 10))
    kinds = [(common_pb2.EventKind.Name(e.kind), e.session_id, e.first_seq) for e in seen]
    assert kinds == [
        ("EVENT_KIND_SESSION_COMMITTED", first.id, 0),
        ("EVENT_KIND_RECORDS_APPENDED", root.id, 1),
        ("EVENT_KIND_RECORDS_APPENDED", root.id, 2),
        ("EVENT_KIND_SESSION_COMMITTED", after.id, 0),
    ]
    cursors = [int(e.cursor) for e in seen]
    assert cursors == sorted(set(cursors))


async def test_a_stream_refused_before_its_first_event_is_retried(
    gateway: Gateway, space: TestSpace, backends: Backends
) -> None:
    """A stream that meets another turn's lease (TURN_IN_PROGRESS, before any event) is
    tried again with the same request id until the lease ends, then streams the turn."""
    gateway.provider.hold = False
    patient = Retry(attempts=40, initial_backoff_s=0.05, max_backoff_s=0.2)  # >= 3.5 s of pauses
    async with AsyncClient(
        gateway.address, space.key, space.sid, plaintext=True, retry=patient
    ) as client:
        root = await client.create_root()
        storage = backends.storage.channel(space.key)
        try:
            await storage_pb2_grpc.SessionStorageStub(storage).BeginTurn(
                storage_pb2.BeginTurnRequest(space_id=space.sid, session_id=root.id, ttl_s=1)
            )
        finally:
            await storage.close()
        events = [event async for event in client.stream(root.id, "later")]
        assert events[-1].assistant.content == "echo: later"  # type: ignore[union-attr]
        assert (await client.get_session(root.id)).turn_count == 1


async def test_a_gateway_down_for_seconds_is_waited_out(gateway: Gateway, space: TestSpace) -> None:
    """A call that meets no gateway is tried past `attempts` for `unavailable_for_s`, so one
    back within it answers (explore9 F11: the default attempts' 3.6-7.1 s of pauses gave
    up during a gateway's restart of about 5 s); `unavailable_for_s=0` gives up with them."""
    gateway.provider.hold = False
    brief = Retry(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.3, busy_for_s=0)
    for within, answers in ((0.0, False), (10.0, True)):
        await gateway.stop()
        retry = dataclasses.replace(brief, unavailable_for_s=within)
        async with AsyncClient(
            gateway.address, space.key, space.sid, plaintext=True, retry=retry
        ) as client:
            call = asyncio.create_task(client.create_root(label="after the restart"))
            await asyncio.sleep(2.0)  # longer than the attempts' pauses
            await gateway.start()
            if answers:
                root = await asyncio.wait_for(call, 15)
                assert root.label == "after the restart"
            else:
                with pytest.raises(Unavailable):
                    await asyncio.wait_for(call, 15)


async def test_a_watch_waits_out_a_gateway_down_for_seconds(
    gateway: Gateway, space: TestSpace
) -> None:
    """A watch whose gateway stays down past its attempts' pauses keeps calling within
    `unavailable_for_s`, as a call does, and goes on once the gateway is back (explore12 F5:
    it raised Unavailable after `attempts`, about 4-7 s by default)."""
    gateway.provider.hold = False
    brief = Retry(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.3, busy_for_s=0)
    retry = dataclasses.replace(brief, unavailable_for_s=10.0)
    async with (
        AsyncClient(gateway.address, space.key, space.sid, plaintext=True, retry=retry) as client,
        client.watch(kinds=["session_committed"]) as watch,
    ):
        await watch.start()
        await gateway.stop()
        waiting = asyncio.create_task(anext(watch))
        await asyncio.sleep(2.0)  # longer than the attempts' pauses
        assert not waiting.done()
        await gateway.start()
        root = await client.create_root(label="after the outage")
        event = await asyncio.wait_for(waiting, 15)
        assert event.session_id == root.id


async def test_stello_watch_rides_out_a_gateway_restart(
    gateway: Gateway, space: TestSpace, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stello watch` keeps calling while its gateway restarts (seconds, past a command's
    three tries) and prints the change made after it (it exited 1 "cannot reach the
    gateway" 0.3 s after the stream ended: its client had unavailable_for_s=0)."""
    gateway.provider.hold = False
    argv = ["--gateway", gateway.address, "--key", space.key, "--space", space.sid]
    args = build_parser().parse_args([*argv, "watch", "--count", "1", "--json"])
    watching = asyncio.create_task(args.run(args))
    async with client_on(gateway, space) as client:
        await asyncio.sleep(1.0)  # the watch's stream is open
        await gateway.stop()
        await asyncio.sleep(2.0)  # past the command's three tries
        assert not watching.done()
        await gateway.start()
        root = await client.create_root(label="after the restart")
    assert await asyncio.wait_for(watching, 15) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [event["session_id"] for event in printed] == [root.id]
