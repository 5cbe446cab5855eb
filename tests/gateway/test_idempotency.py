"""request_id on CreateRoot and Fork (DESIGN §2): one session per id, reuse refused."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.errors import error_info_reason
from tests.gateway.conftest import Stack, row_counts, rpc_error
from tests.gateway.probes import assert_complete, children_of, fork_request, seeded_source

pytestmark = pytest.mark.sql


class TestForkRequestId:
    """A retried Fork gives one session; a different request under the same id is refused."""

    async def test_retry_gives_the_same_session(self, stack: Stack) -> None:
        """The same request_id and request answer the first session again; only one exists."""
        source = await seeded_source(stack)
        first = await stack.gw.Fork(fork_request(stack, source, "same"))
        second = await stack.gw.Fork(fork_request(stack, source, "same"))
        assert second.session == first.session
        assert await children_of(stack, source) == [first.session.id]
        await assert_complete(stack, first.session.id)

    async def test_concurrent_retries_make_one_session(self, stack: Stack) -> None:
        """Five identical Forks at once with one request_id make one session."""
        source = await seeded_source(stack)
        replies = await asyncio.gather(
            *(stack.gw.Fork(fork_request(stack, source, "burst")) for _ in range(5))
        )
        assert len({r.session.id for r in replies}) == 1
        assert await children_of(stack, source) == [replies[0].session.id]

    @pytest.mark.parametrize(
        "change",
        [
            pytest.param({"label": "other label"}, id="tree-part-differs"),
            pytest.param({"prompt": "other opening"}, id="storage-part-differs"),
        ],
    )
    async def test_reuse_with_different_request(
        self, stack: Stack, pool: asyncpg.Pool, change: dict[str, str]
    ) -> None:
        """The same request_id with a different request is ALREADY_EXISTS REQUEST_ID_REUSED."""
        source = await seeded_source(stack)
        await stack.gw.Fork(fork_request(stack, source, "reused"))
        before = await row_counts(pool, stack.space)
        error = await rpc_error(stack.gw.Fork(fork_request(stack, source, "reused", **change)))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert await row_counts(pool, stack.space) == before

    async def test_without_request_id_each_call_creates(self, stack: Stack) -> None:
        """Without a request_id two identical Forks make two sessions."""
        source = await seeded_source(stack)
        await stack.gw.Fork(fork_request(stack, source, ""))
        await stack.gw.Fork(fork_request(stack, source, ""))
        assert len(await children_of(stack, source)) == 2

    async def test_long_request_id(self, stack: Stack) -> None:
        """A 200-character request_id works (hashed internally) and still deduplicates."""
        source = await seeded_source(stack)
        rid = "x" * 200
        first = await stack.gw.Fork(fork_request(stack, source, rid))
        second = await stack.gw.Fork(fork_request(stack, source, rid))
        assert first.session.id == second.session.id


class TestCreateRootRequestId:
    """CreateRoot's request_id, scoped apart from Fork's."""

    async def test_retry_and_reuse(self, stack: Stack) -> None:
        """A retried CreateRoot answers the same root; a changed one is REQUEST_ID_REUSED."""
        request = agent_pb2.CreateRootRequest(space_id=stack.space.sid, label="r", request_id="k")
        first = await stack.gw.CreateRoot(request)
        again = await stack.gw.CreateRoot(request)
        assert again.session == first.session
        changed = agent_pb2.CreateRootRequest(
            space_id=stack.space.sid, label="r", system_prompt="p", request_id="k"
        )
        error = await rpc_error(stack.gw.CreateRoot(changed))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"

    async def test_same_id_for_root_and_fork(self, stack: Stack) -> None:
        """One request_id used for a CreateRoot and a Fork makes two distinct sessions."""
        root = await stack.gw.CreateRoot(
            agent_pb2.CreateRootRequest(space_id=stack.space.sid, request_id="shared")
        )
        fork = await stack.gw.Fork(fork_request(stack, root.session.id, "shared", context=0))
        assert fork.session.parent_id == root.session.id
        assert fork.session.id != root.session.id
