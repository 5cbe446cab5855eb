"""A session DeleteSubtree hid (being erased) is absent to every storage write (DESIGN §4.8).

Storage accepts writes to a provisional session (a saga fills it before its commit),
but not to one being erased (``provisional_until = 'infinity'``): each write answers
NOT_FOUND, as for a deleted session, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.rows import space_rows

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation


def writes(space: str, sid: str) -> dict[str, Callable[[Stub], Awaitable[Any]]]:
    """One call of every storage write that names the session."""
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content="late")
    meta = common_pb2.SessionMeta(id=sid, label="x", status=common_pb2.SESSION_STATUS_ACTIVE)
    return {
        "AppendRecords": lambda s: s.AppendRecords(
            storage_pb2.AppendRecordsRequest(space_id=space, session_id=sid, records=[record])
        ),
        "AppendRecords (keyed)": lambda s: s.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space, session_id=sid, records=[record], request_id="late-1"
            )
        ),
        "PutSession": lambda s: s.PutSession(
            storage_pb2.PutSessionRequest(space_id=space, session=meta)
        ),
        "PutMemory": lambda s: s.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space, session_id=sid, content="m")
        ),
        "PutInsight": lambda s: s.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space, session_id=sid, content="i")
        ),
        "PutSystemPrompt": lambda s: s.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(space_id=space, session_id=sid, content="p")
        ),
        "TrimRecords": lambda s: s.TrimRecords(
            storage_pb2.TrimRecordsRequest(space_id=space, session_id=sid, keep_recent=0)
        ),
        "BeginTurn": lambda s: s.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=space, session_id=sid, ttl_s=30)
        ),
        "Transact": lambda s: s.Transact(
            storage_pb2.TransactRequest(
                space_id=space,
                operations=[
                    Op(append_records=Op.AppendRecordsOp(session_id=sid, records=[record])),
                    Op(bump_turn=Op.BumpTurnOp(session_id=sid)),
                ],
            )
        ),
        "Transact (put_session)": lambda s: s.Transact(
            storage_pb2.TransactRequest(
                space_id=space, operations=[Op(put_session=Op.PutSessionOp(session=meta))]
            )
        ),
    }


WRITES = list(writes("", ""))


@pytest.mark.parametrize("name", WRITES)
async def test_a_write_to_a_session_being_erased_is_not_found(
    name: str, stub: Stub, make_session: MakeSession, pool: asyncpg.Pool, space: TestSpace
) -> None:
    """Each write to a session being erased answers NOT_FOUND and changes no row."""
    session = await make_session()
    await pool.execute(
        "UPDATE sessions SET provisional_until = 'infinity' WHERE space_id = $1 AND id = $2",
        space.id,
        session,
    )
    before = await space_rows(pool, space.id)
    call = writes(space.sid, str(session))[name]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(stub)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value.details()
    assert await space_rows(pool, space.id) == before


async def test_a_provisional_session_still_takes_writes(
    stub: Stub, make_session: MakeSession, space: TestSpace
) -> None:
    """A provisional session (a saga's, not yet committed) still takes every write above."""
    session = await make_session(provisional=True)
    for name, call in writes(space.sid, str(session)).items():
        if name != "BeginTurn":  # a lease would block the Transact's turn bump: no matter
            await call(stub)
