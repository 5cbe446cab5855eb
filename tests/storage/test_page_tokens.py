"""Page tokens that are not ours (storage_service.page_tokens): INVALID_ARGUMENT naming
page_token on every listing, never INTERNAL, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.errors import field_violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from tests.storage.helpers import rpc_error
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.hostile import deep_page_token
from tests.support.rows import space_rows

pytestmark = pytest.mark.sql

Stub = storage_pb2_grpc.SessionStorageStub
Build = Callable[[str, str, str], Any]

LISTINGS = [
    pytest.param(
        "ListRecords",
        lambda sp, s, t: storage_pb2.ListRecordsRequest(space_id=sp, session_id=s, page_token=t),
        id="ListRecords",
    ),
    pytest.param(
        "ListSessions",
        lambda sp, s, t: storage_pb2.ListSessionsRequest(space_id=sp, page_token=t),
        id="ListSessions",
    ),
    pytest.param(
        "ListSharedMemory",
        lambda sp, s, t: storage_pb2.ListSharedMemoryRequest(space_id=sp, page_token=t),
        id="ListSharedMemory",
    ),
    pytest.param(
        "SearchRecords",
        lambda sp, s, t: storage_pb2.SearchRecordsRequest(space_id=sp, query="x", page_token=t),
        id="SearchRecords",
    ),
    pytest.param(
        "SearchSessions",
        lambda sp, s, t: storage_pb2.SearchSessionsRequest(space_id=sp, query="x", page_token=t),
        id="SearchSessions",
    ),
]


class TestForeignPageTokens:
    @pytest.mark.parametrize(("rpc", "build"), LISTINGS)
    async def test_deeply_nested_token_is_invalid(
        self,
        stub: Stub,
        space: TestSpace,
        make_session: MakeSession,
        pool: asyncpg.Pool,
        rpc: str,
        build: Build,
    ) -> None:
        """A token of JSON nested past what Python's json reads (it raised RecursionError:
        INTERNAL) is INVALID_ARGUMENT naming page_token, and nothing is written."""
        session_id = await make_session()
        before = await space_rows(pool, space.id)
        request = build(space.sid, str(session_id), deep_page_token(100_000))
        err = await rpc_error(getattr(stub, rpc)(request))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert [v.field for v in field_violations(err)] == ["page_token"]
        assert await space_rows(pool, space.id) == before
