"""ListRecords pages: bounded in bytes as well as count, continued by next_page_token on seq."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.settings import MIB
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service import create_app
from storage_service.config import StorageSettings
from tests.storage.conftest import StubFor
from tests.storage.helpers import ASSISTANT, USER, rec, rpc_error
from tests.support.fixtures import MakeSession, ServerStarter, TestSpace

pytestmark = pytest.mark.sql

KIB = 1024

Stub = storage_pb2_grpc.SessionStorageStub


async def page(
    stub: Stub, space: TestSpace, session_id: uuid.UUID, **options: Any
) -> storage_pb2.ListRecordsResponse:
    """One ListRecords reply."""
    reply: storage_pb2.ListRecordsResponse = await stub.ListRecords(
        storage_pb2.ListRecordsRequest(space_id=space.sid, session_id=str(session_id), **options)
    )
    return reply


async def walk(
    stub: Stub, space: TestSpace, session_id: uuid.UUID, **options: Any
) -> list[list[int]]:
    """The seqs of every page, following the tokens to the end."""
    pages: list[list[int]] = []
    token = ""
    while True:
        reply = await page(stub, space, session_id, page_token=token, **options)
        pages.append([r.seq for r in reply.records])
        token = reply.next_page_token
        if not token:
            return pages


async def fill(
    stub: Stub, space: TestSpace, session_id: uuid.UUID, records: list[common_pb2.Record]
) -> None:
    """Append `records` a few at a time (each call under the message limit)."""
    for start in range(0, len(records), 4):
        await stub.AppendRecords(
            storage_pb2.AppendRecordsRequest(
                space_id=space.sid, session_id=str(session_id), records=records[start : start + 4]
            )
        )


class TestByteBound:
    async def test_records_over_a_message_in_all(
        self, space: TestSpace, make_session: MakeSession, start_server: ServerStarter
    ) -> None:
        """28 records of 256 KiB (7 MiB, over a 6.4 MiB message limit) read in pages of at
        most 600 KiB. The default limits scaled by a tenth (64 MiB messages, 6 MiB pages):
        the same pages for a tenth of the bytes (70 MiB written and read three times took
        25-55 s of each pass that runs it)."""
        config = StorageSettings(max_page_bytes=600 * KIB)
        limits = {"max_record_bytes": 300 * KIB, "max_message_bytes": 64 * MIB // 10}
        server = await start_server(
            lambda s, p, k: create_app(s.model_copy(update=limits), p, k, config=config)
        )
        session_id = await make_session()
        size = MIB // 4
        async with server.channel(space.key) as channel:
            stub = storage_pb2_grpc.SessionStorageStub(channel)
            await fill(stub, space, session_id, [rec(f"{n:04}" + "x" * size) for n in range(28)])
            newest = await page(stub, space, session_id, newest_first=True)
            assert [r.seq for r in newest.records] == [27, 28]  # was RESOURCE_EXHAUSTED
            assert newest.ByteSize() <= 600 * KIB and newest.next_page_token
            for newest_first in (False, True):
                pages = await walk(stub, space, session_id, newest_first=newest_first)
                assert all(len(p) == 2 for p in pages)
                seqs = [s for p in pages for s in p]
                assert sorted(seqs) == list(range(1, 29))

    async def test_pages_stay_within_the_budget(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, start_server: ServerStarter
    ) -> None:
        """With a 4 KiB budget (64 bytes counted per record), pages fill up to it, one at least."""
        server = await start_server(
            partial(create_app, config=StorageSettings(max_page_bytes=4096))
        )
        session_id = await make_session()
        sizes = [100, 3000, 900, 5000, 10, 10, 10, 2000, 2500, 1]
        await fill(stub, space, session_id, [rec("y" * n) for n in sizes])
        async with server.channel(space.key) as channel:
            small = storage_pb2_grpc.SessionStorageStub(channel)
            token, pages = "", []
            while True:
                reply = await page(small, space, session_id, page_token=token)
                pages.append([len(r.content) for r in reply.records])
                assert reply.ByteSize() <= 4096 or len(reply.records) == 1
                token = reply.next_page_token
                if not token:
                    break
        assert pages == [[100, 3000], [900], [5000], [10, 10, 10, 2000], [2500, 1]]


class TestTokens:
    async def test_every_record_once_in_both_directions(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Filters, bounds, a page size and a first-page offset: tokens cover the rest once."""
        session_id = await make_session()
        await fill(
            stub, space, session_id, [rec(f"m{n}", USER if n % 3 else ASSISTANT) for n in range(60)]
        )
        users = [n + 1 for n in range(60) if n % 3 and 5 < n + 1 < 55]
        query = {"role": USER, "after_seq": 5, "before_seq": 55, "limit": 4, "offset": 2}
        forward = await walk(stub, space, session_id, **query)
        assert [s for p in forward for s in p] == users[2:]
        assert all(len(p) == 4 for p in forward[:-1])
        backward = await walk(stub, space, session_id, newest_first=True, **query)
        assert all(p == sorted(p) for p in backward)
        assert [s for p in reversed(backward) for s in p] == users[:-2]

    async def test_last_page_has_no_token(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """No token once the walk took every record, nor for limit 0 or an empty session."""
        session_id = await make_session()
        assert (await page(stub, space, session_id)).next_page_token == ""
        await fill(stub, space, session_id, [rec(f"r{n}") for n in range(4)])
        for options in ({"limit": 4}, {"limit": 4, "newest_first": True}, {"limit": 0}, {}):
            assert (await page(stub, space, session_id, **options)).next_page_token == ""
        assert (await page(stub, space, session_id, limit=3)).next_page_token != ""

    async def test_page_size_may_change(
        self, stub: Stub, space: TestSpace, make_session: MakeSession
    ) -> None:
        """The next page may ask for a different limit; the walk goes on from the token."""
        session_id = await make_session()
        await fill(stub, space, session_id, [rec(f"r{n}") for n in range(10)])
        first = await page(stub, space, session_id, limit=3)
        second = await page(stub, space, session_id, limit=5, page_token=first.next_page_token)
        assert [r.seq for r in second.records] == [4, 5, 6, 7, 8]

    @pytest.mark.parametrize(
        "changed",
        [
            pytest.param({"role": ASSISTANT}, id="role"),
            pytest.param({"after_seq": 1}, id="after_seq"),
            pytest.param({"before_seq": 9}, id="before_seq"),
            pytest.param({"newest_first": True}, id="direction"),
            pytest.param({"offset": 1}, id="offset"),
        ],
    )
    async def test_token_bound_to_its_filter(
        self, stub: Stub, space: TestSpace, make_session: MakeSession, changed: dict[str, Any]
    ) -> None:
        """A token sent with another filter, direction or offset: INVALID_ARGUMENT on page_token."""
        session_id = await make_session()
        await fill(stub, space, session_id, [rec(f"r{n}") for n in range(10)])
        token = (await page(stub, space, session_id, limit=2)).next_page_token
        err = await rpc_error(page(stub, space, session_id, limit=2, page_token=token, **changed))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(err)] == ["page_token"]

    async def test_token_bound_to_its_session_and_space(
        self,
        stub: Stub,
        stub_for: StubFor,
        space: TestSpace,
        other_space: TestSpace,
        make_session: MakeSession,
    ) -> None:
        """A token from another session or space, or a forged one, is INVALID_ARGUMENT."""
        other_stub = stub_for(other_space.key)
        first, second = await make_session(), await make_session()
        theirs = await make_session(space_id=other_space.id)
        await fill(stub, space, first, [rec(f"a{n}") for n in range(5)])
        await fill(stub, space, second, [rec(f"b{n}") for n in range(5)])
        await fill(other_stub, other_space, theirs, [rec(f"c{n}") for n in range(5)])
        token = (await page(stub, space, first, limit=2)).next_page_token
        foreign = (await page(other_stub, other_space, theirs, limit=2)).next_page_token
        for call in (
            page(stub, space, second, limit=2, page_token=token),
            page(other_stub, other_space, theirs, limit=2, page_token=token),
            page(stub, space, first, limit=2, page_token=foreign),
            page(stub, space, first, limit=2, page_token="not-a-token"),
            page(stub, space, first, limit=2, page_token=token[:-3]),
        ):
            err = await rpc_error(call)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in field_violations(err)] == ["page_token"]
