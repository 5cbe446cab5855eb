"""request_id on CreateRoot and Fork (DESIGN §2): one session per id, reuse refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from tests.gateway.conftest import (
    TTL_S,
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    close_stack,
    open_stack,
    record,
    row_counts,
    rpc_error,
)
from tests.gateway.forks.test_consistency import RaiseAt
from tests.gateway.probes import (
    assert_complete,
    children_of,
    fork_request,
    provisional_ids,
    seeded_source,
    wait_until_gone,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


@pytest.fixture(name="provisioning_ttl_s")
def _provisioning_ttl_s() -> float:
    """The short TTL: these tests wait for the sweeper to remove what a failed saga left."""
    return TTL_S


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


class ChangingSummarizer(FakeSummarizer):
    """A summariser whose every summary differs, as a real LLM's may."""

    async def summarize_for_fork(
        self,
        records: Sequence[common_pb2.Record],
        *,
        summary: str | None = None,
        omitted: int = 0,
    ) -> str:
        """The deterministic summary, numbered by call."""
        made = await super().summarize_for_fork(records, summary=summary, omitted=omitted)
        return f"{made} (take {len(self.calls)})"


@pytest.fixture(name="changing")
async def _changing(
    start_gateway: GatewayStarter, backends: Backends, space: TestSpace
) -> AsyncIterator[Stack]:
    summarizer = ChangingSummarizer()
    gateway = await start_gateway(summarizer_=summarizer)
    stack = await open_stack(backends, gateway, space, summarizer)
    yield stack
    await close_stack(stack)


def compress_request(stack: Stack, source: str, request_id: str) -> agent_pb2.ForkRequest:
    return agent_pb2.ForkRequest(
        space_id=stack.space.sid,
        source_session_id=source,
        label="compressed",
        context=common_pb2.FORK_CONTEXT_COMPRESS,
        request_id=request_id,
    )


async def fork_failing_after_storage(
    start_gateway: GatewayStarter, backends: Backends, space: TestSpace, stack: Stack, source: str
) -> None:
    """Fork `source` (request_id "k") through a gateway that fails between the Transact and
    the commit: the session is written and remembered, still provisional."""
    broken = await start_gateway(faults=RaiseAt("fork.after_storage"))
    failing = await open_stack(backends, broken, space, stack.summarizer)
    try:
        error = await rpc_error(failing.gw.Fork(fork_request(stack, source, "k")))
        assert error.code() is grpc.StatusCode.INTERNAL
    finally:
        await close_stack(failing)


class TestRetryAnswersTheRequest:
    """A retried Fork answers the client's request, not what composing it gives this time."""

    async def test_retry_after_the_source_changed(self, stack: Stack) -> None:
        """INHERIT, then the source gets a record, then the same Fork: the first session,
        with the records it was made with."""
        source = await seeded_source(stack)
        first = await stack.gw.Fork(fork_request(stack, source, "k"))
        await stack.append(source, record("user", "later"))
        again = await stack.gw.Fork(fork_request(stack, source, "k"))
        assert again.session.id == first.session.id
        assert await children_of(stack, source) == [first.session.id]
        await assert_complete(stack, first.session.id)

    async def test_retry_after_the_source_was_deleted(self, stack: Stack) -> None:
        """A finished Fork's answer outlives its source: the retry answers it (the source
        read's NOT_FOUND loses to the remembered session)."""
        source = await stack.root(label="deleted later")
        home = await stack.root(label="home")
        request = fork_request(
            stack,
            source.id,
            "k",
            context=common_pb2.FORK_CONTEXT_NONE,
            topology_parent_id=home.id,
        )
        first = await stack.gw.Fork(request)
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=source.id)
        )
        again = await stack.gw.Fork(request)
        assert again.session.id == first.session.id
        assert again.session.parent_id == home.id

    async def test_retry_after_the_session_was_deleted_is_not_found(self, stack: Stack) -> None:
        """The remembered session was deleted (its reply erased with it, DESIGN §4.8): the
        retry answers NOT_FOUND and makes nothing."""
        source = await seeded_source(stack)
        first = await stack.gw.Fork(fork_request(stack, source, "k"))
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=first.session.id)
        )
        error = await rpc_error(stack.gw.Fork(fork_request(stack, source, "k")))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert await children_of(stack, source) == []

    async def test_compress_retry_makes_no_second_summary(self, changing: Stack) -> None:
        """A retried COMPRESS Fork answers the first session without calling the LLM again."""
        source = await seeded_source(changing)
        first = await changing.gw.Fork(compress_request(changing, source, "c"))
        again = await changing.gw.Fork(compress_request(changing, source, "c"))
        assert again.session.id == first.session.id
        assert len(changing.summarizer.calls) == 1
        view = await changing.view(first.session.id)
        assert "(take 1)" in view.system_prompt

    async def test_concurrent_compress_retries_make_one_session(
        self, changing: Stack, pool: asyncpg.Pool
    ) -> None:
        """Five identical COMPRESS Forks at once, each summarised differently: one session,
        every call answers it, and the other attempts' provisional rows are swept."""
        source = await seeded_source(changing)
        replies = await asyncio.gather(
            *(changing.gw.Fork(compress_request(changing, source, "burst")) for _ in range(5))
        )
        assert len({r.session.id for r in replies}) == 1
        assert await children_of(changing, source) == [replies[0].session.id]
        leftovers = await provisional_ids(pool, changing.space)
        assert await wait_until_gone(pool, changing.space, leftovers, TTL_S + 3.0) == 0
        assert await children_of(changing, source) == [replies[0].session.id]

    async def test_retry_finishes_a_saga_that_stopped_after_storage(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        stack: Stack,
        pool: asyncpg.Pool,
    ) -> None:
        """A gateway that failed between the Transact and the commit; the source then changed:
        the retry commits and answers that very session, with its original records."""
        source = await seeded_source(stack)
        await fork_failing_after_storage(start_gateway, backends, space, stack, source)
        [made] = await provisional_ids(pool, stack.space)
        await stack.append(source, record("user", "later"))
        reply = await stack.gw.Fork(fork_request(stack, source, "k"))
        assert reply.session.id == made
        assert reply.session.parent_id == source
        assert await children_of(stack, source) == [made]
        await assert_complete(stack, made)

    async def test_retry_after_the_first_attempt_was_swept(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        stack: Stack,
        pool: asyncpg.Pool,
    ) -> None:
        """The remembered session was swept (never committed): the retry makes it again, and
        later retries answer the new one."""
        source = await seeded_source(stack)
        await fork_failing_after_storage(start_gateway, backends, space, stack, source)
        swept = await provisional_ids(pool, stack.space)
        assert await wait_until_gone(pool, stack.space, swept, TTL_S + 3.0) == 0
        reply = await stack.gw.Fork(fork_request(stack, source, "k"))
        again = await stack.gw.Fork(fork_request(stack, source, "k"))
        assert reply.session.id not in swept
        assert again.session.id == reply.session.id
        assert await children_of(stack, source) == [reply.session.id]
        await assert_complete(stack, reply.session.id)

    async def test_different_request_is_refused_before_anything_is_written(
        self, changing: Stack, pool: asyncpg.Pool
    ) -> None:
        """Reusing a finished COMPRESS Fork's id for another request: REQUEST_ID_REUSED, no
        LLM call, no row (provisional ones included)."""
        source = await seeded_source(changing)
        await changing.gw.Fork(compress_request(changing, source, "c"))
        before = await row_counts(pool, changing.space)
        other = compress_request(changing, source, "c")
        other.label = "another"
        error = await rpc_error(changing.gw.Fork(other))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert len(changing.summarizer.calls) == 1
        assert await row_counts(pool, changing.space) == before

    async def test_create_root_reuse_writes_nothing(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A CreateRoot under a used id with another request writes no row at all."""
        request = agent_pb2.CreateRootRequest(space_id=stack.space.sid, label="r", request_id="k")
        await stack.gw.CreateRoot(request)
        before = await row_counts(pool, stack.space)
        request.label = "other"
        error = await rpc_error(stack.gw.CreateRoot(request))
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert await row_counts(pool, stack.space) == before
