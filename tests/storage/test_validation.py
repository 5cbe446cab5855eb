"""Bad input: INVALID_ARGUMENT naming each bad field, and nothing changed (DESIGN §2, §7)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, cast

import asyncpg
import grpc
import pytest
from google.protobuf import timestamp_pb2

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.settings import MIB
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import ASSISTANT, TOOL, USER, rec, rpc_error, state
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object, nested_struct

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Op = storage_pb2.Operation
Check = storage_pb2.Precondition
Build = Callable[[str, str], Any]
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ToolCall = common_pb2.ToolCall


def meta(session_id: str, **fields: Any) -> common_pb2.SessionMeta:
    values: dict[str, Any] = {"id": session_id, "label": "L", "status": ACTIVE, **fields}
    return common_pb2.SessionMeta(**values)


def case(rpc: str, build: Build, fields: list[str], name: str) -> Any:
    return pytest.param(rpc, build, fields, id=name)


# The first and the last microsecond of the calendar: stored, they became PostgreSQL's
# -infinity and infinity, and every read of the record failed INTERNAL.
FIRST_INSTANT = timestamp_pb2.Timestamp(seconds=-62_135_596_800)
LAST_INSTANT = timestamp_pb2.Timestamp(seconds=253_402_300_799, nanos=999_999_000)


def dated(when: timestamp_pb2.Timestamp) -> common_pb2.Record:
    record = rec("dated")
    record.created_at.CopyFrom(when)
    return record


CASES = [
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("ok"), dated(LAST_INSTANT)]
        ),
        ["records[1].created_at"],
        "created-at-the-last-instant",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(append_records=Op.AppendRecordsOp(session_id=s, records=[dated(FIRST_INSTANT)]))
            ],
        ),
        ["operations[0].append_records.records[0].created_at"],
        "transact-created-at-the-first-instant",
    ),
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
        "GetSession",
        lambda sp, s: storage_pb2.GetSessionRequest(
            space_id=sp,
            session_id=s,
            slots=[
                storage_pb2.SLOT_KIND_MEMORY,
                storage_pb2.SLOT_KIND_UNSPECIFIED,
                cast(storage_pb2.SlotKind, 9),
            ],
        ),
        ["slots[1]", "slots[2]"],
        "unspecified-and-unknown-slot-kind",
    ),
    case(
        "GetSession",
        lambda sp, s: storage_pb2.GetSessionRequest(
            space_id=sp, session_id="y", slots=[storage_pb2.SLOT_KIND_UNSPECIFIED]
        ),
        ["session_id", "slots[0]"],
        "malformed-id-and-slot-kind",
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
        "ListRecords",
        lambda sp, s: storage_pb2.ListRecordsRequest(
            space_id=sp, session_id=s, after_seq=-1, before_seq=-1
        ),
        ["after_seq", "before_seq"],
        "negative-seq-bounds",
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
        "RenewTurn",
        lambda sp, s: storage_pb2.RenewTurnRequest(space_id=sp, session_id=s, ttl_s=0),
        ["token", "ttl_s"],
        "empty-token-zero-ttl",
    ),
    case(
        "RenewTurn",
        lambda sp, s: storage_pb2.RenewTurnRequest(
            space_id=sp, session_id=s, token="t", ttl_s=86_401
        ),
        ["ttl_s"],
        "ttl-over-max",
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
    # U+0000 in any text field: PostgreSQL text cannot hold it.
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec("a\x00b"),
                rec(
                    "", ASSISTANT, tool_calls=[ToolCall(id="c\x00", name="n", arguments_json="{}")]
                ),
                rec("r", TOOL, tool_call_id="c\x00"),
                rec("", ASSISTANT, tool_calls=[ToolCall(id="c", name="n\x00")]),
                rec(
                    "",
                    ASSISTANT,
                    tool_calls=[ToolCall(id="c", name="n", arguments_json='{"a":"\x00"}')],
                ),
            ],
        ),
        [
            "records[0].content",
            "records[1].tool_calls[0].id",
            "records[2].tool_call_id",
            "records[3].tool_calls[0].name",
            "records[4].tool_calls[0].arguments_json",
        ],
        "nul-in-records",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("x")], request_id="r\x00"
        ),
        ["request_id"],
        "nul-in-request-id",
    ),
    case(
        "PutSession",
        lambda sp, s: storage_pb2.PutSessionRequest(space_id=sp, session=meta(s, label="L\x00")),
        ["session.label"],
        "nul-in-label",
    ),
    case(
        "PutInsight",
        lambda sp, s: storage_pb2.PutInsightRequest(space_id=sp, session_id=s, content="\x00"),
        ["content"],
        "nul-in-slot",
    ),
    case(
        "GetRememberedResult",
        lambda sp, s: storage_pb2.GetRememberedResultRequest(
            space_id=sp, scope="agent.\x00", request_id="r"
        ),
        ["scope"],
        "nul-in-scope",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(put_memory=Op.PutMemoryOp(session_id=s, content="ok")),
                Op(put_system_prompt=Op.PutSystemPromptOp(session_id=s, content="p\x00")),
            ],
        ),
        ["operations[1].put_system_prompt.content"],
        "nul-in-transact",
    ),
    # Finding 5: a Struct deeper than 16 levels would poison every later read of the record.
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp, session_id=s, records=[rec("deep", metadata=nested_struct(17))]
        ),
        ["records[0].metadata"],
        "metadata-17-levels",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(
                    append_records=Op.AppendRecordsOp(
                        session_id=s, records=[rec("deep", metadata=nested_struct(32))]
                    )
                )
            ],
        ),
        ["operations[0].append_records.records[0].metadata"],
        "transact-metadata-32-levels",
    ),
    # Finding 10: arguments_json is a JSON object text (common.proto).
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec(
                    "",
                    ASSISTANT,
                    tool_calls=[
                        ToolCall(id="a", name="n", arguments_json="not json"),
                        ToolCall(id="b", name="n", arguments_json="[1,2]"),
                        ToolCall(id="c", name="n", arguments_json='"text"'),
                    ],
                )
            ],
        ),
        [
            "records[0].tool_calls[0].arguments_json",
            "records[0].tool_calls[1].arguments_json",
            "records[0].tool_calls[2].arguments_json",
        ],
        "arguments-not-an-object",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(
                    append_records=Op.AppendRecordsOp(
                        session_id=s,
                        records=[
                            rec(
                                "",
                                ASSISTANT,
                                tool_calls=[ToolCall(id="a", name="n", arguments_json="[]")],
                            )
                        ],
                    )
                )
            ],
        ),
        ["operations[0].append_records.records[0].tool_calls[0].arguments_json"],
        "transact-arguments-not-an-object",
    ),
    # A tool call without an id was stored, and no tool result could ever answer it
    # (SubmitToolResults requires the id); one without a name too (ImportSession refused it).
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec("", ASSISTANT, tool_calls=[ToolCall(id="a", name="n"), ToolCall(name="n")]),
                rec("", ASSISTANT, tool_calls=[ToolCall(id="b")]),
            ],
        ),
        ["records[0].tool_calls[1].id", "records[1].tool_calls[0].name"],
        "tool-call-without-id-or-name",
    ),
    # A TOOL record without the call it answers, a call on a record that is no ASSISTANT's,
    # an answer's id on one that is no TOOL record: each was stored, and every later turn of
    # the session sent the model a message its API refuses (a tool message without its
    # tool_call_id; tool_calls on a user message) — the session could not be continued.
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec("", ASSISTANT, tool_calls=[ToolCall(id="a", name="n")]),
                rec("result", TOOL),
                rec("hi", USER, tool_calls=[ToolCall(id="b", name="n")]),
                rec("hi", ASSISTANT, tool_call_id="a"),
                rec("result", TOOL, tool_call_id=""),
            ],
        ),
        [
            "records[1].tool_call_id",
            "records[2].tool_calls",
            "records[3].tool_call_id",
            "records[4].tool_call_id",
        ],
        "tool-fields-on-the-wrong-role",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(append_records=Op.AppendRecordsOp(session_id=s, records=[rec("r", TOOL)]))
            ],
        ),
        ["operations[0].append_records.records[0].tool_call_id"],
        "transact-tool-record-without-its-call",
    ),
    # A negative expected last seq can never hold (seqs start at 1, 0 = none appended): it
    # was ABORTED as a failed check, as if the session had moved on.
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            preconditions=[
                Check(session_last_seq=Check.SessionLastSeqCheck(session_id=s, expected=-1))
            ],
            operations=[Op(append_records=Op.AppendRecordsOp(session_id=s, records=[rec("r")]))],
        ),
        ["preconditions[0].session_last_seq.expected"],
        "transact-negative-last-seq",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(
                    append_records=Op.AppendRecordsOp(
                        session_id=s, records=[rec("", ASSISTANT, tool_calls=[ToolCall()])]
                    )
                )
            ],
        ),
        [
            "operations[0].append_records.records[0].tool_calls[0].id",
            "operations[0].append_records.records[0].tool_calls[0].name",
        ],
        "transact-tool-call-without-id-or-name",
    ),
    # Python's json raised RecursionError (INTERNAL) past ~1000 levels, and read NaN,
    # Infinity and 1e999 (inf), which JSON has not: none is a JSON object text.
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec(
                    "",
                    ASSISTANT,
                    tool_calls=[ToolCall(id="a", name="n", arguments_json=deep_json_object(1000))],
                )
            ],
        ),
        ["records[0].tool_calls[0].arguments_json"],
        "arguments-too-deep",
    ),
    case(
        "AppendRecords",
        lambda sp, s: storage_pb2.AppendRecordsRequest(
            space_id=sp,
            session_id=s,
            records=[
                rec(
                    "",
                    ASSISTANT,
                    tool_calls=[
                        ToolCall(id=f"c{i}", name="n", arguments_json=text)
                        for i, text in enumerate(NOT_STRICT_JSON)
                    ],
                )
            ],
        ),
        [f"records[0].tool_calls[{i}].arguments_json" for i in range(len(NOT_STRICT_JSON))],
        "arguments-not-strict-json",
    ),
    case(
        "Transact",
        lambda sp, s: storage_pb2.TransactRequest(
            space_id=sp,
            operations=[
                Op(
                    append_records=Op.AppendRecordsOp(
                        session_id=s,
                        records=[
                            rec(
                                "",
                                ASSISTANT,
                                tool_calls=[
                                    ToolCall(
                                        id="a", name="n", arguments_json=deep_json_object(1000)
                                    )
                                ],
                            )
                        ],
                    )
                )
            ],
        ),
        ["operations[0].append_records.records[0].tool_calls[0].arguments_json"],
        "transact-arguments-too-deep",
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
        target: dict[str, Any] = {"space_id": space.sid, "session_id": str(session_id)}
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


class TestEnumValues:
    async def test_an_unknown_number_lists_the_values(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A role or slot kind no enum has names the values (they said "must be a record
        role, got unknown value 42", "must be a SlotKind other than UNSPECIFIED, got 9")."""
        sid = str(await make_session())
        listed = storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=sid, role=42)  # type: ignore[arg-type]  # no such RecordRole, on purpose
        slots = storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=[sid], slots=[9])  # type: ignore[list-item]  # no such SlotKind, on purpose
        found = [
            [(v.field, v.description) for v in field_violations(await rpc_error(call))]
            for call in (stub.ListRecords(listed), stub.BatchGetSlots(slots))
        ]
        assert found == [
            [("role", "must be one of system, user, assistant, tool, got 42")],
            [("slots[0]", "must be one of system_prompt, memory, insight, got 9")],
        ]

    async def test_status_order_and_job_kind_in_the_words_clients_write(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session status, a search order, a job kind or a run's end no enum has is told
        in the words clients write (they said "must be ACTIVE or ARCHIVED, got UNSPECIFIED",
        "must be NEWEST or RELEVANCE, got unknown value 7", "must be a job kind
        (JOB_KIND_CONSOLIDATE, JOB_KIND_FOLD)", "(DONE, BUDGET_SPENT, ...)")."""
        sid = str(await make_session())
        ended = Op(
            update_job=Op.UpdateJobOp(
                session_id=sid,
                kind=common_pb2.JOB_KIND_FOLD,
                token="t",
                release=True,
                status=common_pb2.JOB_STATUS_RUNNING,
            )
        )
        calls = [
            stub.ListSessions(storage_pb2.ListSessionsRequest(space_id=space.sid, status=9)),  # type: ignore[arg-type]  # no such SessionStatus, on purpose
            stub.PutSession(
                storage_pb2.PutSessionRequest(space_id=space.sid, session=meta(sid, status=0))
            ),
            stub.SearchRecords(
                storage_pb2.SearchRecordsRequest(space_id=space.sid, query="q", order=7)  # type: ignore[arg-type]  # no such SearchOrder, on purpose
            ),
            stub.ClaimJob(
                storage_pb2.ClaimJobRequest(space_id=space.sid, session_id=sid, kind=5, ttl_s=5)  # type: ignore[arg-type]  # no such JobKind, on purpose
            ),
            stub.Transact(storage_pb2.TransactRequest(space_id=space.sid, operations=[ended])),
        ]
        found = [
            [(v.field, v.description) for v in field_violations(await rpc_error(call))]
            for call in calls
        ]
        assert found == [
            [("status", "must be one of active, archived, got 9")],
            [("session.status", "must be one of active, archived, got none (unset)")],
            [("order", "must be one of newest, relevance, got 7")],
            [("kind", "must be one of consolidate, fold, got 5")],
            [
                (
                    "operations[0].update_job.status",
                    "must be one of done, budget_spent, stopped, failed, got running (a "
                    "released run says how it ended)",
                )
            ],
        ]


class TestAccepted:
    """The edges of what is stored: the limits themselves pass, and read back unchanged."""

    async def test_sixteen_level_metadata_and_object_arguments(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """16-level metadata and object (or empty) arguments_json are stored and read back."""
        session_id = str(await make_session())
        calls = [
            ToolCall(id="a", name="n", arguments_json='{"q": [1, {"r": null}]}'),
            ToolCall(id="b", name="n", arguments_json=""),
        ]
        records = [
            rec("deep", metadata=nested_struct(16)),
            rec("", ASSISTANT, tool_calls=calls),
        ]
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid, session_id=session_id, records=records
            )
        )
        reply = await stub.ListRecords(
            storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=session_id)
        )
        assert reply.records[0].metadata == records[0].metadata
        assert list(reply.records[1].tool_calls) == calls

    async def test_not_found_names_no_internals(self, stub: Stub, space: TestSpace) -> None:
        """An unknown session is a plain NOT_FOUND naming it (finding 11: no service internals)."""
        missing = str(uuid.uuid4())
        err = await rpc_error(
            stub.GetSession(storage_pb2.GetSessionRequest(space_id=space.sid, session_id=missing))
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert err.details() == f"session {missing} not found"
