"""AppendRecords, ListRecords and TrimRecords (STELLO-SPEC §6.1 items 7-12, 16-18; DESIGN §3)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from tests.storage.helpers import ASSISTANT, TOOL, USER, rec, rpc_error
from tests.support.fixtures import MakeSession, ServerStarter, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


async def append(
    stub: Stub,
    space: TestSpace,
    session_id: uuid.UUID,
    records: list[common_pb2.Record],
    request_id: str = "",
) -> list[common_pb2.Record]:
    reply = await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(
            space_id=space.sid, session_id=str(session_id), records=records, request_id=request_id
        )
    )
    return list(reply.records)


async def listed(
    stub: Stub, space: TestSpace, session_id: uuid.UUID, **options: Any
) -> list[common_pb2.Record]:
    reply = await stub.ListRecords(
        storage_pb2.ListRecordsRequest(
            space_id=space.sid,
            session_id=str(session_id),
            **options,
        )
    )
    return list(reply.records)


async def seeded(
    stub: Stub, space: TestSpace, make_session: MakeSession, count: int, prefix: str = "msg"
) -> uuid.UUID:
    session_id = await make_session()
    await append(stub, space, session_id, [rec(f"{prefix}-{i}") for i in range(count)])
    return session_id


class TestAppendRecords:
    async def test_appended_records_list_in_order(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """user "hello" then assistant "hi" list back in order with seqs 1 and 2 (spec §6.1.7)."""
        session_id = await make_session()
        stored = await append(stub, space, session_id, [rec("hello"), rec("hi", ASSISTANT)])
        assert [(r.seq, r.role, r.content) for r in stored] == [
            (1, USER, "hello"),
            (2, ASSISTANT, "hi"),
        ]
        assert await listed(stub, space, session_id) == stored

    async def test_fields_are_kept_as_given(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Tool calls, tool_call_id, metadata and a caller-given created_at are stored as given."""
        session_id = await make_session()
        given = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
        metadata = struct_pb2.Struct()
        metadata.update({"source": "fork", "n": 3})
        call = common_pb2.ToolCall(id="call-1", name="search", arguments_json='{"q": "x"}')
        assistant = rec("", ASSISTANT, tool_calls=[call], metadata=metadata)
        assistant.created_at.FromDatetime(given)
        tool = rec("result", TOOL, tool_call_id="call-1")
        stored = await append(stub, space, session_id, [assistant, tool])
        listed_back = await listed(stub, space, session_id)
        assert listed_back == stored
        first, second = listed_back
        assert list(first.tool_calls) == [call]
        assert first.created_at.ToDatetime(tzinfo=UTC) == given
        assert dict(first.metadata) == {"source": "fork", "n": 3}
        assert not first.HasField("tool_call_id")
        assert second.tool_call_id == "call-1"
        assert not second.tool_calls
        assert not second.HasField("metadata")
        assert second.created_at.ToDatetime(tzinfo=UTC) > given

    async def test_times_just_inside_the_calendar_are_kept(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A created_at one microsecond inside either edge of the calendar is stored and read
        back as given (the edges themselves are refused: tests/storage/test_validation.py)."""
        session_id = await make_session()
        given = [
            datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC),
        ]
        records = [rec(f"at {when.year}") for when in given]
        for record, when in zip(records, given, strict=True):
            record.created_at.FromDatetime(when)
        await append(stub, space, session_id, records)
        back = await listed(stub, space, session_id)
        assert [r.created_at.ToDatetime(tzinfo=UTC) for r in back] == given

    async def test_a_record_stored_at_infinity_still_reads(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A created_at stored as PostgreSQL's infinity or -infinity (as the calendar's edges
        were, before they were refused) reads as those edges: every read of its session
        answered INTERNAL (asyncpg reads them as naive datetimes)."""
        session_id = await make_session()
        await append(stub, space, session_id, [rec("late"), rec("early")])
        edges = {1: "infinity", 2: "-infinity"}
        for seq, value in edges.items():
            await pool.execute(
                "UPDATE records SET created_at = $4::text::timestamptz "
                "WHERE space_id = $1 AND session_id = $2 AND seq = $3",
                space.id,
                session_id,
                seq,
                value,
            )
        back = await listed(stub, space, session_id)
        assert [r.created_at.ToDatetime(tzinfo=UTC) for r in back] == [
            datetime.max.replace(tzinfo=UTC),
            datetime.min.replace(tzinfo=UTC),
        ]

    async def test_empty_list_appends_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """An empty records list answers an empty list and stores nothing."""
        session_id = await make_session()
        assert await append(stub, space, session_id, []) == []
        assert await listed(stub, space, session_id) == []

    @pytest.mark.parametrize("records", [[], [rec("x")]], ids=["empty", "one"])
    async def test_unknown_session_is_not_found(
        self, stub: Stub, space: TestSpace, records: list[common_pb2.Record]
    ) -> None:
        """Appending to a session that does not exist is NOT_FOUND (spec §6.1.26 decided)."""
        err = await rpc_error(append(stub, space, uuid.uuid4(), records))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_fifty_concurrent_appends_get_contiguous_seqs(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """50 parallel appends on one session get seqs 1..50 and every record is kept."""
        session_id = await make_session()
        replies = await asyncio.gather(
            *(append(stub, space, session_id, [rec(f"m{i}")]) for i in range(50))
        )
        seqs = sorted(r[0].seq for r in replies)
        assert seqs == list(range(1, 51))
        stored = await listed(stub, space, session_id)
        assert sorted(r.content for r in stored) == sorted(f"m{i}" for i in range(50))

    async def test_concurrent_batches_stay_contiguous(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Each of 20 parallel 3-record appends gets one contiguous run; together 1..60."""
        session_id = await make_session()
        replies = await asyncio.gather(
            *(
                append(stub, space, session_id, [rec(f"{i}-{j}") for j in range(3)])
                for i in range(20)
            )
        )
        for reply in replies:
            assert [r.seq for r in reply] == list(range(reply[0].seq, reply[0].seq + 3))
            assert [r.content.split("-")[1] for r in reply] == ["0", "1", "2"]
        assert sorted(r.seq for reply in replies for r in reply) == list(range(1, 61))

    async def test_retry_with_same_request_id_appends_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A retried append with the same request_id answers the first reply and appends once."""
        session_id = await make_session()
        first = await append(stub, space, session_id, [rec("once")], request_id="req-1")
        again = await append(stub, space, session_id, [rec("once")], request_id="req-1")
        assert again == first
        assert [r.content for r in await listed(stub, space, session_id)] == ["once"]

    async def test_concurrent_retries_append_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Ten simultaneous copies of one request_id append once and all answer the same."""
        session_id = await make_session()
        replies = await asyncio.gather(
            *(append(stub, space, session_id, [rec("x")], request_id="burst") for _ in range(10))
        )
        assert all(reply == replies[0] for reply in replies)
        assert len(await listed(stub, space, session_id)) == 1

    async def test_reused_request_id_is_already_exists(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The same request_id with a different request is ALREADY_EXISTS REQUEST_ID_REUSED."""
        session_id = await make_session()
        await append(stub, space, session_id, [rec("one")], request_id="req-2")
        err = await rpc_error(append(stub, space, session_id, [rec("two")], request_id="req-2"))
        assert err.code() == grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(err) == "REQUEST_ID_REUSED"
        assert [r.content for r in await listed(stub, space, session_id)] == ["one"]

    async def test_seq_is_never_reused_after_trim(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """After a trim, appends continue the numbering where it was."""
        session_id = await seeded(stub, space, make_session, 3)
        await stub.TrimRecords(
            storage_pb2.TrimRecordsRequest(
                space_id=space.sid, session_id=str(session_id), keep_recent=0
            )
        )
        stored = await append(stub, space, session_id, [rec("next")])
        assert stored[0].seq == 4


M3 = ["msg-0", "msg-1", "msg-2"]


class TestListRecords:
    async def test_no_records_is_empty(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A session with no records lists [] (spec §6.1.8)."""
        assert await listed(stub, space, await make_session()) == []

    async def test_role_filter(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The role filter keeps exactly the user records, in order (spec §6.1.9)."""
        session_id = await make_session()
        await append(stub, space, session_id, [rec("u1"), rec("a", ASSISTANT), rec("u2")])
        users = await listed(stub, space, session_id, role=USER)
        assert [r.content for r in users] == ["u1", "u2"]

    @pytest.mark.parametrize(
        ("count", "options", "expected"),
        [
            pytest.param(5, {"limit": 2}, ["msg-0", "msg-1"], id="limit"),
            pytest.param(4, {"offset": 2}, ["msg-2", "msg-3"], id="offset"),
            pytest.param(5, {"limit": 2, "offset": 1}, ["msg-1", "msg-2"], id="limit-offset"),
            pytest.param(5, {"limit": 0}, [], id="limit-zero"),
            pytest.param(5, {"limit": 2, "newest_first": True}, ["msg-3", "msg-4"], id="newest"),
            pytest.param(
                5,
                {"limit": 2, "offset": 1, "newest_first": True},
                ["msg-2", "msg-3"],
                id="newest-offset",
            ),
            pytest.param(5, {"after_seq": 2}, ["msg-2", "msg-3", "msg-4"], id="after"),
            pytest.param(5, {"before_seq": 3}, ["msg-0", "msg-1"], id="before"),
            pytest.param(
                5,
                {"after_seq": 1, "before_seq": 5, "newest_first": True, "limit": 2},
                ["msg-2", "msg-3"],
                id="bounded-newest",
            ),
            # The int64 extremes are bounds like any other (they overflowed a
            # statement's `$3 + 1`: INTERNAL, found by a 150-example fuzz run);
            # a negative bound is refused (tests/storage/test_validation.py), 0 is
            # the lowest.
            pytest.param(3, {"after_seq": 2**63 - 1}, [], id="after-max"),
            pytest.param(3, {"before_seq": 0}, [], id="before-zero"),
            pytest.param(3, {"after_seq": 0, "before_seq": 2**63 - 1}, M3, id="widest"),
            pytest.param(3, {"before_seq": 0, "newest_first": True}, [], id="zero-newest"),
        ],
    )
    async def test_options(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        count: int,
        options: dict[str, object],
        expected: list[str],
    ) -> None:
        """Filters, offset, limit and newest_first apply in order (spec §6.1.10-12)."""
        session_id = await seeded(stub, space, make_session, count)
        got = await listed(stub, space, session_id, **options)
        assert [r.content for r in got] == expected

    async def test_unset_limit_is_the_maximum_page(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Without a limit at most 1000 records come back, the oldest first."""
        session_id = await seeded(stub, space, make_session, 1005)
        got = await listed(stub, space, session_id)
        assert len(got) == 1000
        assert (got[0].seq, got[-1].seq) == (1, 1000)

    async def test_before_seq_pages_backwards(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """newest_first pages chained by before_seq walk back through every record once."""
        session_id = await seeded(stub, space, make_session, 7)
        pages: list[list[int]] = []
        options: dict[str, object] = {"limit": 3, "newest_first": True}
        while True:
            page = await listed(stub, space, session_id, **options)
            if not page:
                break
            pages.append([r.seq for r in page])
            options["before_seq"] = page[0].seq
        assert pages == [[5, 6, 7], [2, 3, 4], [1]]

    @pytest.mark.parametrize("provisional", [False, True], ids=["unknown", "provisional"])
    async def test_absent_session_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, provisional: bool
    ) -> None:
        """Listing an unknown or provisional session is NOT_FOUND."""
        session_id = await make_session(provisional=True) if provisional else uuid.uuid4()
        err = await rpc_error(listed(stub, space, session_id))
        assert err.code() == grpc.StatusCode.NOT_FOUND


class TestTrimRecords:
    @pytest.mark.parametrize(
        ("count", "keep", "remaining", "removed"),
        [
            pytest.param(4, 2, ["msg-2", "msg-3"], 2, id="keep-two"),
            pytest.param(1, 10, ["msg-0"], 0, id="keep-more-than-all"),
            pytest.param(2, 0, [], 2, id="keep-none"),
        ],
    )
    async def test_keeps_the_newest(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        count: int,
        keep: int,
        remaining: list[str],
        removed: int,
    ) -> None:
        """Trim keeps the newest keep_recent records in order (spec §6.1.16-18)."""
        session_id = await seeded(stub, space, make_session, count)
        reply = await stub.TrimRecords(
            storage_pb2.TrimRecordsRequest(
                space_id=space.sid, session_id=str(session_id), keep_recent=keep
            )
        )
        assert reply.removed_count == removed
        assert [r.content for r in await listed(stub, space, session_id)] == remaining

    @pytest.mark.parametrize(("keep", "cleared"), [(1, True), (5, False)], ids=["trim", "no-op"])
    async def test_clears_the_compression_cache_when_records_go(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, keep: int, cleared: bool
    ) -> None:
        """A trim that removes records clears the cache; a no-op trim keeps it (DESIGN §5.11)."""
        session_id = await seeded(stub, space, make_session, 3)
        await stub.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(
                space_id=space.sid,
                session_id=str(session_id),
                cache=storage_pb2.CompressionCache(summary="s", covered_until_seq=2),
            )
        )
        await stub.TrimRecords(
            storage_pb2.TrimRecordsRequest(
                space_id=space.sid, session_id=str(session_id), keep_recent=keep
            )
        )
        reply = await stub.GetCompressionCache(
            storage_pb2.GetCompressionCacheRequest(space_id=space.sid, session_id=str(session_id))
        )
        assert reply.HasField("cache") is not cleared

    async def test_allowed_on_provisional(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Trim, a write, is accepted on a provisional session."""
        session_id = await make_session(provisional=True)
        await append(stub, space, session_id, [rec("a"), rec("b")])
        reply = await stub.TrimRecords(
            storage_pb2.TrimRecordsRequest(
                space_id=space.sid, session_id=str(session_id), keep_recent=1
            )
        )
        assert reply.removed_count == 1


class TestReplySize:
    async def test_reply_stays_under_the_message_limit(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        start_server: ServerStarter,
    ) -> None:
        """Records past STELLO_MAX_MESSAGE_BYTES come in pages under it (was RESOURCE_EXHAUSTED)."""
        small = await start_server(
            lambda s, p, k: create_app(s.model_copy(update={"max_message_bytes": 4096}), p, k)
        )
        session_id = await make_session()
        await append(stub, space, session_id, [rec("x" * 1000) for _ in range(10)])
        channel = small.channel(space.key)
        seqs: list[int] = []
        token = ""
        try:
            small_stub = storage_pb2_grpc.SessionStorageStub(channel)
            while True:
                reply = await small_stub.ListRecords(
                    storage_pb2.ListRecordsRequest(
                        space_id=space.sid, session_id=str(session_id), page_token=token
                    )
                )
                assert 0 < reply.ByteSize() <= 4096 // 2
                seqs += [r.seq for r in reply.records]
                token = reply.next_page_token
                if not token:
                    break
        finally:
            await channel.close()
        assert seqs == list(range(1, 11))
