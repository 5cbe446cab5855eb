"""A space's shared memory in storage (DESIGN §4.5; STELLO-SPEC §1.11, §6.9 items 1-4)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.reasons import REQUEST_ID_REUSED
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.conftest import StubFor
from tests.storage.helpers import rpc_error
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Kind = common_pb2.EventKind


async def upsert(
    stub: Stub, space: TestSpace, slug: str, summary: str = "s", body: str = "b", **extra: Any
) -> storage_pb2.UpsertSharedMemoryEntryResponse:
    """UpsertSharedMemoryEntry in `space`."""
    reply: storage_pb2.UpsertSharedMemoryEntryResponse = await stub.UpsertSharedMemoryEntry(
        storage_pb2.UpsertSharedMemoryEntryRequest(
            space_id=space.sid, slug=slug, summary=summary, body=body, **extra
        )
    )
    return reply


async def remove(stub: Stub, space: TestSpace, slug: str, **extra: Any) -> bool:
    """RemoveSharedMemoryEntry in `space`; whether an entry went."""
    reply = await stub.RemoveSharedMemoryEntry(
        storage_pb2.RemoveSharedMemoryEntryRequest(space_id=space.sid, slug=slug, **extra)
    )
    return bool(reply.removed)


async def get(stub: Stub, space: TestSpace, slug: str) -> common_pb2.SharedMemoryEntry:
    """GetSharedMemoryEntry in `space`."""
    reply = await stub.GetSharedMemoryEntry(
        storage_pb2.GetSharedMemoryEntryRequest(space_id=space.sid, slug=slug)
    )
    entry: common_pb2.SharedMemoryEntry = reply.entry
    return entry


async def listed(
    stub: Stub, space: TestSpace, page_size: int = 0, page_token: str = ""
) -> storage_pb2.ListSharedMemoryResponse:
    """One ListSharedMemory page of `space`."""
    reply: storage_pb2.ListSharedMemoryResponse = await stub.ListSharedMemory(
        storage_pb2.ListSharedMemoryRequest(
            space_id=space.sid, page_size=page_size, page_token=page_token
        )
    )
    return reply


async def slugs(stub: Stub, space: TestSpace) -> list[str]:
    """Every slug of the space, in order, page after page."""
    found: list[str] = []
    token = ""
    while True:
        page = await listed(stub, space, page_size=2, page_token=token)
        found += [e.slug for e in page.entries]
        token = page.next_page_token
        if not token:
            return found


class TestEntries:
    async def test_an_empty_space_lists_nothing_and_has_no_entry(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """An empty store lists [] with a count of 0; Get of any slug is NOT_FOUND."""
        page = await listed(stub, space)
        assert (list(page.entries), page.next_page_token, page.total_count) == ([], "", 0)
        error = await rpc_error(get(stub, space, "nothing"))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert "nothing" in (error.details() or "")

    async def test_an_upserted_entry_is_listed_and_read_back(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """After an upsert the entry is listed (without its body) and Get answers it whole."""
        reply = await upsert(stub, space, "tides", "when the tides turn", "High at 6, low at 12.")
        assert reply.created
        assert (reply.entry.slug, reply.entry.summary, reply.entry.body) == (
            "tides",
            "when the tides turn",
            "High at 6, low at 12.",
        )
        page = await listed(stub, space)
        assert [(e.slug, e.summary, e.HasField("body")) for e in page.entries] == [
            ("tides", "when the tides turn", False)
        ]
        assert page.total_count == 1
        entry = await get(stub, space, "tides")
        assert entry.body == "High at 6, low at 12."
        assert entry.created_at == reply.entry.created_at

    async def test_insertion_order_is_kept_and_an_upsert_keeps_the_place(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Upserts a, b, c list a, b, c; re-upserting a keeps it first with its new content."""
        for slug in ("c-first", "a-second", "b-third"):
            await upsert(stub, space, slug)
        again = await upsert(stub, space, "c-first", "new summary", "new body")
        assert not again.created
        assert await slugs(stub, space) == ["c-first", "a-second", "b-third"]
        entry = await get(stub, space, "c-first")
        assert (entry.summary, entry.body) == ("new summary", "new body")
        assert entry.updated_at.ToDatetime() > entry.created_at.ToDatetime()

    async def test_a_removed_entry_is_gone_and_a_returning_slug_goes_last(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Remove deletes the entry; removing a missing slug is a no-op; re-adding goes last."""
        for slug in ("a", "b", "c"):
            await upsert(stub, space, slug)
        assert await remove(stub, space, "a")
        assert not await remove(stub, space, "a")
        assert not await remove(stub, space, "never")
        assert (await rpc_error(get(stub, space, "a"))).code() is grpc.StatusCode.NOT_FOUND
        await upsert(stub, space, "a")
        assert await slugs(stub, space) == ["b", "c", "a"]

    async def test_pages_cover_every_entry_once_with_the_total(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Pages of 2 over 5 entries give 2, 2, 1 entries, each with the count 5."""
        for i in range(5):
            await upsert(stub, space, f"e{i}")
        first = await listed(stub, space, page_size=2)
        second = await listed(stub, space, page_size=2, page_token=first.next_page_token)
        third = await listed(stub, space, page_size=2, page_token=second.next_page_token)
        pages = [[e.slug for e in p.entries] for p in (first, second, third)]
        assert pages == [["e0", "e1"], ["e2", "e3"], ["e4"]]
        assert third.next_page_token == ""
        assert {p.total_count for p in (first, second, third)} == {5}

    async def test_concurrent_upserts_of_one_slug_leave_one_entry(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """3 concurrent upserts of one slug leave exactly one entry holding one of the values."""
        replies = await asyncio.gather(
            *(upsert(stub, space, "same", f"summary {i}", f"body {i}") for i in range(3))
        )
        assert sum(r.created for r in replies) == 1
        page = await listed(stub, space)
        assert page.total_count == 1
        entry = await get(stub, space, "same")
        assert (entry.summary, entry.body) in {(f"summary {i}", f"body {i}") for i in range(3)}

    async def test_concurrent_mixed_upserts_and_removes_stay_consistent(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Mixed concurrent upserts and removes end with the listing and Get in agreement."""
        calls = [
            upsert(stub, space, f"k{i % 3}", f"s{i}", f"b{i}")
            if i % 2
            else remove(stub, space, f"k{i % 3}")
            for i in range(12)
        ]
        await asyncio.gather(*calls)
        page = await listed(stub, space)
        assert page.total_count == len(page.entries)
        for entry in page.entries:
            assert (await get(stub, space, entry.slug)).summary == entry.summary
        for slug in {"k0", "k1", "k2"} - {e.slug for e in page.entries}:
            assert (await rpc_error(get(stub, space, slug))).code() is grpc.StatusCode.NOT_FOUND


class TestTenancy:
    async def test_another_space_sees_none_of_the_entries(
        self, stub: Stub, stub_for: StubFor, space: TestSpace, other_space: TestSpace
    ) -> None:
        """Entries of one space are invisible to another: listed, read, removed or paged."""
        await upsert(stub, space, "private", "mine", "secret")
        other = stub_for(other_space.key)
        assert (await listed(other, other_space)).total_count == 0
        error = await rpc_error(get(other, other_space, "private"))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert not await remove(other, other_space, "private")
        await upsert(other, other_space, "private", "theirs", "other")
        assert (await get(stub, space, "private")).body == "secret"

    async def test_a_page_token_of_another_space_is_refused(
        self, stub: Stub, stub_for: StubFor, space: TestSpace, other_space: TestSpace
    ) -> None:
        """A page token issued for one space is INVALID_ARGUMENT in another."""
        for slug in ("a", "b"):
            await upsert(stub, space, slug)
        token = (await listed(stub, space, page_size=1)).next_page_token
        error = await rpc_error(listed(stub_for(other_space.key), other_space, 1, token))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["page_token"]


class TestEditedPageTokens:
    @pytest.mark.parametrize(
        "edit",
        [
            pytest.param({"at": 2**63 - 1}, id="at-past-9999"),
            pytest.param({"at": 2**70}, id="at-int64"),
            pytest.param({"at": -(2**62)}, id="at-before-1"),
            pytest.param({"at": 1e300}, id="at-float"),
            pytest.param({"at": True}, id="at-bool"),
            pytest.param({"slug": "\x00"}, id="slug-nul"),
        ],
    )
    async def test_a_value_no_column_holds_is_refused(
        self, stub: Stub, space: TestSpace, edit: dict[str, Any]
    ) -> None:
        """A token edited to a time or slug the table cannot hold is INVALID_ARGUMENT naming
        page_token, never INTERNAL (explore2 finding 1)."""
        for slug in ("a", "b"):
            await upsert(stub, space, slug)
        token = (await listed(stub, space, page_size=1)).next_page_token
        assert [e.slug for e in (await listed(stub, space, 1, token)).entries] == ["b"]
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        edited = base64.urlsafe_b64encode(json.dumps({**payload, **edit}).encode()).decode()
        error = await rpc_error(listed(stub, space, 1, edited))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert [v.field for v in field_violations(error)] == ["page_token"]


class TestValidation:
    @pytest.mark.parametrize(
        ("fields", "bad"),
        [
            pytest.param({"slug": ""}, ["slug"], id="empty-slug"),
            pytest.param({"slug": " padded"}, ["slug"], id="padded-slug"),
            pytest.param({"slug": "two\nlines"}, ["slug"], id="line-break-slug"),
            pytest.param({"slug": "x" * 129}, ["slug"], id="long-slug"),
            pytest.param({"summary": "  "}, ["summary"], id="blank-summary"),
            pytest.param({"summary": "a\nb"}, ["summary"], id="two-line-summary"),
            pytest.param({"summary": "s" * 1001}, ["summary"], id="long-summary"),
            pytest.param({"body": ""}, ["body"], id="empty-body"),
            pytest.param({"slug": "", "body": ""}, ["slug", "body"], id="two-fields"),
        ],
    )
    async def test_a_bad_upsert_names_its_fields_and_writes_nothing(
        self,
        stub: Stub,
        space: TestSpace,
        pool: asyncpg.Pool,
        fields: dict[str, str],
        bad: list[str],
    ) -> None:
        """Slug rules and size limits are INVALID_ARGUMENT naming each field; nothing written."""
        request = {"space_id": space.sid, "slug": "ok", "summary": "s", "body": "b"} | fields
        error = await rpc_error(
            stub.UpsertSharedMemoryEntry(storage_pb2.UpsertSharedMemoryEntryRequest(**request))
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == bad
        count = await pool.fetchval(
            "SELECT count(*) FROM shared_memory WHERE space_id = $1", space.id
        )
        assert count == 0

    async def test_a_body_over_the_slot_limit_is_refused(
        self, stub: Stub, space: TestSpace, settings: Any
    ) -> None:
        """A body over STELLO_MAX_SLOT_BYTES is INVALID_ARGUMENT on `body`."""
        body = "x" * (settings.max_slot_bytes + 1)
        error = await rpc_error(upsert(stub, space, "big", body=body))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["body"]

    async def test_get_and_remove_check_the_slug(self, stub: Stub, space: TestSpace) -> None:
        """Get and Remove of a slug that breaks the rules are INVALID_ARGUMENT on `slug`."""
        for call in (get(stub, space, ""), remove(stub, space, "tab\there")):
            error = await rpc_error(call)
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in field_violations(error)] == ["slug"]


class TestIdempotency:
    async def test_a_retried_upsert_answers_the_first_reply_and_writes_nothing_new(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """The same request_id and request: the first reply again, even after a change since."""
        first = await upsert(stub, space, "k", "one", "body", request_id="up-1")
        await upsert(stub, space, "k", "two", "other")
        again = await upsert(stub, space, "k", "one", "body", request_id="up-1")
        assert again == first
        assert (await get(stub, space, "k")).summary == "two"

    async def test_a_reused_request_id_is_already_exists(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """The same request_id with another request is ALREADY_EXISTS REQUEST_ID_REUSED."""
        await upsert(stub, space, "k", request_id="up-2")
        error = await rpc_error(upsert(stub, space, "k", "changed", request_id="up-2"))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == REQUEST_ID_REUSED

    async def test_a_retried_remove_answers_the_first_reply(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """A retried remove with its request_id answers `removed` true again."""
        await upsert(stub, space, "k")
        assert await remove(stub, space, "k", request_id="rm-1")
        assert await remove(stub, space, "k", request_id="rm-1")
        assert not await remove(stub, space, "k", request_id="rm-2")


class TestEvents:
    async def test_writes_write_events_naming_the_entry_id(
        self, stub: Stub, space: TestSpace
    ) -> None:
        """Upsert, replace and remove each write an event naming the entry by its id, never
        by its slug (events carry no user text); a no-op remove writes none; the entry
        written again after its removal has a new id."""
        first = (await upsert(stub, space, "secret-slug")).entry.entry_id
        again = (await upsert(stub, space, "secret-slug", "again")).entry.entry_id
        await remove(stub, space, "secret-slug")
        await remove(stub, space, "secret-slug")
        back = (await upsert(stub, space, "secret-slug")).entry.entry_id
        reply = await stub.ReadEvents(
            storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=0)
        )
        assert first == again != back
        assert [(Kind.Name(e.kind), e.entry_id, e.session_id) for e in reply.events] == [
            ("EVENT_KIND_SHARED_MEMORY_UPSERTED", first, ""),
            ("EVENT_KIND_SHARED_MEMORY_UPSERTED", first, ""),
            ("EVENT_KIND_SHARED_MEMORY_REMOVED", first, ""),
            ("EVENT_KIND_SHARED_MEMORY_UPSERTED", back, ""),
        ]
        assert not any(e.HasField("slug") for e in reply.events)
        assert b"secret-slug" not in reply.SerializeToString()

    async def test_a_refused_write_writes_no_event(self, stub: Stub, space: TestSpace) -> None:
        """A refused upsert (reused request_id) leaves the space's events as they were."""
        await upsert(stub, space, "k", request_id="ev-1")
        await rpc_error(upsert(stub, space, "k", "other", request_id="ev-1"))
        reply = await stub.ReadEvents(
            storage_pb2.ReadEventsRequest(space_id=space.sid, after_position=0)
        )
        assert len(reply.events) == 1
