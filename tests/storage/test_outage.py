"""After PostgreSQL terminates its connections (a restart), storage answers the next
AppendRecords and BeginTurn, never UNKNOWN: a pooled connection the server ended is retried
on another (`stello.db.pool`)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from tests.storage.helpers import rec
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.proxy import PgProxy

pytestmark = pytest.mark.sql

TERMINATE = "SELECT pg_terminate_backend(p) FROM unnest($1::int[]) p"


async def test_calls_after_the_server_terminated_every_connection(
    settings: StelloSettings,
    direct_database_url: str,
    pool: asyncpg.Pool,
    space: TestSpace,
    make_session: MakeSession,
) -> None:
    """Every pooled connection gets the server's FATAL (its socket closing late, as after a
    restart); AppendRecords and BeginTurn on them still answer OK. (The health ping is slowed
    down: a failing ping would discard the connections before the calls meet them.)"""
    session_id = str(await make_session())
    proxy = PgProxy(direct_database_url, linger_s=2.0)
    await proxy.open()
    sized = settings.model_copy(
        update={"db_pool_min_size": 3, "db_pool_max_size": 3, "health_interval_s": 60}
    )
    try:
        async with create_pool(proxy.dsn, sized) as own:
            app = create_app(sized, own, KeyStore(own, 0))
            server, port = await create_server(app, "127.0.0.1:0")
            await server.start()
            try:
                async with own.acquire() as a, own.acquire() as b, own.acquire() as c:
                    pids = [await con.fetchval("SELECT pg_backend_pid()") for con in (a, b, c)]
                assert [r[0] for r in await pool.fetch(TERMINATE, pids)] == [True] * 3
                await asyncio.sleep(0.3)  # the FATAL arrived; the sockets linger open
                async with open_channel(f"127.0.0.1:{port}", key=space.key) as channel:
                    stub = storage_pb2_grpc.SessionStorageStub(channel)
                    target: dict[str, Any] = {"space_id": space.sid, "session_id": session_id}
                    appended = await stub.AppendRecords(
                        storage_pb2.AppendRecordsRequest(**target, records=[rec("after")])
                    )
                    lease = await stub.BeginTurn(storage_pb2.BeginTurnRequest(**target, ttl_s=5))
            finally:
                await shutdown(app, server, 0)
    finally:
        await proxy.cut()
    assert [r.content for r in appended.records] == ["after"]
    assert lease.token
