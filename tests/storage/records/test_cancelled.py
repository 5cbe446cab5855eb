"""A statement the database cancels with no bound of ours behind it (an operator's
pg_cancel_backend; a server's or, on Citus, a worker's statement_timeout) is UNAVAILABLE,
retryable, saying so: it was INTERNAL with an error id (explore13 F7)."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import pytest

from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rec, rpc_error
from tests.storage.records.test_lineage import append
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub

# The backends of this database waiting for a lock (the call's, on `records`), not ours.
WAITING = """
SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND datname = current_database()
"""


async def test_a_cancelled_statement_is_unavailable(
    stub: Stub, direct_database_url: str, space: TestSpace, make_session: MakeSession
) -> None:
    sid = await make_session()
    await append(stub, space, sid, rec("held up"))
    request = storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=str(sid))
    holder = await asyncpg.connect(direct_database_url)
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
            call = asyncio.ensure_future(rpc_error(stub.ListRecords(request, timeout=30)))
            pids: list[asyncpg.Record] = []
            while not pids:
                assert not call.done(), "the call did not wait for the lock"
                await asyncio.sleep(0.02)
                pids = await holder.fetch(WAITING)
            for row in pids:
                await holder.execute("SELECT pg_cancel_backend($1)", row["pid"])
            error = await call
    finally:
        await holder.close()
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert error.details() == (
        "the database cancelled the call's statement (an operator's cancel or a server "
        "timeout); nothing was applied: retry the call"
    )
    await stub.ListRecords(request, timeout=30)  # the lock gone, answered
