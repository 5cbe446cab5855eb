"""Page sizes out of range, through the gateway: INVALID_ARGUMENT naming page_size, in one
form on every paged read ("must be within 0..N, got X": the range and the value sent), from
one kernel function (stello.validation.page_size), whether the gateway or storage checks it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.errors import field_violations
from tests.gateway.conftest import Stack, rpc_error

pytestmark = pytest.mark.sql

Build = Callable[[str, str, int], Any]

READS = [
    pytest.param(
        "ListSharedMemory",
        1000,
        lambda sp, s, n: agent_pb2.ListSharedMemoryRequest(space_id=sp, page_size=n),
        id="ListSharedMemory",
    ),
    pytest.param(
        "SearchRecords",
        100,
        lambda sp, s, n: agent_pb2.SearchRecordsRequest(space_id=sp, query="x", page_size=n),
        id="SearchRecords",
    ),
    pytest.param(
        "SearchSessions",
        100,
        lambda sp, s, n: agent_pb2.SearchSessionsRequest(space_id=sp, query="x", page_size=n),
        id="SearchSessions",
    ),
    pytest.param(
        "GetLineage",
        1000,
        lambda sp, s, n: agent_pb2.GetLineageRequest(space_id=sp, session_id=s, page_size=n),
        id="GetLineage",
    ),
    pytest.param(
        "ListSessionDigests",
        1000,
        lambda sp, s, n: agent_pb2.ListSessionDigestsRequest(space_id=sp, page_size=n),
        id="ListSessionDigests",
    ),
]


class TestPageSizes:
    @pytest.mark.parametrize(("rpc", "most", "build"), READS)
    async def test_out_of_range_names_the_range_and_the_value(
        self, stack: Stack, rpc: str, most: int, build: Build
    ) -> None:
        """A negative page_size and one past the RPC's largest page are both refused with
        the range and the value sent, in the same words on every paged read."""
        root = await stack.root()
        for size in (-1, most + 1):
            error = await rpc_error(getattr(stack.gw, rpc)(build(stack.space.sid, root.id, size)))
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
            assert [(v.field, v.description) for v in field_violations(error)] == [
                ("page_size", f"must be within 0..{most}, got {size}")
            ]

    @pytest.mark.parametrize(("rpc", "most", "build"), READS)
    async def test_the_largest_page_is_allowed(
        self, stack: Stack, rpc: str, most: int, build: Build
    ) -> None:
        """page_size 0 (the default) and the largest page are allowed."""
        root = await stack.root()
        for size in (0, most):
            await getattr(stack.gw, rpc)(build(stack.space.sid, root.id, size))
