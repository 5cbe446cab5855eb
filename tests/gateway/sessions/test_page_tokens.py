"""Page tokens that are not ours, through the gateway: INVALID_ARGUMENT naming page_token on
every paged read, never INTERNAL, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.errors import field_violations
from tests.gateway.conftest import Stack, row_counts, rpc_error
from tests.support.hostile import deep_page_token

pytestmark = pytest.mark.sql

Build = Callable[[str, str, str], Any]

READS = [
    pytest.param(
        "ListRecords",
        lambda sp, s, t: agent_pb2.ListRecordsRequest(space_id=sp, session_id=s, page_token=t),
        id="ListRecords",
    ),
    pytest.param(
        "ListSharedMemory",
        lambda sp, s, t: agent_pb2.ListSharedMemoryRequest(space_id=sp, page_token=t),
        id="ListSharedMemory",
    ),
    pytest.param(
        "SearchRecords",
        lambda sp, s, t: agent_pb2.SearchRecordsRequest(space_id=sp, query="x", page_token=t),
        id="SearchRecords",
    ),
    pytest.param(
        "SearchSessions",
        lambda sp, s, t: agent_pb2.SearchSessionsRequest(space_id=sp, query="x", page_token=t),
        id="SearchSessions",
    ),
    pytest.param(
        "GetLineage",
        lambda sp, s, t: agent_pb2.GetLineageRequest(space_id=sp, session_id=s, page_token=t),
        id="GetLineage",
    ),
    pytest.param(
        "ListSessionDigests",
        lambda sp, s, t: agent_pb2.ListSessionDigestsRequest(space_id=sp, page_token=t),
        id="ListSessionDigests",
    ),
]


class TestForeignPageTokens:
    @pytest.mark.parametrize(("rpc", "build"), READS)
    async def test_deeply_nested_token_is_invalid(
        self, stack: Stack, pool: asyncpg.Pool, rpc: str, build: Build
    ) -> None:
        """A token of JSON nested past what Python's json reads (storage's listings raised
        RecursionError: INTERNAL) is INVALID_ARGUMENT naming page_token; nothing written."""
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        request = build(stack.space.sid, root.id, deep_page_token(100_000))
        error = await rpc_error(getattr(stack.gw, rpc)(request))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert [v.field for v in field_violations(error)] == ["page_token"]
        assert await row_counts(pool, stack.space) == before
