"""A database that answers but cannot serve (read-only, lacking migrations), through a real
storage server: calls answer UNAVAILABLE naming the condition, health is NOT_SERVING, the log
has WARNING lines and no traceback, and all is well again once the condition ends, without a
restart (explore9 F4, F6)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stello.auth import KeyStore, Principal
from stello.db.migrate import load_migrations, migrate
from stello.db.pool import create_pool
from stello.errors import Unavailable
from stello.serving.health import READ_ONLY
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from storage_service.config import StorageSettings
from tests.storage.helpers import rec
from tests.support.database import (
    create_empty_database,
    create_test_database,
    drop_test_database,
)
from tests.support.fixtures import RunningServer, new_space
from tests.support.fresh import FreshDatabase, fresh_database

pytestmark = pytest.mark.sql

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
READ_ONLY_MESSAGE = "the database refuses writes (read-only); retry the call"
SESSION = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label) VALUES ($1, $2, $2, 0, 'r')
"""
STORAGE = partial(create_app, config=StorageSettings(event_purge_interval_s=0.1))


def database_name(dsn: str) -> str:
    """The database a DSN names."""
    return dsn.partition("?")[0].rpartition("/")[2]


async def admin(admin_dsn: str, statement: str) -> None:
    """Run `statement` on the server's admin database."""
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(statement)
    finally:
        await con.close()


async def health(running: RunningServer) -> int:
    """The server's overall health."""
    async with running.channel() as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    return int(reply.status)


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 10.0) -> None:
    """Wait until `check()` holds."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "never came true"
        await asyncio.sleep(0.05)


def quiet(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log lines at ERROR or above, or with a traceback (none expected)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def append(running: RunningServer, key: str, space: str, session: uuid.UUID) -> None:
    """AppendRecords of one record to `session`."""
    async with running.channel(key) as channel:
        await storage_pb2_grpc.SessionStorageStub(channel).AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space, session_id=str(session), records=[rec("hello")]
            ),
            timeout=10,
        )


async def refused(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    """The error `call` answers."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


@pytest.fixture(name="fresh")
async def _fresh(admin_dsn: str, settings: StelloSettings) -> AsyncIterator[FreshDatabase]:
    async with fresh_database(admin_dsn, settings) as fresh:
        yield fresh


class TestReadOnly:
    async def test_writes_unavailable_reads_work_until_it_takes_writes_again(
        self, fresh: FreshDatabase, admin_dsn: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """`default_transaction_read_only` on (as on a standby): AppendRecords answers
        UNAVAILABLE naming the condition, GetSession answers, health is NOT_SERVING, the event
        purge and the calls log one WARNING line each and nothing at ERROR (five refused
        appends, one line: an outage fails every call alike); turned off, health is SERVING
        and the appends work, without a restart (the pool's connections opened during the
        spell kept it: every write failed until the services restarted)."""
        storage = await fresh.start(STORAGE)
        space, key = fresh.space.sid, fresh.space.key
        session = uuid.uuid4()
        await fresh.pool.execute(SESSION, fresh.space.id, session)
        await append(storage, key, space, session)
        name = database_name(fresh.dsn)
        caplog.set_level(logging.DEBUG, logger="stello.db.periodic")

        await admin(admin_dsn, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        await fresh.pool.expire_connections()  # a setting of the database reaches new connections
        await eventually(lambda: _is(health(storage), NOT_SERVING))
        assert storage.app.monitor is not None and storage.app.monitor.condition == READ_ONLY
        for _ in range(5):
            error = await refused(append(storage, key, space, session))
            assert (error.code(), error.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                READ_ONLY_MESSAGE,
            )
        said = [r.getMessage() for r in caplog.records if r.name == "stello.db.pool"]
        assert len(said) == 1 and said[0].startswith("the database refuses writes (read-only)")
        async with storage.channel(key) as channel:
            read = await storage_pb2_grpc.SessionStorageStub(channel).GetSession(
                storage_pb2.GetSessionRequest(space_id=space, session_id=str(session))
            )
        assert read.session.id == str(session)
        purge = "event purge failed: the database refuses writes (read-only); retrying every 0.1s"
        await eventually(lambda: _true(purge in caplog.messages))
        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert [r.getMessage() for r in warned].count(purge) == 1  # the next rounds' at DEBUG
        assert quiet(caplog) == []

        await admin(admin_dsn, f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        await eventually(lambda: _is(health(storage), SERVING))
        for _ in range(3):  # on the pool's connections opened during the spell too
            await append(storage, key, space, session)
        await eventually(lambda: _true("event purge works again" in caplog.messages))
        assert quiet(caplog) == []


@pytest.mark.plain_postgres("migrates a database of its own from an older schema")
class TestUnmigrated:
    async def test_not_serving_and_told_to_migrate_until_migrated(
        self, admin_dsn: str, settings: StelloSettings, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A database short of 0034 and later (0034's functions missing): health NOT_SERVING,
        AppendRecords UNAVAILABLE "run `stello migrate`", one WARNING line each and no
        traceback; once `stello migrate` ran, SERVING and the append works, no restart."""
        versions = [m.version for m in load_migrations()]
        short = len(versions) - versions.index("0034_router_appends")
        dsn = await create_test_database(admin_dsn, until=versions[-short - 1])
        try:
            local = settings.model_copy(update={"database_url": dsn, "database_direct_url": dsn})
            async with create_pool(dsn, local) as pool:
                keys = KeyStore(pool, cache_ttl_s=0)
                space = await new_space(keys)
                session = uuid.uuid4()
                await pool.execute(SESSION, space.id, session)
                app = STORAGE(local, pool, keys)
                server, port = await create_server(app, "127.0.0.1:0")
                await server.start()
                storage = RunningServer(app, server, port)
                try:
                    caplog.set_level(logging.DEBUG, logger="stello.db.periodic")
                    assert await health(storage) == NOT_SERVING
                    lacks = (
                        f"the database lacks {short} of Stello's migrations: run `stello migrate`"
                    )
                    assert app.monitor is not None and app.monitor.condition == lacks
                    error = await refused(append(storage, space.key, space.sid, session))
                    assert (error.code(), error.details()) == (grpc.StatusCode.UNAVAILABLE, lacks)
                    assert quiet(caplog) == []

                    con = await asyncpg.connect(dsn)
                    try:
                        await migrate(con)
                    finally:
                        await con.close()
                    await eventually(lambda: _is(health(storage), SERVING))
                    await append(storage, space.key, space.sid, session)
                    assert quiet(caplog) == []
                finally:
                    await shutdown(app, server, 0)
        finally:
            await drop_test_database(admin_dsn, dsn)

    async def test_the_key_stores_reads_say_migrate_on_a_database_never_migrated(
        self, admin_dsn: str, settings: StelloSettings, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Every read and write of the key store (stello keys list/revoke, spaces delete's
        look-up, WhoAmI's identity) on a database never migrated is UNAVAILABLE "run `stello
        migrate`", as the services' statements are: some went straight to the pool, a bug
        report with a traceback (INTERNAL through WhoAmI)."""
        dsn = await create_empty_database(admin_dsn)
        try:
            local = settings.model_copy(update={"database_url": dsn, "database_direct_url": dsn})
            async with create_pool(dsn, local) as pool:
                keys = KeyStore(pool, cache_ttl_s=0)
                every = len(load_migrations())
                lacks = f"the database lacks {every} of Stello's migrations: run `stello migrate`"
                principal = Principal(uuid.uuid4(), uuid.uuid4(), "tenant", uuid.uuid4())
                calls: list[Awaitable[object]] = [
                    keys.list_keys(),
                    keys.revoke(uuid.uuid4()),
                    keys.find_spaces("s", most_sessions=1),
                    keys.identity(principal),
                ]
                for call in calls:
                    with pytest.raises(Unavailable) as caught:
                        await call
                    assert str(caught.value) == lacks
                assert quiet(caplog) == []
        finally:
            await drop_test_database(admin_dsn, dsn)


async def _is(status: Awaitable[int], wanted: int) -> bool:
    return await status == wanted


async def _true(value: bool) -> bool:
    return value
