"""The space outbox from storage's side (DESIGN §4.6): events written by changes, ReadEvents."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_purger
from storage_service.config import StorageSettings
from storage_service.unit import UnitOfWork
from tests.storage.conftest import StubFor
from tests.storage.helpers import rec, rpc_error
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.history import waiting_on_a_lock

pytestmark = pytest.mark.sql

Kind = common_pb2.EventKind
Stub = storage_pb2_grpc.SessionStorageStub


async def read(
    stub: Stub, space: TestSpace, after: int | None = 0
) -> storage_pb2.ReadEventsResponse:
    """ReadEvents of the space after `after`."""
    request = storage_pb2.ReadEventsRequest(space_id=space.sid)
    if after is not None:
        request.after_position = after
    reply: storage_pb2.ReadEventsResponse = await stub.ReadEvents(request)
    return reply


def shape(event: common_pb2.SpaceEvent) -> tuple[Any, ...]:
    """What an event says, without its cursor and time."""
    return (
        Kind.Name(event.kind),
        event.session_id,
        event.first_seq if event.HasField("first_seq") else None,
        event.last_seq if event.HasField("last_seq") else None,
    )


class TestWrites:
    async def test_each_storage_write_writes_its_event(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Appends, trims, slot puts, clears, label/status and a turn each write one event."""
        sid = str(await make_session())
        ids: dict[str, Any] = {"space_id": space.sid, "session_id": sid}
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(**ids, records=[rec("a"), rec("b"), rec("c")])
        )
        await stub.TrimRecords(storage_pb2.TrimRecordsRequest(**ids, keep_recent=1))
        await stub.PutSystemPrompt(storage_pb2.PutSystemPromptRequest(**ids, content="p"))
        await stub.PutInsight(storage_pb2.PutInsightRequest(**ids, content="i"))
        await stub.ConsumeInsight(storage_pb2.ConsumeInsightRequest(**ids))
        await stub.ClearInsight(storage_pb2.ClearInsightRequest(**ids))  # nothing left: no event
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**ids, content="m"))
        meta = common_pb2.SessionMeta(
            id=sid, label="renamed", status=common_pb2.SESSION_STATUS_ACTIVE
        )
        await stub.PutSession(storage_pb2.PutSessionRequest(space_id=space.sid, session=meta))
        bump = storage_pb2.Operation(bump_turn=storage_pb2.Operation.BumpTurnOp(session_id=sid))
        await stub.Transact(storage_pb2.TransactRequest(space_id=space.sid, operations=[bump]))
        reply = await read(stub, space)
        assert [shape(e) for e in reply.events] == [
            ("EVENT_KIND_RECORDS_APPENDED", sid, 1, 3),
            ("EVENT_KIND_RECORDS_TRIMMED", sid, 1, 2),
            ("EVENT_KIND_SYSTEM_PROMPT_PUT", sid, None, None),
            ("EVENT_KIND_INSIGHT_PUT", sid, None, None),
            ("EVENT_KIND_INSIGHT_CLEARED", sid, None, None),
            ("EVENT_KIND_MEMORY_PUT", sid, None, None),
            ("EVENT_KIND_SESSION_UPDATED", sid, None, None),
            ("EVENT_KIND_TURN_COMMITTED", sid, None, None),
        ]
        assert [e.cursor for e in reply.events] == [str(n) for n in range(1, 9)]
        assert reply.last_position == 8

    async def test_provisional_sessions_write_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Writes to a provisional session (the saga's Transact) produce no event."""
        sid = str(await make_session(provisional=True))
        ids = {"space_id": space.sid, "session_id": sid}
        await stub.AppendRecords(storage_pb2.AppendRecordsRequest(**ids, records=[rec("a")]))
        await stub.PutSystemPrompt(storage_pb2.PutSystemPromptRequest(**ids, content="p"))
        assert list((await read(stub, space)).events) == []

    async def test_a_failed_transact_writes_nothing(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A Transact whose precondition fails (rolled back) leaves no event and no position."""
        sid = str(await make_session())
        append = storage_pb2.Operation(
            append_records=storage_pb2.Operation.AppendRecordsOp(session_id=sid, records=[rec("a")])
        )
        check = storage_pb2.Precondition(
            session_last_seq=storage_pb2.Precondition.SessionLastSeqCheck(
                session_id=sid, expected=7
            )
        )
        request = storage_pb2.TransactRequest(
            space_id=space.sid, preconditions=[check], operations=[append]
        )
        assert (await rpc_error(stub.Transact(request))).code() == grpc.StatusCode.ABORTED
        reply = await read(stub, space)
        assert (list(reply.events), reply.last_position) == ([], 0)

    async def test_an_open_transaction_never_lets_a_reader_skip_it(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """A held, B committed and read, then A committed: A comes after B, never skipped."""
        a, b = str(await make_session()), str(await make_session())
        async with pool.acquire() as con:
            tx = con.transaction()
            await tx.start()
            uow = UnitOfWork(con)  # type: ignore[arg-type]
            await uow.slots.put(space.id, uuid.UUID(a), "memory", "held")
            await stub.PutMemory(
                storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=b, content="b")
            )
            seen = await read(stub, space)
            assert [e.session_id for e in seen.events] == [b]
            await uow.outbox.flush(con)  # type: ignore[arg-type]  # A's last statement takes the next position
            await tx.commit()
        after_b = await read(stub, space, int(seen.events[-1].cursor))
        assert [(e.session_id, e.cursor) for e in after_b.events] == [(a, "2")]

    async def test_a_flushed_transaction_holds_later_writers_until_it_commits(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Once A took its position, B's commit waits for A's: positions follow commit order."""
        a, b = str(await make_session()), str(await make_session())
        async with pool.acquire() as con:
            tx = con.transaction()
            await tx.start()
            uow = UnitOfWork(con)  # type: ignore[arg-type]
            await uow.slots.put(space.id, uuid.UUID(a), "memory", "first")
            await uow.outbox.flush(con)  # type: ignore[arg-type]
            put_b = asyncio.ensure_future(
                stub.PutMemory(
                    storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=b, content="b")
                )
            )
            await until_waiting(pool, put_b)
            assert not put_b.done()
            assert list((await read(stub, space)).events) == []
            await tx.commit()
        await put_b
        reply = await read(stub, space)
        assert [(e.session_id, e.cursor) for e in reply.events] == [(a, "1"), (b, "2")]


async def until_waiting(pool: asyncpg.Pool, call: asyncio.Future[Any]) -> None:
    """Until a backend of the database waits on a lock (a write the test holds back), or
    `call` ended (it did not wait)."""
    async with pool.acquire() as watcher, asyncio.timeout(10):
        while True:
            if await waiting_on_a_lock(cast(asyncpg.Connection, watcher)) or call.done():
                break
            await asyncio.sleep(0.01)


class TestReadEvents:
    async def test_pages_resume_after_their_last_cursor(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Unset after_position answers only the newest position; pages chain by cursor."""
        sid = str(await make_session())
        for n in range(5):
            await stub.AppendRecords(
                storage_pb2.AppendRecordsRequest(
                    space_id=space.sid, session_id=sid, records=[rec(str(n))]
                )
            )
        now = await read(stub, space, None)
        assert (list(now.events), now.last_position) == ([], 5)
        first = await stub.ReadEvents(
            storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=0, limit=2)
        )
        second = await stub.ReadEvents(
            storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=2, limit=10)
        )
        assert [e.first_seq for e in (*first.events, *second.events)] == [1, 2, 3, 4, 5]

    async def test_a_limit_of_zero_reads_no_event_but_checks_the_cursor(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """`limit` is optional, so 0 is not unset (500): it answers no events and the newest
        position, and the cursor is still checked (one beyond the space is INVALID_ARGUMENT),
        as the proto comment says."""
        sid = str(await make_session())
        for n in range(3):
            await stub.AppendRecords(
                storage_pb2.AppendRecordsRequest(
                    space_id=space.sid, session_id=sid, records=[rec(str(n))]
                )
            )
        zero = await stub.ReadEvents(
            storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=0, limit=0)
        )
        assert (list(zero.events), zero.last_position) == ([], 3)
        assert [e.first_seq for e in (await read(stub, space, 0)).events] == [1, 2, 3]
        error = await rpc_error(
            stub.ReadEvents(
                storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=4, limit=0)
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["after_position"]

    async def test_another_space_sees_nothing(
        self,
        stub: Stub,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        """Events of one space are invisible in another, and its key cannot read them."""
        sid = str(await make_session())
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="m")
        )
        assert list((await read(stub_for(other_space.key), other_space)).events) == []
        error = await rpc_error(
            stub_for(other_space.key).ReadEvents(
                storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=0)
            )
        )
        assert error.code() == grpc.StatusCode.NOT_FOUND

    async def test_a_cursor_beyond_the_space_is_invalid(self, stub: Stub, space: TestSpace) -> None:
        """A position the space never reached is INVALID_ARGUMENT naming after_position."""
        error = await rpc_error(read(stub, space, 5))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["after_position"]

    async def test_purged_events_expire_older_cursors(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, pool: asyncpg.Pool
    ) -> None:
        """Past retention the purge drops events; a cursor before them is CURSOR_EXPIRED."""
        sid = str(await make_session())
        ids: dict[str, Any] = {"space_id": space.sid, "session_id": sid}
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**ids, content="old"))
        await asyncio.sleep(0.05)
        purger = create_purger(pool, StorageSettings(event_retention_s=0.01))
        assert (await purger.run_once() or 0) >= 1
        await stub.PutMemory(storage_pb2.PutMemoryRequest(**ids, content="new"))
        error = await rpc_error(read(stub, space, 0))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "CURSOR_EXPIRED"
        assert [e.cursor for e in (await read(stub, space, 1)).events] == ["2"]
