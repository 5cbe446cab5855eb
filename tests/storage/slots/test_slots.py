"""Slots, ConsumeInsight, the compression cache and BatchGetSlots (spec §6.1 items 13-15)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from tests.storage.helpers import rec, rpc_error
from tests.support.fixtures import MakeSession, ServerStarter, TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub


@dataclass(frozen=True)
class Slot:
    """How to read and write one slot through the stub."""

    name: str
    get: Callable[[Stub, str, str], Awaitable[Any]]
    put: Callable[[Stub, str, str, str], Awaitable[Any]]


SLOTS = [
    Slot(
        "system_prompt",
        lambda s, sp, sid: s.GetSystemPrompt(
            storage_pb2.GetSystemPromptRequest(space_id=sp, session_id=sid)
        ),
        lambda s, sp, sid, c: s.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(space_id=sp, session_id=sid, content=c)
        ),
    ),
    Slot(
        "insight",
        lambda s, sp, sid: s.GetInsight(storage_pb2.GetInsightRequest(space_id=sp, session_id=sid)),
        lambda s, sp, sid, c: s.PutInsight(
            storage_pb2.PutInsightRequest(space_id=sp, session_id=sid, content=c)
        ),
    ),
    Slot(
        "memory",
        lambda s, sp, sid: s.GetMemory(storage_pb2.GetMemoryRequest(space_id=sp, session_id=sid)),
        lambda s, sp, sid, c: s.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=sp, session_id=sid, content=c)
        ),
    ),
]


async def batch(stub: Stub, space: TestSpace, ids: list[str]) -> list[storage_pb2.SessionSlots]:
    reply = await stub.BatchGetSlots(
        storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=ids)
    )
    return list(reply.slots)


@pytest.mark.parametrize("slot", SLOTS, ids=[s.name for s in SLOTS])
class TestSlots:
    async def test_unset_then_put_then_overwrite(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, slot: Slot
    ) -> None:
        """A slot reads unset until put, then the value, then the newer value (spec §6.1.13-15)."""
        sid = str(await make_session())
        assert not (await slot.get(stub, space.sid, sid)).HasField("content")
        await slot.put(stub, space.sid, sid, "first")
        assert (await slot.get(stub, space.sid, sid)).content == "first"
        await slot.put(stub, space.sid, sid, "second")
        assert (await slot.get(stub, space.sid, sid)).content == "second"

    async def test_empty_string_is_distinct_from_unset(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, slot: Slot
    ) -> None:
        """A stored "" reads back set and empty, here and in BatchGetSlots; others stay unset."""
        sid = str(await make_session())
        await slot.put(stub, space.sid, sid, "")
        reply = await slot.get(stub, space.sid, sid)
        assert reply.HasField("content")
        assert reply.content == ""
        (slots,) = await batch(stub, space, [sid])
        for other in SLOTS:
            assert slots.HasField(other.name) is (other.name == slot.name)
        assert getattr(slots, slot.name) == ""

    async def test_read_of_unknown_session_is_not_found(
        self, stub: Stub, space: TestSpace, slot: Slot
    ) -> None:
        """Reading a slot of a session that does not exist is NOT_FOUND, not unset (DESIGN §5.1)."""
        err = await rpc_error(slot.get(stub, space.sid, str(uuid.uuid4())))
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_write_of_unknown_session_is_not_found(
        self, stub: Stub, space: TestSpace, slot: Slot
    ) -> None:
        """Writing a slot of a session that does not exist is NOT_FOUND."""
        err = await rpc_error(slot.put(stub, space.sid, str(uuid.uuid4()), "x"))
        assert err.code() == grpc.StatusCode.NOT_FOUND


class TestInsight:
    async def test_clear_then_unset(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """After ClearInsight the insight reads unset; clearing again is a no-op (spec §6.1.14)."""
        sid = str(await make_session())
        await stub.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=sid, content="i")
        )
        for _ in range(2):
            await stub.ClearInsight(
                storage_pb2.ClearInsightRequest(space_id=space.sid, session_id=sid)
            )
            reply = await stub.GetInsight(
                storage_pb2.GetInsightRequest(space_id=space.sid, session_id=sid)
            )
            assert not reply.HasField("content")

    @pytest.mark.parametrize("value", ["look here", ""], ids=["text", "empty"])
    async def test_consume_reads_and_clears(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, value: str
    ) -> None:
        """ConsumeInsight answers the stored insight ("" included) and leaves the slot unset."""
        sid = str(await make_session())
        request = storage_pb2.ConsumeInsightRequest(space_id=space.sid, session_id=sid)
        await stub.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=sid, content=value)
        )
        first = await stub.ConsumeInsight(request)
        assert first.HasField("content")
        assert first.content == value
        assert not (await stub.ConsumeInsight(request)).HasField("content")

    async def test_concurrent_consumers_get_it_once(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Of ten concurrent ConsumeInsight calls exactly one receives the insight."""
        sid = str(await make_session())
        await stub.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=sid, content="once")
        )
        request = storage_pb2.ConsumeInsightRequest(space_id=space.sid, session_id=sid)
        replies = await asyncio.gather(*(stub.ConsumeInsight(request) for _ in range(10)))
        assert sorted(r.content for r in replies if r.HasField("content")) == ["once"]

    async def test_consume_on_provisional_is_not_found(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """ConsumeInsight is a read: on a provisional session it is NOT_FOUND and clears nothing."""
        sid = str(await make_session(provisional=True))
        await stub.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=sid, content="kept")
        )
        err = await rpc_error(
            stub.ConsumeInsight(
                storage_pb2.ConsumeInsightRequest(space_id=space.sid, session_id=sid)
            )
        )
        assert err.code() == grpc.StatusCode.NOT_FOUND

    async def test_consume_over_the_reply_limit_keeps_the_insight(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        start_server: ServerStarter,
    ) -> None:
        """An insight too large for the reply is RESOURCE_EXHAUSTED on consume and stays stored."""
        small = await start_server(
            lambda s, p, k: create_app(s.model_copy(update={"max_message_bytes": 4096}), p, k)
        )
        sid = str(await make_session())
        target = {"space_id": space.sid, "session_id": sid}
        await stub.PutInsight(storage_pb2.PutInsightRequest(**target, content="i" * 5000))
        channel = small.channel(space.key)
        try:
            small_stub = storage_pb2_grpc.SessionStorageStub(channel)
            err = await rpc_error(
                small_stub.ConsumeInsight(storage_pb2.ConsumeInsightRequest(**target))
            )
        finally:
            await channel.close()
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        kept = await stub.GetInsight(storage_pb2.GetInsightRequest(**target))
        assert len(kept.content) == 5000


async def with_records(stub: Stub, space: TestSpace, sid: str, count: int) -> None:
    """Append `count` records to the session (seqs 1..count)."""
    await stub.AppendRecords(
        storage_pb2.AppendRecordsRequest(
            space_id=space.sid, session_id=sid, records=[rec(f"r{i}") for i in range(count)]
        )
    )


class TestCompressionCache:
    async def test_unset_then_put_then_get(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The cache reads unset until put, then exactly what was put."""
        sid = str(await make_session())
        await with_records(stub, space, sid, 12)
        get = storage_pb2.GetCompressionCacheRequest(space_id=space.sid, session_id=sid)
        assert not (await stub.GetCompressionCache(get)).HasField("cache")
        cache = storage_pb2.CompressionCache(summary="so far", covered_until_seq=12)
        await stub.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(space_id=space.sid, session_id=sid, cache=cache)
        )
        assert (await stub.GetCompressionCache(get)).cache == cache

    async def test_summaries_kept_by_seq(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Summaries are kept by the seq they cover: the newest is the cache, an older one is
        found at or below a seq, a lossy one skipped when complete ones are asked for, and a
        put below the newest drops the newer ones (DESIGN §4.3)."""
        sid = str(await make_session())
        await with_records(stub, space, sid, 9)

        async def put(summary: str, seq: int, lossy: bool = False) -> None:
            cache = storage_pb2.CompressionCache(
                summary=summary, covered_until_seq=seq, lossy=lossy
            )
            await stub.PutCompressionCache(
                storage_pb2.PutCompressionCacheRequest(
                    space_id=space.sid, session_id=sid, cache=cache
                )
            )

        async def get(**options: Any) -> str | None:
            reply = await stub.GetCompressionCache(
                storage_pb2.GetCompressionCacheRequest(
                    space_id=space.sid, session_id=sid, **options
                )
            )
            return reply.cache.summary if reply.HasField("cache") else None

        await put("a", 3)
        await put("b", 6)
        await put("c", 9, lossy=True)
        assert await get() == "c"
        assert await get(at_or_below_seq=8) == "b"
        assert await get(at_or_below_seq=2) is None
        assert await get(complete_only=True) == "b"
        await put("b2", 6)
        assert (await get(), await get(at_or_below_seq=5)) == ("b2", "a")

    async def test_a_summary_covers_no_seq_past_the_last(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A covered seq beyond the session's last is OUT_OF_RANGE naming the field and the
        last seq (in Transact, by its path), and nothing is written or dropped, as for
        PutMemory: a cache covering 2^63-1 was stored, and every later turn skipped the
        records it had not seen."""
        sid = str(await make_session())
        await with_records(stub, space, sid, 3)
        get = storage_pb2.GetCompressionCacheRequest(space_id=space.sid, session_id=sid)
        kept = storage_pb2.CompressionCache(summary="through 3", covered_until_seq=3)
        await stub.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(space_id=space.sid, session_id=sid, cache=kept)
        )
        beyond = storage_pb2.CompressionCache(summary="beyond", covered_until_seq=2**63 - 1)
        error = await rpc_error(
            stub.PutCompressionCache(
                storage_pb2.PutCompressionCacheRequest(
                    space_id=space.sid, session_id=sid, cache=beyond
                )
            )
        )
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE
        assert [v.field for v in field_violations(error)] == ["cache.covered_until_seq"]
        assert "last seq (3)" in (error.details() or "")
        below = storage_pb2.CompressionCache(summary="at 2", covered_until_seq=2)
        puts = [
            storage_pb2.Operation(
                put_compression_cache=storage_pb2.Operation.PutCompressionCacheOp(
                    session_id=sid, cache=cache, keep_newer=True
                )
            )
            for cache in (below, storage_pb2.CompressionCache(summary="b", covered_until_seq=4))
        ]
        error = await rpc_error(
            stub.Transact(storage_pb2.TransactRequest(space_id=space.sid, operations=puts))
        )
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE
        fields = [v.field for v in field_violations(error)]
        assert fields == ["operations[1].put_compression_cache.cache.covered_until_seq"]
        assert (await stub.GetCompressionCache(get)).cache == kept
        assert not (
            await stub.GetCompressionCache(
                storage_pb2.GetCompressionCacheRequest(
                    space_id=space.sid, session_id=sid, at_or_below_seq=2
                )
            )
        ).HasField("cache")

    async def test_memory_records_the_seq_it_covers(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """PutMemory with covered_until_seq stores it; a put without leaves it as it was."""
        sid = str(await make_session())
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid, session_id=sid, records=[rec(f"r{i}") for i in range(12)]
            )
        )
        get = storage_pb2.GetMemoryRequest(space_id=space.sid, session_id=sid)
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="m")
        )
        assert not (await stub.GetMemory(get)).HasField("covered_until_seq")
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(
                space_id=space.sid, session_id=sid, content="m2", covered_until_seq=12
            )
        )
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="edited")
        )
        reply = await stub.GetMemory(get)
        assert (reply.content, reply.covered_until_seq) == ("edited", 12)


class TestBatchGetSlots:
    async def test_request_order_once_each_absent_left_out(
        self,
        stub: Stub,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        """Visible sessions answer in request order, once each; absent ones are left out."""
        first, second = str(await make_session()), str(await make_session())
        provisional = str(await make_session(provisional=True))
        foreign = str(await make_session(space_id=other_space.id))
        await stub.PutMemory(
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=second, content="m")
        )
        ids = [second, str(uuid.uuid4()), first, provisional, second, foreign]
        slots = await batch(stub, space, ids)
        assert [s.session_id for s in slots] == [second, first]
        assert slots[0].memory == "m"
        assert not slots[1].HasField("memory")

    async def test_empty_request_is_empty(self, stub: Stub, space: TestSpace) -> None:
        """No ids answer no slots."""
        assert await batch(stub, space, []) == []

    async def test_more_than_a_thousand_ids_is_invalid(self, stub: Stub, space: TestSpace) -> None:
        """Over 1000 ids is INVALID_ARGUMENT on session_ids."""
        err = await rpc_error(batch(stub, space, [str(uuid.uuid4()) for _ in range(1001)]))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == ["session_ids"]

    async def test_slot_selection_reads_only_those(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """`slots` names what to read: the other slots are left unset, even when stored."""
        sid = str(await make_session())
        for request in (
            storage_pb2.PutSystemPromptRequest(space_id=space.sid, session_id=sid, content="p"),
            storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="m"),
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=sid, content="i"),
        ):
            await getattr(stub, type(request).__name__.removesuffix("Request"))(request)
        every = await batch(stub, space, [sid])
        assert (every[0].system_prompt, every[0].memory, every[0].insight) == ("p", "m", "i")
        kinds = [storage_pb2.SLOT_KIND_MEMORY, storage_pb2.SLOT_KIND_INSIGHT]
        reply = await stub.BatchGetSlots(
            storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=[sid], slots=kinds)
        )
        [some] = reply.slots
        assert (some.session_id, some.memory, some.insight) == (sid, "m", "i")
        assert not some.HasField("system_prompt")

    async def test_a_budget_answers_the_first_sessions_that_fit(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Under `max_reply_bytes` the reply answers the sessions in request order while they
        fit and says where it stopped (`next_index`, counting absent and repeated ids); the
        ids from there on answer in another call; a request that fits answers whole."""
        ids = [str(await make_session()) for _ in range(3)]
        for sid in ids:
            await stub.PutMemory(
                storage_pb2.PutMemoryRequest(space_id=space.sid, session_id=sid, content="m" * 1000)
            )
        asked = [str(uuid.uuid4()), ids[0], ids[0], ids[1], ids[2]]
        request = storage_pb2.BatchGetSlotsRequest(
            space_id=space.sid, session_ids=asked, max_reply_bytes=2_500
        )
        reply = await stub.BatchGetSlots(request)
        assert [s.session_id for s in reply.slots] == ids[:2]
        assert all(len(s.memory) == 1000 for s in reply.slots)
        assert reply.next_index == 4 and reply.ByteSize() <= 2_500
        del request.session_ids[: reply.next_index]
        rest = await stub.BatchGetSlots(request)
        assert ([s.session_id for s in rest.slots], rest.next_index) == (ids[2:], 0)
        request.max_reply_bytes = 3_500
        del request.session_ids[:]
        request.session_ids.extend(ids)
        whole = await stub.BatchGetSlots(request)
        assert ([s.session_id for s in whole.slots], whole.next_index) == (ids, 0)

    async def test_the_first_session_found_is_answered_whatever_its_size(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A budget smaller than the first session's slots still answers that session (after
        the absent ones before it), and stops there."""
        first, second = str(await make_session()), str(await make_session())
        await stub.PutInsight(
            storage_pb2.PutInsightRequest(space_id=space.sid, session_id=first, content="i" * 500)
        )
        reply = await stub.BatchGetSlots(
            storage_pb2.BatchGetSlotsRequest(
                space_id=space.sid,
                session_ids=[str(uuid.uuid4()), first, second],
                max_reply_bytes=1,
            )
        )
        assert [(s.session_id, len(s.insight)) for s in reply.slots] == [(first, 500)]
        assert reply.next_index == 2

    async def test_the_server_limit_bounds_a_reply_with_no_budget(
        self, space: TestSpace, make_session: MakeSession, start_server: ServerStarter
    ) -> None:
        """With no budget, slots past the server's STELLO_MAX_MESSAGE_BYTES (here 8,192) are
        left for another call, never RESOURCE_EXHAUSTED; paging by `next_index` reads each
        session once."""
        small = await start_server(
            lambda s, p, k: create_app(s.model_copy(update={"max_message_bytes": 8192}), p, k)
        )
        ids = [str(await make_session()) for _ in range(5)]
        channel = small.channel(space.key)
        try:
            small_stub = storage_pb2_grpc.SessionStorageStub(channel)
            for sid in ids:
                await small_stub.PutMemory(
                    storage_pb2.PutMemoryRequest(
                        space_id=space.sid, session_id=sid, content="m" * 3000
                    )
                )
            seen: list[str] = []
            asked = list(ids)
            while asked:
                reply = await small_stub.BatchGetSlots(
                    storage_pb2.BatchGetSlotsRequest(space_id=space.sid, session_ids=asked)
                )
                assert reply.slots and reply.ByteSize() <= 8192
                seen += [s.session_id for s in reply.slots]
                asked = asked[reply.next_index :] if reply.next_index else []
        finally:
            await channel.close()
        assert seen == ids

    async def test_a_negative_budget_is_invalid(self, stub: Stub, space: TestSpace) -> None:
        """A negative max_reply_bytes is INVALID_ARGUMENT on that field."""
        err = await rpc_error(
            stub.BatchGetSlots(
                storage_pb2.BatchGetSlotsRequest(
                    space_id=space.sid, session_ids=[str(uuid.uuid4())], max_reply_bytes=-1
                )
            )
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == ["max_reply_bytes"]

    # SlotKind is an open proto3 enum: 9 is a value no SlotKind constant names.
    @pytest.mark.parametrize("kind", [storage_pb2.SLOT_KIND_UNSPECIFIED, 9])
    async def test_unknown_slot_kind_is_invalid(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, kind: storage_pb2.SlotKind
    ) -> None:
        """UNSPECIFIED or an unknown SlotKind is INVALID_ARGUMENT naming its position."""
        sid = str(await make_session())
        request = storage_pb2.BatchGetSlotsRequest(
            space_id=space.sid, session_ids=[sid], slots=[storage_pb2.SLOT_KIND_MEMORY, kind]
        )
        err = await rpc_error(stub.BatchGetSlots(request))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == ["slots[1]"]
