"""Bad input: INVALID_ARGUMENT naming each bad field, and nothing changed (DESIGN §2, §7)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.settings import MIB
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rec, rpc_error, state
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
Check = storage_pb2.Precondition
Build = Callable[[str, str], Any]
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE


def meta(session_id: str, **fields: Any) -> common_pb2.SessionMeta:
    values: dict[str, Any] = {"id": session_id, "label": "L", "status": ACTIVE, **fields}
    return common_pb2.SessionMeta(**values)


def case(rpc: str, build: Build, fields: list[str], name: str) -> Any:
    return pytest.param(rpc, build, fields, id=name)


CASES = [
    case(
        "GetSession",
        lambda sp, s: storage_pb2.GetSessionRequest(space_id=sp, session_id="nope"),
        ["session_id"],
        "malformed-session-id",
    ),
    case(
        "GetSession",
        lambda sp, s: storage_pb2.GetSessionRequest(space_id=sp),
        ["session_id"],
        "missing-session-id",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(space_id="x", session_id=s),
        ["space_id"],
        "malformed-space-id",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("ok"), rec("bad", role=0)]
        ),
        ["records[1].role"],
        "unspecified-role",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("bad", role=99)]
        ),
        ["records[0].role"],
        "unknown-role",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("x" * (MIB + 1))]
        ),
        ["records[0]"],
        "record-too-large",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("x")], request_id="r" * 201
        ),
        ["request_id"],
        "request-id-too-long",
    ),
    case(
        "ListRecords",
        lambda sp, s: storage_pb2.ListRecordsRequest(space_id=sp, session_id=s, limit=-1),
        ["limit"],
        "negative-limit",
    ),
    case(
        "ListRecords",
        lambda sp, s: storage_pb2.ListRecordsRequest(space_id=sp, session_id=s, limit=1001),
        ["limit"],
        "limit-over-max",
    ),
    case(
        "ListRecords",
        lambda sp, s: storage_pb2.ListRecordsRequest(
            space_id=sp,
            session_id=s,
            offset=-1,
            role=42,  # type: ignore[arg-type]  # no such RecordRole, on purpose
        ),
        ["offset", "role"],
        "negative-offset-unknown-role",
    ),
    case(
        "TrimRecords",
        lambda sp, s: storage_pb2.TrimRecordsRequest(space_id=sp, session_id=s),
        ["keep_recent"],
        "unset-keep-recent",
    ),
    case(
        "TrimRecords",
        lambda sp, s: storage_pb2.TrimRecordsRequest(space_id=sp, session_id=s, keep_recent=-1),
        ["keep_recent"],
        "negative-keep-recent",
    ),
    case(
        "PutSession",
        lambda sp, s: storage_pb2.PutSessionRequest(space_id=sp),
        ["session"],
        "unset-session",
    ),
    case(
        "PutSession",
        lambda sp, s: storage_pb2.PutSessionRequest(
            space_id=sp, session=meta("bad", label="x" * 201, status=0)
        ),
        ["session.id", "session.label", "session.status"],
        "bad-meta",
    ),
    case(
        "ListSessions",
        lambda sp, s: storage_pb2.ListSessionsRequest(
            space_id=sp,
            page_size=1001,
            status=7,  # type: ignore[arg-type]  # no such SessionStatus, on purpose
        ),
        ["status", "page_size"],
        "page-size-over-max",
    ),
    case(
        "ListSessions",
        lambda sp, s: storage_pb2.ListSessionsRequest(space_id=sp, page_size=-1),
        ["page_size"],
        "negative-page-size",
    ),
    case(
        "PutSystemPrompt",
        lambda sp, s: storage_pb2.PutSystemPromptRequest(
            space_id=sp, session_id=s, content="p" * (MIB + 1)
        ),
        ["content"],
        "slot-too-large",
    ),
    case(
        "PutCompressionCache",
        lambda sp, s: storage_pb2.PutCompressionCacheRequest(space_id=sp, session_id=s),
        ["cache"],
        "unset-cache",
    ),
    case(
        "PutCompressionCache",
        lambda sp, s: storage_pb2.PutCompressionCacheRequest(
            space_id=sp,
            session_id=s,
            cache=storage_pb2.CompressionCache(summary="s", covered_until_seq=-1),
        ),
        ["cache.covered_until_seq"],
        "negative-covered-seq",
    ),
    case(
        "BatchGetSlots",
        lambda sp, s: storage_pb2.BatchGetSlotsRequest(space_id=sp, session_ids=[s, "x"]),
        ["session_ids[1]"],
        "malformed-batch-id",
    ),
    case(
        "BeginTurn",
        lambda sp, s: storage_pb2.BeginTurnRequest(space_id=sp, session_id=s, ttl_s=0),
        ["ttl_s"],
        "zero-ttl",
    ),
    case(
        "BeginTurn",
        lambda sp, s: storage_pb2.BeginTurnRequest(space_id=sp, session_id=s, ttl_s=86_401),
        ["ttl_s"],
        "ttl-over-max",
    ),
    case(
        "ReleaseTurn",
        lambda sp, s: storage_pb2.ReleaseTurnRequest(space_id=sp, session_id=s),
        ["token"],
        "empty-token",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            preconditions=[Check()],
            operations=[
                Op(put_memory=Op.PutMemoryOp(session_id=s, content="m")),
                Op(),
                Op(put_memory=Op.PutMemoryOp(session_id="bad")),
                Op(trim_records=Op.TrimRecordsOp(session_id=s)),
            ],
        ),
        [
            "preconditions[0]",
            "operations[1]",
            "operations[2].put_memory.session_id",
            "operations[3].trim_records.keep_recent",
        ],
        "transact-bad-operations",
    ),
]


class TestInvalidArgument:
    @pytest.mark.parametrize(("rpc", "build", "fields"), CASES)
    async def test_names_the_fields_and_changes_nothing(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        rpc: str,
        build: Build,
        fields: list[str],
    ) -> None:
        """A bad request is INVALID_ARGUMENT naming every bad field, and stores nothing."""
        session_id = await make_session()
        target = {"space_id": space.sid, "session_id": str(session_id)}
        await stub.AppendRecords(storage_pb2.AppendRecordsRequest(**target, records=[rec("kept")]))
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**target, content="kept"))
        before = await state(pool, space.id, session_id)
        err = await rpc_error(getattr(stub, rpc)(build(space.sid, str(session_id))))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == fields
        assert await state(pool, space.id, session_id) == before

    async def test_unknown_session_reports_invalid_input_first(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Validation comes before lookup: a bad role on an unknown session is INVALID_ARGUMENT."""
        err = await rpc_error(
            stub.AppendRecords(
                storage_pb2.AppendRecordsRequest(
                    space_id=space.sid, session_id=str(uuid.uuid4()), records=[rec("x", role=0)]
                )
            )
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
