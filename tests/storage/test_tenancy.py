"""Tenancy and provisioning: a session of another space, a provisional one (DESIGN §4.1, §5.1)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.conftest import StubFor
from tests.storage.helpers import rec, rpc_error, state
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Build = Callable[[str, str], Any]
Op = storage_pb2.Operation
Check = storage_pb2.Precondition

# Every RPC that names one session, with a valid request for (space_id, session_id).
READS: dict[str, Build] = {
    "GetSession": lambda sp, s: storage_pb2.GetSessionRequest(space_id=sp, session_id=s),
    "GetSession with slots": lambda sp, s: storage_pb2.GetSessionRequest(
        space_id=sp, session_id=s, slots=[storage_pb2.SLOT_KIND_MEMORY]
    ),
    "ListRecords": lambda sp, s: storage_pb2.ListRecordsRequest(space_id=sp, session_id=s),
    "GetSystemPrompt": lambda sp, s: storage_pb2.GetSystemPromptRequest(space_id=sp, session_id=s),
    "GetInsight": lambda sp, s: storage_pb2.GetInsightRequest(space_id=sp, session_id=s),
    "ConsumeInsight": lambda sp, s: storage_pb2.ConsumeInsightRequest(space_id=sp, session_id=s),
    "GetMemory": lambda sp, s: storage_pb2.GetMemoryRequest(space_id=sp, session_id=s),
    "GetCompressionCache": lambda sp, s: storage_pb2.GetCompressionCacheRequest(
        space_id=sp, session_id=s
    ),
    "GetSession with progress": lambda sp, s: storage_pb2.GetSessionRequest(
        space_id=sp, session_id=s, progress=True
    ),
    "ClaimJob": lambda sp, s: storage_pb2.ClaimJobRequest(
        space_id=sp, session_id=s, kind=common_pb2.JOB_KIND_CONSOLIDATE, ttl_s=5
    ),
}
WRITES: dict[str, Build] = {
    "PutSession": lambda sp, s: storage_pb2.PutSessionRequest(
        space_id=sp,
        session=common_pb2.SessionMeta(id=s, label="X", status=common_pb2.SESSION_STATUS_ACTIVE),
    ),
    "AppendRecords": lambda sp, s: storage_pb2.AppendRecordsRequest(
        space_id=sp, session_id=s, records=[rec("x")]
    ),
    "TrimRecords": lambda sp, s: storage_pb2.TrimRecordsRequest(
        space_id=sp, session_id=s, keep_recent=0
    ),
    "PutSystemPrompt": lambda sp, s: storage_pb2.PutSystemPromptRequest(
        space_id=sp, session_id=s, content="x"
    ),
    "PutInsight": lambda sp, s: storage_pb2.PutInsightRequest(
        space_id=sp, session_id=s, content="x"
    ),
    "ClearInsight": lambda sp, s: storage_pb2.ClearInsightRequest(space_id=sp, session_id=s),
    "PutMemory": lambda sp, s: storage_pb2.PutMemoryRequest(space_id=sp, session_id=s, content="x"),
    "PutCompressionCache": lambda sp, s: storage_pb2.PutCompressionCacheRequest(
        space_id=sp, session_id=s, cache=storage_pb2.CompressionCache(summary="x")
    ),
    "BeginTurn": lambda sp, s: storage_pb2.BeginTurnRequest(space_id=sp, session_id=s, ttl_s=5),
    "ReleaseTurn": lambda sp, s: storage_pb2.ReleaseTurnRequest(
        space_id=sp, session_id=s, token=str(uuid.uuid4())
    ),
    "RenewTurn": lambda sp, s: storage_pb2.RenewTurnRequest(
        space_id=sp, session_id=s, token=str(uuid.uuid4()), ttl_s=5
    ),
    "LeaveTurnQueue": lambda sp, s: storage_pb2.LeaveTurnQueueRequest(
        space_id=sp, session_id=s, waiter=str(uuid.uuid4())
    ),
    "RenewJob": lambda sp, s: storage_pb2.RenewJobRequest(
        space_id=sp, session_id=s, kind=common_pb2.JOB_KIND_FOLD, token=str(uuid.uuid4()), ttl_s=5
    ),
    "Transact": lambda sp, s: storage_pb2.TransactRequest(
        space_id=sp,
        operations=[Op(append_records=Op.AppendRecordsOp(session_id=s, records=[rec("x")]))],
    ),
    "TransactPrecondition": lambda sp, s: storage_pb2.TransactRequest(
        space_id=sp,
        preconditions=[Check(session_last_seq=Check.SessionLastSeqCheck(session_id=s))],
    ),
}
EVERY = {**READS, **WRITES}


def method(stub: Stub, name: str) -> Any:
    return getattr(stub, name.split()[0].removesuffix("Precondition"))


async def seed_foreign(stub_for: StubFor, owner: TestSpace, session_id: uuid.UUID) -> None:
    """Give the other space's session data of every kind, written by its own key."""
    other = stub_for(owner.key)
    target: dict[str, Any] = {"space_id": owner.sid, "session_id": str(session_id)}
    await other.AppendRecords(storage_pb2.AppendRecordsRequest(**target, records=[rec("secret")]))
    await other.PutSystemPrompt(storage_pb2.PutSystemPromptRequest(**target, content="p"))
    await other.PutInsight(storage_pb2.PutInsightRequest(**target, content="i"))
    await other.PutMemory(storage_pb2.PutMemoryRequest(**target, content="m"))


class TestOtherSpace:
    @pytest.mark.parametrize("name", list(EVERY))
    @pytest.mark.parametrize("addressed", ["own-space", "other-space"])
    async def test_every_rpc_is_not_found_and_changes_nothing(
        self,
        stub: Stub,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        name: str,
        addressed: str,
    ) -> None:
        """Another space's session is NOT_FOUND on every RPC and stays exactly as it was."""
        foreign = await make_session(space_id=other_space.id)
        await seed_foreign(stub_for, other_space, foreign)
        before = await state(pool, other_space.id, foreign)
        space_id = space.sid if addressed == "own-space" else other_space.sid
        err = await rpc_error(method(stub, name)(EVERY[name](space_id, str(foreign))))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert "secret" not in (err.details() or "")
        assert await state(pool, other_space.id, foreign) == before

    async def test_batch_get_slots_leaves_it_out(
        self,
        stub: Stub,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        """BatchGetSlots answers nothing for another space's session, never its slots."""
        foreign = await make_session(space_id=other_space.id)
        await seed_foreign(stub_for, other_space, foreign)
        reply = await stub.BatchGetSlots(
            storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=[str(foreign)])
        )
        assert list(reply.slots) == []


class TestProvisional:
    @pytest.mark.parametrize("name", list(READS))
    async def test_reads_are_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, name: str
    ) -> None:
        """Every read of a provisional session answers NOT_FOUND, as if it did not exist."""
        sid = str(await make_session(provisional=True))
        err = await rpc_error(method(stub, name)(READS[name](space.sid, sid)))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("name", list(WRITES))
    async def test_writes_are_accepted(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, name: str
    ) -> None:
        """Every write to a provisional session is accepted (the fork saga writes before commit)."""
        sid = str(await make_session(provisional=True))
        await method(stub, name)(WRITES[name](space.sid, sid))

    async def test_left_out_of_batch_get_slots(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """BatchGetSlots leaves a provisional session out even after writes to it."""
        sid = str(await make_session(provisional=True))
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="m")
        )
        reply = await stub.BatchGetSlots(
            storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=[sid])
        )
        assert list(reply.slots) == []
