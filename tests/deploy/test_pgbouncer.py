"""The services through a real PgBouncer in transaction mode with few server connections.

DESIGN §3 promises no session state in connections. These tests start their own
PgBouncer (two server connections for many clients, so consecutive transactions
of one client land on different backends) in every run; `STELLO_TEST_PGBOUNCER=1`
routes the whole SQL suite through one as well (scripts/test).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import asyncpg
import pytest

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.db.migrate import load_migrations, migrate_dsn
from stello.db.pool import create_pool
from stello.serving.runner import AppFactory
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from storage_service.app import create_app as storage_app
from tests.support import fixtures
from tests.support.bouncer import (
    STARTED,
    Bouncer,
    FailureNotes,
    bouncer_requested,
    database_of,
    pgbouncer,
)
from tests.support.database import drop_test_database
from tests.support.fixtures import SESSION_BOUNCER, RunningServer, TestSpace, new_space
from tree_service.app import create_app as tree_app

pytestmark = pytest.mark.sql

SERVER_CONNECTIONS = 2


@pytest.fixture(name="small_bouncer", scope="module")
def _small_bouncer(admin_dsn: str) -> Iterator[Bouncer]:
    with pgbouncer(admin_dsn, pool_size=SERVER_CONNECTIONS) as running:
        yield running


@pytest.fixture(name="bounced_settings", scope="module")
def _bounced_settings(
    small_bouncer: Bouncer, direct_database_url: str, settings: StelloSettings
) -> StelloSettings:
    cache = small_bouncer.statement_cache_size
    return settings.model_copy(
        update={
            "database_url": small_bouncer.dsn(database_of(direct_database_url)),
            "database_direct_url": direct_database_url,
            "db_pool_min_size": 0,
            "db_pool_max_size": 12,
            **({} if cache is None else {"db_statement_cache_size": cache}),
        }
    )


@pytest.fixture(name="bounced_pool", scope="module")
async def _bounced_pool(bounced_settings: StelloSettings) -> AsyncIterator[asyncpg.Pool]:
    assert bounced_settings.database_url is not None
    async with create_pool(bounced_settings.database_url, bounced_settings) as pool:
        yield pool


@pytest.fixture(name="gateway")
async def _gateway(
    bounced_settings: StelloSettings, bounced_pool: asyncpg.Pool
) -> AsyncIterator[RunningServer]:
    """Storage, tree and gateway servers whose every query goes through the small PgBouncer."""
    keys = KeyStore(bounced_pool, 0)
    running: list[RunningServer] = []

    async def start(factory: AppFactory) -> RunningServer:
        app = factory(bounced_settings, bounced_pool, keys)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        running.append(RunningServer(app, server, port))
        return running[-1]

    try:
        storage = await start(storage_app)
        tree = await start(tree_app)
        config = GatewaySettings(storage_address=storage.address, tree_address=tree.address)
        yield await start(partial(gateway_app, config=config))
    finally:
        for item in reversed(running):
            await shutdown(item.app, item.server, 0)


async def backend_pids(pool: asyncpg.Pool, count: int) -> set[int]:
    """The server backends that `count` concurrent one-statement transactions ran on."""

    async def one() -> int:
        async with pool.acquire() as con, con.transaction():
            pid: int = await con.fetchval("SELECT pg_backend_pid()")
            await asyncio.sleep(0.01)
            return pid

    return set(await asyncio.gather(*(one() for _ in range(count))))


async def test_the_run_goes_through_pgbouncer_when_asked(
    pool: asyncpg.Pool, bouncer: Bouncer | None
) -> None:
    """With STELLO_TEST_PGBOUNCER=1 the suite's pool is PgBouncer's, else PostgreSQL's own."""
    async with pool.acquire() as con:
        backend = await con.fetchval("SELECT pg_backend_pid()")
        # PgBouncer hands its clients cancel keys of its own, not a backend's pid.
        assert (con.get_server_pid() != backend) == (bouncer is not None) == bouncer_requested()


async def test_many_clients_share_two_server_connections(bounced_pool: asyncpg.Pool) -> None:
    """Twelve pooled client connections run their transactions on at most two backends."""
    pids = await backend_pids(bounced_pool, 12)
    assert 1 <= len(pids) <= SERVER_CONNECTIONS


async def test_the_gateway_flows_work_through_it(
    gateway: RunningServer, bounced_pool: asyncpg.Pool
) -> None:
    """CreateRoot, Fork INHERIT, Sends in four sessions at once and reads answer as direct."""
    space: TestSpace = await new_space(KeyStore(bounced_pool, 0))
    async with gateway.channel(space.key) as channel:
        gw = agent_pb2_grpc.AgentGatewayStub(channel)
        root = (await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid))).session
        await gw.Send(agent_pb2.SendRequest(space_id=space.sid, session_id=root.id, content="hi"))
        fork = agent_pb2.ForkRequest(
            space_id=space.sid,
            source_session_id=root.id,
            label="child",
            context=common_pb2.FORK_CONTEXT_INHERIT,
        )
        children = [(await gw.Fork(fork)).session for _ in range(4)]

        async def three_turns(session_id: str) -> None:
            for n in range(3):
                request = agent_pb2.SendRequest(space_id=space.sid, session_id=session_id)
                request.content = f"turn {n}"
                await gw.Send(request)

        await asyncio.gather(*(three_turns(child.id) for child in children))
        for child in children:
            listed = await gw.ListRecords(
                agent_pb2.ListRecordsRequest(space_id=space.sid, session_id=child.id)
            )
            assert [r.seq for r in listed.records] == list(range(1, 9))
            view = await gw.GetSession(
                agent_pb2.GetSessionRequest(space_id=space.sid, session_id=child.id)
            )
            assert view.session.turn_count == 3
        digests = await gw.ListSessionDigests(
            agent_pb2.ListSessionDigestsRequest(space_id=space.sid)
        )
        assert len(digests.digests) == 5


async def test_stello_migrate_applies_through_it(admin_dsn: str, small_bouncer: Bouncer) -> None:
    """`stello migrate` pointed at PgBouncer applies every file once (no session state)."""
    name = f"stello_test_{uuid.uuid4().hex[:12]}"
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'CREATE DATABASE "{name}"')
    finally:
        await con.close()
    fresh = small_bouncer.dsn(name)
    try:
        applied = await migrate_dsn(fresh)
        assert applied == [m.version for m in load_migrations()]
        assert await migrate_dsn(fresh) == []
    finally:
        await drop_test_database(admin_dsn, fresh)


def _failed(nodeid: str, text: str) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("x.py", 0, "x"), {}, "failed", text, "call")


def _reported(stash: pytest.Stash, report: pytest.TestReport) -> pytest.TestReport:
    """`report` as the makereport hook of tests/support/fixtures.py hands it on, for a test run with
    `stash` as its config's."""
    item = cast(pytest.Item, SimpleNamespace(config=SimpleNamespace(stash=stash)))
    hook = fixtures.pytest_runtest_makereport(item, cast(Any, None))
    next(hook)
    try:
        hook.send(report)
    except StopIteration as done:
        return cast(pytest.TestReport, done.value)
    raise AssertionError("the hook did not return the report")


def test_a_dead_bouncer_is_reported_with_its_signal_and_log(admin_dsn: str) -> None:
    """A bouncer killed from outside (SIGKILL, as the OOM killer would) is `died`; the first
    failure after it shows its signal, the test running when it died and its log's tail,
    later ones a line pointing back, and the run's summary shows it and fails the run."""
    with pgbouncer(admin_dsn) as bouncer:
        assert bouncer.process is not None and not bouncer.died
        connect_failed = f"OSError: Connect call failed ('127.0.0.1', {bouncer.port})"
        named = FailureNotes().section("tests/a.py::test_zero", connect_failed, None, [bouncer])
        assert named is not None and "is running" in named, "a failure naming it gets its log"
        os.kill(bouncer.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while bouncer.ended_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bouncer.died
    try:
        assert bouncer.folder.exists(), "a dead bouncer's folder is kept for its log"
        report = bouncer.report()
        assert "was killed by signal 9 (SIGKILL)" in report
        assert f"during {os.environ['PYTEST_CURRENT_TEST'].rpartition(' ')[0]}" in report
        assert f"listening on 127.0.0.1:{bouncer.port}" in report  # a line of its log

        stash = pytest.Stash()
        stash[fixtures.BOUNCER_NOTES] = FailureNotes()
        stash[SESSION_BOUNCER] = bouncer
        first = _reported(stash, _failed("tests/a.py::test_one", connect_failed))
        assert first.sections == [("PgBouncer", report)]
        second = _reported(stash, _failed("tests/a.py::test_two", "some other failure"))
        [(title, line)] = second.sections
        assert title == "PgBouncer" and "SIGKILL" in line and "under tests/a.py::test_one" in line
        passed = pytest.TestReport(
            "tests/a.py::test_ok", ("x.py", 0, "x"), {}, "passed", None, "call"
        )
        assert _reported(stash, passed).sections == []

        session = SimpleNamespace(
            config=SimpleNamespace(stash=stash), exitstatus=pytest.ExitCode.OK
        )
        fixtures.pytest_sessionfinish(cast(pytest.Session, session))
        assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
        written: list[str] = []
        terminal = SimpleNamespace(
            config=session.config,
            write_sep=lambda _sep, title, **_: written.append(title),
            write_line=written.append,
        )
        fixtures.pytest_terminal_summary(cast(pytest.TerminalReporter, terminal))
        assert written[:2] == ["PgBouncer exited during the run", report]
    finally:
        STARTED.remove(bouncer)
        shutil.rmtree(bouncer.folder, ignore_errors=True)
