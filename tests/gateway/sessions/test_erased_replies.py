"""Nothing outlives erasure: a remembered reply is erased with its session (DESIGN §4.8).

For every RPC that remembers a reply under a request_id (the gateway's CreateRoot,
Fork, Send, SendStream, SubmitToolResults, SubmitToolResultsStream and ImportSession;
storage's AppendRecords, Transact and RememberResultOp, read back by GetRememberedResult
and BeginTurn; the tree's CreateSession): the call is made with text no other session
holds, the session is deleted, and the same call again answers NOT_FOUND with none of
that text, creates nothing, and no table of the schema holds any of it any more.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello import reasons
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from tests.gateway.conftest import Stack, record, rpc_error
from tests.gateway.turns_support import (
    send,
    stream_events,
    submit,
    submit_stream_events,
    tool_definition,
)
from tests.support.erasure import tables_holding
from tests.tree.conftest import erased

pytestmark = pytest.mark.sql


def marker(what: str) -> str:
    """Text that exists nowhere else."""
    return f"{what}-{uuid.uuid4().hex}"


async def delete_session(stack: Stack, session_id: str) -> None:
    """DeleteSession through the gateway; answers once its sessions are unreadable."""
    await stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=session_id)
    )


async def session_count(pool: asyncpg.Pool, stack: Stack) -> int:
    """Sessions of the stack's space, provisional ones included."""
    return int(
        await pool.fetchval("SELECT count(*) FROM sessions WHERE space_id = $1", stack.space.id)
    )


async def assert_not_found(replay: Callable[[], Awaitable[Any]], texts: set[str]) -> None:
    """The replay answers NOT_FOUND, reason REQUEST_ERASED, naming none of `texts`."""
    error = await rpc_error(replay())
    assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()
    assert error_info_reason(error) == reasons.REQUEST_ERASED, error.details()
    said = (error.details() or "") + repr(error.trailing_metadata())
    assert not [t for t in texts if t in said]


async def assert_replay_erased(
    pool: asyncpg.Pool, replay: Callable[[], Awaitable[Any]], texts: set[str]
) -> None:
    """The replay answers NOT_FOUND naming none of `texts` at once (the session hidden,
    its erasure maybe still running) and once erased, when no table holds any of them."""
    await assert_not_found(replay, texts)
    await erased(pool)
    await assert_not_found(replay, texts)
    async with pool.acquire() as con:
        assert await tables_holding(con, texts) == {}


class TestGatewayReplies:
    """The gateway's remembered replies go with the session; a replay is NOT_FOUND."""

    async def test_send(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A Send replayed after DeleteSession answers NOT_FOUND, not the deleted turn."""
        label, prompt, said = marker("label"), marker("prompt"), marker("said")
        root = await stack.root(label=label, system_prompt=prompt)
        first = await send(stack, root.id, said, request_id="send-1")
        assert said in first.assistant.content  # echo: the reply holds the user's text
        await delete_session(stack, root.id)
        await assert_replay_erased(
            pool, lambda: send(stack, root.id, said, request_id="send-1"), {label, prompt, said}
        )

    async def test_send_stream(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A SendStream replayed after DeleteSession answers NOT_FOUND."""
        said = marker("streamed")
        root = await stack.root()
        await stream_events(stack, root.id, said, request_id="stream-1")
        await delete_session(stack, root.id)
        await assert_replay_erased(
            pool, lambda: stream_events(stack, root.id, said, request_id="stream-1"), {said}
        )

    async def test_submit_tool_results(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """SubmitToolResults replayed after DeleteSession answers NOT_FOUND."""
        result = marker("result")
        root = await stack.root()
        turn = await send(stack, root.id, "/tool lookup {}", tools=[tool_definition("lookup")])
        call_id = turn.pending_tool_calls[0].id
        await submit(stack, root.id, (call_id, result), request_id="submit-1")
        await delete_session(stack, root.id)
        await assert_replay_erased(
            pool,
            lambda: submit(stack, root.id, (call_id, result), request_id="submit-1"),
            {result},
        )

    async def test_submit_tool_results_stream(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """SubmitToolResultsStream replayed after DeleteSession answers NOT_FOUND."""
        result = marker("streamed-result")
        root = await stack.root()
        turn = await send(stack, root.id, "/tool lookup {}", tools=[tool_definition("lookup")])
        call_id = turn.pending_tool_calls[0].id
        await submit_stream_events(stack, root.id, (call_id, result), request_id="submit-2")
        await delete_session(stack, root.id)
        await assert_replay_erased(
            pool,
            lambda: submit_stream_events(stack, root.id, (call_id, result), request_id="submit-2"),
            {result},
        )

    async def test_create_root(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A CreateRoot replayed after its root was deleted answers NOT_FOUND and creates
        no second root."""
        label, prompt = marker("root"), marker("prompt")
        root = await stack.root(label=label, system_prompt=prompt, request_id="root-1")
        await delete_session(stack, root.id)
        await assert_replay_erased(
            pool,
            lambda: stack.root(label=label, system_prompt=prompt, request_id="root-1"),
            {label, prompt},
        )
        assert await session_count(pool, stack) == 0

    async def test_fork(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A Fork replayed after its session was deleted (the source kept) answers
        NOT_FOUND and makes no second fork."""
        label, opening = marker("fork"), marker("opening")
        source = await stack.root()
        child = await stack.fork(source.id, label=label, prompt=opening, request_id="fork-1")
        await delete_session(stack, child.id)
        await assert_replay_erased(
            pool,
            lambda: stack.fork(source.id, label=label, prompt=opening, request_id="fork-1"),
            {label, opening},
        )
        assert await session_count(pool, stack) == 1

    async def test_fork_after_its_source_subtree(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A Fork replayed after its source's subtree (the fork in it) was deleted answers
        NOT_FOUND."""
        label = marker("fork")
        source = await stack.root()
        await stack.fork(source.id, label=label, request_id="fork-2")
        await delete_session(stack, source.id)
        await assert_replay_erased(
            pool, lambda: stack.fork(source.id, label=label, request_id="fork-2"), {label}
        )

    async def test_import_session(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """An ImportSession replayed after its session was deleted answers NOT_FOUND and
        imports nothing."""
        label, said = marker("imported"), marker("imported-said")
        request = agent_pb2.ImportSessionRequest(
            space_id=stack.space.sid,
            label=label,
            records=[record("user", said)],
            request_id="import-1",
        )
        made = await stack.gw.ImportSession(request)
        await delete_session(stack, made.session.id)
        await assert_replay_erased(pool, lambda: stack.gw.ImportSession(request), {label, said})
        assert await session_count(pool, stack) == 0


class TestStorageReplies:
    """Storage's remembered replies go with the session; a replay is NOT_FOUND."""

    async def test_append_records(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """AppendRecords replayed after its session was deleted answers NOT_FOUND."""
        said = marker("appended")
        root = await stack.root()
        request = storage_pb2.AppendRecordsRequest(
            space_id=stack.space.sid,
            session_id=root.id,
            records=[record("user", said)],
            request_id="append-1",
        )
        await stack.storage.AppendRecords(request)
        await delete_session(stack, root.id)
        await assert_replay_erased(pool, lambda: stack.storage.AppendRecords(request), {said})

    async def test_transact(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A Transact replayed after a session it wrote was deleted answers NOT_FOUND."""
        said, label = marker("transacted"), marker("label")
        root = await stack.root()
        op = storage_pb2.Operation
        request = storage_pb2.TransactRequest(
            space_id=stack.space.sid,
            operations=[
                op(
                    append_records=op.AppendRecordsOp(
                        session_id=root.id, records=[record("user", said)]
                    )
                ),
                op(
                    put_session=op.PutSessionOp(
                        session=common_pb2.SessionMeta(
                            id=root.id, label=label, status=common_pb2.SESSION_STATUS_ACTIVE
                        )
                    )
                ),
            ],
            request_id="transact-1",
        )
        await stack.storage.Transact(request)
        await delete_session(stack, root.id)
        await assert_replay_erased(pool, lambda: stack.storage.Transact(request), {said, label})

    async def test_remembered_result(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A caller's entry (RememberResultOp) goes with its session: GetRememberedResult
        and BeginTurn answer NOT_FOUND for its key."""
        kept = marker("kept")
        root = await stack.root()
        op = storage_pb2.Operation
        await stack.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=stack.space.sid,
                operations=[
                    op(
                        remember_result=op.RememberResultOp(
                            scope="test.erasure",
                            request_id="kept-1",
                            request_hash=b"h",
                            response=kept.encode(),
                            session_ids=[root.id],
                        )
                    )
                ],
            )
        )
        await delete_session(stack, root.id)
        read = storage_pb2.GetRememberedResultRequest(
            space_id=stack.space.sid, scope="test.erasure", request_id="kept-1"
        )
        await assert_replay_erased(pool, lambda: stack.storage.GetRememberedResult(read), {kept})
        begin = storage_pb2.BeginTurnRequest(
            space_id=stack.space.sid,
            session_id=root.id,
            ttl_s=30,
            scope="test.erasure",
            request_id="kept-1",
        )
        await assert_replay_erased(pool, lambda: stack.storage.BeginTurn(begin), {kept})


class TestTreeReplies:
    """The tree's remembered CreateSession replies go with the session."""

    async def test_create_session(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """CreateSession replayed after its session was deleted answers NOT_FOUND and
        creates nothing."""
        label = marker("tree")
        request = tree_pb2.CreateSessionRequest(
            space_id=stack.space.sid, label=label, request_id="tree-1"
        )
        made = await stack.tree.CreateSession(request)
        await stack.tree.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=stack.space.sid, session_id=made.node.id)
        )
        await assert_replay_erased(pool, lambda: stack.tree.CreateSession(request), {label})
        assert await session_count(pool, stack) == 0


async def trim_all(stack: Stack, session_id: str) -> int:
    """Storage's TrimRecords of every record of the session; how many went."""
    reply = await stack.storage.TrimRecords(
        storage_pb2.TrimRecordsRequest(
            space_id=stack.space.sid, session_id=session_id, keep_recent=0
        )
    )
    return int(reply.removed_count)


class TestTrimmedReplies:
    """A trim that removes records erases the replies that hold them (explore14 F2): a
    replay answers NOT_FOUND REQUEST_ERASED, never the trimmed text, and no table holds
    it; the replies of the session's creation and of an import stay."""

    async def test_send_and_submit(self, stack: Stack, pool: asyncpg.Pool) -> None:
        said, result = marker("said"), marker("result")
        root = await stack.root(label="kept", request_id="root-t")
        await send(stack, root.id, said, request_id="send-t")
        turn = await send(stack, root.id, "/tool lookup {}", tools=[tool_definition("lookup")])
        call_id = turn.pending_tool_calls[0].id
        await submit(stack, root.id, (call_id, result), request_id="submit-t")
        assert await trim_all(stack, root.id) > 0
        await assert_not_found(lambda: send(stack, root.id, said, request_id="send-t"), {said})
        await assert_not_found(
            lambda: submit_stream_events(stack, root.id, (call_id, result), request_id="submit-t"),
            {result},
        )
        async with pool.acquire() as con:
            assert await tables_holding(con, {said, result}, stack.space.id) == {}
        again = await stack.root(label="kept", request_id="root-t")
        assert again.id == root.id  # its creation's reply holds no record: answered still

    async def test_append_and_transact(self, stack: Stack, pool: asyncpg.Pool) -> None:
        appended, transacted = marker("appended"), marker("transacted")
        root = await stack.root()
        append = storage_pb2.AppendRecordsRequest(
            space_id=stack.space.sid,
            session_id=root.id,
            records=[record("user", appended)],
            request_id="append-t",
        )
        await stack.storage.AppendRecords(append)
        op = storage_pb2.Operation
        transact = storage_pb2.TransactRequest(
            space_id=stack.space.sid,
            operations=[
                op(
                    append_records=op.AppendRecordsOp(
                        session_id=root.id, records=[record("user", transacted)]
                    )
                )
            ],
            request_id="transact-t",
        )
        await stack.storage.Transact(transact)
        assert await trim_all(stack, root.id) == 2
        await assert_not_found(lambda: stack.storage.AppendRecords(append), {appended})
        await assert_not_found(lambda: stack.storage.Transact(transact), {transacted})
        async with pool.acquire() as con:
            assert await tables_holding(con, {appended, transacted}, stack.space.id) == {}

    async def test_an_import_survives_a_trim(self, stack: Stack) -> None:
        """An import's reply decides whether a backup's session is made again: a trim keeps
        it, so importing the same file again makes no second session."""
        request = agent_pb2.ImportSessionRequest(
            space_id=stack.space.sid,
            label="imported",
            records=[record("user", "hello")],
            request_id="import-t",
        )
        made = await stack.gw.ImportSession(request)
        assert await trim_all(stack, made.session.id) == 1
        again = await stack.gw.ImportSession(request)
        assert again.session.id == made.session.id


def upsert_request(stack: Stack, slug: str, summary: str, body: str, request_id: str) -> Any:
    """Storage's UpsertSharedMemoryEntryRequest in the stack's space."""
    return storage_pb2.UpsertSharedMemoryEntryRequest(
        space_id=stack.space.sid, slug=slug, summary=summary, body=body, request_id=request_id
    )


async def entry_exists(stack: Stack, slug: str) -> bool:
    """Whether the stack's space holds shared memory entry `slug`."""
    request = storage_pb2.GetSharedMemoryEntryRequest(space_id=stack.space.sid, slug=slug)
    try:
        await stack.storage.GetSharedMemoryEntry(request)
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
        return False
    return True


class TestRemovedEntryReplies:
    """A removed shared memory entry leaves nothing in remembered replies (explore14 F3):
    its upserts' replies are erased by the removal, a replay answers NOT_FOUND
    REQUEST_ERASED and writes nothing; the removal's own reply still answers."""

    async def test_storage_upserts(self, stack: Stack, pool: asyncpg.Pool) -> None:
        slug = marker("slug")
        texts = {marker("summary"), marker("body"), marker("summary2"), marker("body2")}
        summary, body, summary2, body2 = sorted(texts)
        first = upsert_request(stack, slug, summary, body, "upsert-e1")
        replace = upsert_request(stack, slug, summary2, body2, "upsert-e2")
        assert (await stack.storage.UpsertSharedMemoryEntry(first)).created
        assert not (await stack.storage.UpsertSharedMemoryEntry(replace)).created
        again = await stack.storage.UpsertSharedMemoryEntry(first)  # a replace keeps them
        assert again.entry.summary == summary
        remove = storage_pb2.RemoveSharedMemoryEntryRequest(
            space_id=stack.space.sid, slug=slug, request_id="remove-e"
        )
        assert (await stack.storage.RemoveSharedMemoryEntry(remove)).removed
        texts.add(slug)
        await assert_not_found(lambda: stack.storage.UpsertSharedMemoryEntry(first), texts)
        await assert_not_found(lambda: stack.storage.UpsertSharedMemoryEntry(replace), texts)
        assert not await entry_exists(stack, slug)  # the replays wrote nothing
        assert (await stack.storage.RemoveSharedMemoryEntry(remove)).removed  # answered
        async with pool.acquire() as con:
            assert await tables_holding(con, texts, stack.space.id) == {}

    async def test_a_later_entry_of_the_slug_keeps_its_replies(self, stack: Stack) -> None:
        """The slug made again after a removal is a new entry: removing the old one erased
        only the old replies."""
        await stack.storage.UpsertSharedMemoryEntry(upsert_request(stack, "s", "a", "b", "u-1"))
        await stack.storage.RemoveSharedMemoryEntry(
            storage_pb2.RemoveSharedMemoryEntryRequest(space_id=stack.space.sid, slug="s")
        )
        later = upsert_request(stack, "s", "c", "d", "u-2")
        await stack.storage.UpsertSharedMemoryEntry(later)
        replayed = await stack.storage.UpsertSharedMemoryEntry(later)
        assert replayed.entry.summary == "c"

    async def test_memory_tools(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """What `stello_memory_remember` wrote is gone from every reply once
        `stello_memory_forget` removed it and the session that held the turns went."""
        slug, summary, body = marker("slug"), marker("summary"), marker("body")
        root = await stack.root()
        args = f'{{"slug": "{slug}", "summary": "{summary}", "body": "{body}"}}'
        await send(stack, root.id, f"/tool stello_memory_remember {args}", memory_tools=True)
        assert await entry_exists(stack, slug)
        forget = f'/tool stello_memory_forget {{"slug": "{slug}"}}'
        await send(stack, root.id, forget, memory_tools=True)
        assert not await entry_exists(stack, slug)
        await delete_session(stack, root.id)
        await erased(pool)
        async with pool.acquire() as con:
            assert await tables_holding(con, {slug, summary, body}, stack.space.id) == {}


def test_the_record_scopes_are_the_services_own() -> None:
    """The scopes a trim erases are those the turns, appends and batches remember under."""
    from agent_gateway.turns.state import SEND_SCOPE, SUBMIT_SCOPE
    from stello.stored.reply_erasure import RECORD_SCOPES
    from storage_service.records.service import APPEND_SCOPE
    from storage_service.transact.service import TRANSACT_SCOPE

    assert set(RECORD_SCOPES) == {SEND_SCOPE, SUBMIT_SCOPE, APPEND_SCOPE, TRANSACT_SCOPE}
