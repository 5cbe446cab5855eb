"""Shared fixtures: a real database, spaces and keys, sessions by SQL, servers on port 0.

With STELLO_TEST_PGBOUNCER=1 every connection goes through the run's own PgBouncer; the
hooks here keep its end in the run's output (tests/support/bouncer.py): a test that fails
naming a bouncer's address, or after the run's bouncer died, shows that bouncer's exit
code or signal and the tail of its log; the summary shows it again when the run's bouncer
died, and the run fails then even if no test did.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import grpc
import pytest

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.runner import AppFactory
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from tests.support.bouncer import (
    STARTED,
    Bouncer,
    FailureNotes,
    binary,
    bouncer_requested,
    check_cancel_safe,
    database_of,
    pgbouncer,
)
from tests.support.database import create_test_database, drop_test_database, server_dsn


@dataclass(frozen=True, slots=True)
class TestSpace:
    """A fresh tenant space with its key."""

    __test__ = False

    id: uuid.UUID
    key: str
    key_id: uuid.UUID

    @property
    def sid(self) -> str:
        """The space id as it travels in requests."""
        return str(self.id)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Per-call metadata authenticating as this space's key."""
        return (("authorization", f"Bearer {self.key}"),)


@dataclass(slots=True)
class RunningServer:
    """A real server bound to a loopback port, and its app."""

    app: ServiceApp
    server: grpc.aio.Server
    port: int

    @property
    def address(self) -> str:
        """host:port of the server."""
        return f"127.0.0.1:{self.port}"

    def channel(self, key: str | None = None) -> grpc.aio.Channel:
        """A new channel to this server, authenticated as `key` when given."""
        return open_channel(self.address, key=key)


@pytest.fixture(name="admin_dsn", scope="session")
def _admin_dsn() -> Iterator[str]:
    with server_dsn() as dsn:
        yield dsn


SESSION_BOUNCER = pytest.StashKey[Bouncer]()
"""The run's own PgBouncer, once the `bouncer` fixture started it."""
BOUNCER_NOTES = pytest.StashKey[FailureNotes]()


@pytest.fixture(name="bouncer", scope="session")
def _bouncer(admin_dsn: str, request: pytest.FixtureRequest) -> Iterator[Bouncer | None]:
    """The PgBouncer every connection goes through (STELLO_TEST_PGBOUNCER=1), else None."""
    if not bouncer_requested():
        yield None
        return
    executable = binary()
    try:
        check_cancel_safe(executable)
    except RuntimeError as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    with pgbouncer(admin_dsn, executable=executable) as running:
        request.config.stash[SESSION_BOUNCER] = running
        yield running


def pytest_configure(config: pytest.Config) -> None:
    config.stash[BOUNCER_NOTES] = FailureNotes()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report gets a "PgBouncer" section when a bouncer is involved."""
    report = yield
    if report.failed:
        notes = item.config.stash.setdefault(BOUNCER_NOTES, FailureNotes())
        session = item.config.stash.get(SESSION_BOUNCER, None)
        section = notes.section(report.nodeid, report.longreprtext, session, STARTED)
        if section is not None:
            report.sections.append(("PgBouncer", section))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run fails when its own bouncer died, whatever the tests said."""
    bouncer = session.config.stash.get(SESSION_BOUNCER, None)
    if bouncer is not None and bouncer.died and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The run's own bouncer's report, when it died before the end."""
    bouncer = terminalreporter.config.stash.get(SESSION_BOUNCER, None)
    if bouncer is None or not bouncer.died:
        return
    terminalreporter.write_sep("=", "PgBouncer exited during the run", red=True)
    terminalreporter.write_line(bouncer.report())
    terminalreporter.write_line(f"(its folder is kept: {bouncer.folder})")


def database_fixtures(scope: Any) -> tuple[Any, ...]:
    """The database fixtures (`direct_database_url`, `database_url`, `settings`, `pool`,
    `keys`) at `scope`: the run's database at session scope (below); a test module that
    declares them again at module scope has a database of its own, which its tests and
    the servers they start use, and which holds only their rows."""

    @pytest.fixture(name="direct_database_url", scope=scope)
    async def _direct_database_url(admin_dsn: str) -> AsyncIterator[str]:
        """The database, reached directly (what STELLO_DATABASE_DIRECT_URL names)."""
        dsn = await create_test_database(admin_dsn)
        yield dsn
        await drop_test_database(admin_dsn, dsn)

    @pytest.fixture(name="database_url", scope=scope)
    def _database_url(direct_database_url: str, bouncer: Bouncer | None) -> str:
        """The database as the services reach it: through PgBouncer when one runs."""
        if bouncer is None:
            return direct_database_url
        return bouncer.dsn(database_of(direct_database_url))

    @pytest.fixture(name="settings", scope=scope)
    def _settings(
        database_url: str, direct_database_url: str, bouncer: Bouncer | None
    ) -> StelloSettings:
        settings = StelloSettings(
            database_url=database_url,
            database_direct_url=direct_database_url,
            auth_cache_ttl_s=0,
            health_interval_s=0.2,
            shutdown_grace_s=5,
        )
        if bouncer is not None and bouncer.statement_cache_size is not None:
            settings = settings.model_copy(
                update={"db_statement_cache_size": bouncer.statement_cache_size}
            )
        return settings

    @pytest.fixture(name="pool", scope=scope)
    async def _pool(database_url: str, settings: StelloSettings) -> AsyncIterator[asyncpg.Pool]:
        async with create_pool(database_url, settings) as pool:
            yield pool

    @pytest.fixture(name="keys", scope=scope)
    def _keys(pool: asyncpg.Pool) -> KeyStore:
        return KeyStore(pool, cache_ttl_s=0)

    return _direct_database_url, _database_url, _settings, _pool, _keys


_direct_database_url, _database_url, _settings, _pool, _keys = database_fixtures("session")


@pytest.fixture(name="database_env", scope="session")
def _database_env(settings: StelloSettings) -> dict[str, str]:
    """The database variables of a service process started by a test (as `settings` has them)."""
    assert settings.database_url is not None and settings.database_direct_url is not None
    return {
        "STELLO_DATABASE_URL": settings.database_url,
        "STELLO_DATABASE_DIRECT_URL": settings.database_direct_url,
        "STELLO_DB_STATEMENT_CACHE_SIZE": str(settings.db_statement_cache_size),
    }


async def new_space(keys: KeyStore) -> TestSpace:
    """Create a space (own principal) and a tenant key for it."""
    tag = uuid.uuid4().hex[:10]
    created = await keys.create_key(space=f"space-{tag}", principal=f"principal-{tag}")
    assert created.space_id is not None
    return TestSpace(created.space_id, created.secret, created.key_id)


@pytest.fixture(name="space")
async def _space(keys: KeyStore) -> TestSpace:
    return await new_space(keys)


@pytest.fixture(name="other_space")
async def _other_space(keys: KeyStore) -> TestSpace:
    return await new_space(keys)


@pytest.fixture(name="admin_key", scope="session")
async def _admin_key(keys: KeyStore) -> str:
    created = await keys.create_key(space=None, scope="admin", principal="test-admin")
    return created.secret


MakeSession = Callable[..., Awaitable[uuid.UUID]]

INSERT_SESSION = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label, status,
                      source_session_id, provisional_until)
SELECT $1, $2, $3,
       COALESCE((SELECT root_id FROM sessions WHERE space_id = $1 AND id = $3), $2),
       COALESCE((SELECT depth + 1 FROM sessions WHERE space_id = $1 AND id = $3), 0),
       CASE WHEN $7 THEN NULL
            WHEN $3::uuid IS NULL THEN 0
            ELSE (SELECT count(*) FROM sessions
                  WHERE space_id = $1 AND parent_id = $3 AND sibling_index IS NOT NULL) END,
       $4, $5, $6, CASE WHEN $7 THEN now() + interval '1 hour' END
"""


@pytest.fixture(name="make_session")
def _make_session(pool: asyncpg.Pool, space: TestSpace) -> MakeSession:
    """Insert a session row by SQL (storage tests need not wait for the tree)."""

    async def make(
        *,
        parent: uuid.UUID | None = None,
        label: str = "Session",
        status: str = "active",
        source: uuid.UUID | None = None,
        provisional: bool = False,
        space_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        session_id = uuid.uuid4()
        async with pool.acquire() as con:
            await con.execute(
                INSERT_SESSION,
                space_id or space.id,
                session_id,
                parent,
                label,
                status,
                source,
                provisional,
            )
        return session_id

    return make


ServerStarter = Callable[[AppFactory], Awaitable[RunningServer]]


@pytest.fixture(name="start_server")
async def _start_server(
    settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore
) -> AsyncIterator[ServerStarter]:
    """Start real servers on 127.0.0.1:0 from app factories; stop them at teardown."""
    running: list[RunningServer] = []

    async def start(factory: AppFactory) -> RunningServer:
        app = factory(settings, pool, keys)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        started = RunningServer(app, server, port)
        running.append(started)
        return started

    yield start
    for item in reversed(running):
        await shutdown(item.app, item.server, 0)


@pytest.fixture(name="loop_errors", autouse=True)
async def _loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Fail a test whose event loop reported an unhandled exception (STYLE §12).

    It also makes the run's loop the main thread's current one for the test's sync
    fixtures (a grpc.aio channel made in one looks it up): a test that ended another loop
    in the main thread had left none current, and every later sync fixture that opened a
    channel failed with "There is no current event loop" (hundreds of errors from one cause).
    """
    loop = asyncio.get_running_loop()
    asyncio.set_event_loop(loop)
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        yield errors
    finally:
        loop.set_exception_handler(previous)
    assert not errors, f"unhandled exceptions in the event loop: {errors}"
