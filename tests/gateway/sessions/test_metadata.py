"""Session metadata through the gateway: CreateRoot, Fork, ImportSession, UpdateSessionMetadata,
GetSession and ListSessionDigests' filters (issue #37)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from tests.gateway.conftest import Stack, close_stack, open_stack, row_counts, rpc_error
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

EVENTS = "SELECT kind, session_id::text FROM space_events WHERE space_id = $1 ORDER BY position"


async def update(stack: Stack, session_id: str, **fields: Any) -> dict[str, str]:
    reply: agent_pb2.UpdateSessionMetadataResponse = await stack.gw.UpdateSessionMetadata(
        agent_pb2.UpdateSessionMetadataRequest(
            space_id=stack.space.sid, session_id=session_id, **fields
        )
    )
    return dict(reply.metadata)


async def digest_ids(stack: Stack, page_size: int = 100, **filters: Any) -> list[str]:
    """Every digest id of the filtered listing, page by page; each digest's metadata checked
    against GetSession's."""
    ids: list[str] = []
    token = ""
    while True:
        reply: agent_pb2.ListSessionDigestsResponse = await stack.gw.ListSessionDigests(
            agent_pb2.ListSessionDigestsRequest(
                space_id=stack.space.sid,
                page_size=page_size,
                page_token=token,
                filter=common_pb2.SessionFilter(**filters),
            )
        )
        for digest in reply.digests:
            assert dict(digest.metadata) == dict((await stack.view(digest.id)).metadata)
        ids += [d.id for d in reply.digests]
        token = reply.next_page_token
        if not token:
            return ids


def fields_of(error: grpc.aio.AioRpcError) -> list[str]:
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    return sorted(v.field for v in field_violations(error))


class TestWrites:
    async def test_root_fork_and_get_session(self, stack: Stack) -> None:
        """CreateRoot's metadata is GetSession's; a fork copies none unless asked, then its
        own pairs go on top of the source's."""
        root = await stack.root(metadata={"user": "alice", "project": "p1"})
        assert dict((await stack.view(root.id)).metadata) == {"user": "alice", "project": "p1"}
        plain = await stack.fork(root.id, "plain")
        tagged = await stack.fork(root.id, "tagged", metadata={"ticket": "T-9"})
        copied = await stack.fork(root.id, "copied", copy_metadata=True, metadata={"user": "bob"})
        assert dict((await stack.view(plain.id)).metadata) == {}
        assert dict((await stack.view(tagged.id)).metadata) == {"ticket": "T-9"}
        assert dict((await stack.view(copied.id)).metadata) == {"user": "bob", "project": "p1"}

    async def test_creation_answers_carry_the_metadata(self, stack: Stack) -> None:
        """CreateRoot, Fork (its source's pairs under its own when it copies them),
        ImportSession, and a replay of each by request_id, answer the metadata the session
        holds (they answered none)."""
        pairs = {"user": "alice", "project": "p1"}
        root = await stack.root(metadata=pairs, request_id="root-1")
        again = await stack.root(metadata=pairs, request_id="root-1")
        assert (root.id, dict(root.metadata)) == (again.id, pairs)
        copied = await stack.fork(
            root.id, "copied", copy_metadata=True, metadata={"user": "bob"}, request_id="f-1"
        )
        replayed = await stack.fork(
            root.id, "copied", copy_metadata=True, metadata={"user": "bob"}, request_id="f-1"
        )
        for reply in (copied, replayed):
            assert dict(reply.metadata) == {"user": "bob", "project": "p1"}
        assert dict((await stack.fork(root.id, "plain")).metadata) == {}
        imported = await stack.gw.ImportSession(
            agent_pb2.ImportSessionRequest(
                space_id=stack.space.sid, label="imported", metadata={"origin": "export"}
            )
        )
        assert dict(imported.session.metadata) == {"origin": "export"}

    async def test_import_restores_metadata(self, stack: Stack) -> None:
        """ImportSession stores the exported metadata."""
        reply = await stack.gw.ImportSession(
            agent_pb2.ImportSessionRequest(
                space_id=stack.space.sid, label="imported", metadata={"origin": "export"}
            )
        )
        assert dict((await stack.view(reply.session.id)).metadata) == {"origin": "export"}

    async def test_update_and_its_event(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """UpdateSessionMetadata merges and removes at once and writes one METADATA_CHANGED
        event naming the session; values travel in no event."""
        root = await stack.root(metadata={"a": "1", "b": "secret"})
        assert await update(stack, root.id, set={"c": "value-c"}, remove=["b"]) == {
            "a": "1",
            "c": "value-c",
        }
        assert dict((await stack.view(root.id)).metadata) == {"a": "1", "c": "value-c"}
        rows = await pool.fetch(EVENTS, stack.space.id)
        assert [r["session_id"] for r in rows if r["kind"] == "metadata_changed"] == [root.id]
        dumped = await pool.fetchval(
            "SELECT string_agg(e::text, ' ') FROM space_events e WHERE space_id = $1",
            stack.space.id,
        )
        assert "secret" not in dumped and "value-c" not in dumped

    @pytest.mark.parametrize(
        ("call", "expected"),
        [
            pytest.param("root", ['metadata["bad key"]'], id="create-root"),
            pytest.param("fork", ['metadata["bad key"]'], id="fork"),
            pytest.param("import", ['metadata["bad key"]'], id="import"),
            pytest.param("update", ['set["bad key"]'], id="update"),
        ],
    )
    async def test_limits_refused_before_any_write(
        self, stack: Stack, pool: asyncpg.Pool, call: str, expected: list[str]
    ) -> None:
        """A bad key is INVALID_ARGUMENT naming the client's field; nothing is written."""
        root = await stack.root()
        before = await row_counts(pool, stack.space)
        bad = {"bad key": "v"}
        attempts: dict[str, Callable[[], Awaitable[Any]]] = {
            "root": lambda: stack.root(metadata=bad),
            "fork": lambda: stack.fork(root.id, "x", metadata=bad),
            "import": lambda: stack.gw.ImportSession(
                agent_pb2.ImportSessionRequest(space_id=stack.space.sid, label="i", metadata=bad)
            ),
            "update": lambda: update(stack, root.id, set=bad),
        }
        assert fields_of(await rpc_error(attempts[call]())) == expected
        assert await row_counts(pool, stack.space) == before

    async def test_copy_over_the_limit_leaves_nothing_visible(self, stack: Stack) -> None:
        """A fork whose copied metadata plus its own is over 16 pairs is INVALID_ARGUMENT
        and no session appears."""
        root = await stack.root(metadata={f"k{i}": "" for i in range(16)})
        error = await rpc_error(
            stack.fork(root.id, "x", copy_metadata=True, metadata={"more": "1"})
        )
        assert fields_of(error) == ["metadata"]
        assert await digest_ids(stack) == [root.id]

    async def test_foreign_session_is_not_found(self, stack: Stack, other_space: TestSpace) -> None:
        """Another space's session answers NOT_FOUND and keeps its metadata."""
        other_stack = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        theirs = await other_stack.root(metadata={"a": "1"})
        error = await rpc_error(update(stack, theirs.id, set={"a": "2"}))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert dict((await other_stack.view(theirs.id)).metadata) == {"a": "1"}
        await close_stack(other_stack)


class TestDigestFilters:
    async def test_filters_and_paging(self, stack: Stack, other_space: TestSpace) -> None:
        """Digests filter by metadata (AND over keys), label prefix, parent, root and roots
        only; pages of 2 walk each match once; another space's sessions never match."""
        other_stack = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        await other_stack.root(metadata={"user": "u1"})
        await close_stack(other_stack)
        a = await stack.root(label="alpha", metadata={"user": "u1", "team": "t"})
        b = await stack.fork(a.id, "alpha-2", metadata={"user": "u1"})
        c = await stack.fork(b.id, "beta", metadata={"user": "u1", "team": "t"})
        d = await stack.root(label="gamma", metadata={"user": "u2"})
        assert await digest_ids(stack, page_size=2, metadata={"user": "u1"}) == [a.id, b.id, c.id]
        assert await digest_ids(stack, metadata={"user": "u1", "team": "t"}) == [a.id, c.id]
        assert await digest_ids(stack, label_prefix="alpha") == [a.id, b.id]
        assert await digest_ids(stack, parent_id=b.id) == [c.id]
        assert await digest_ids(stack, root_id=a.id) == [a.id, b.id, c.id]
        assert await digest_ids(stack, page_size=1, roots_only=True) == [a.id, d.id]

    async def test_bad_filter_is_named(self, stack: Stack) -> None:
        """A malformed filter is INVALID_ARGUMENT naming `filter.<field>`."""
        error = await rpc_error(
            stack.gw.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=stack.space.sid,
                    filter=common_pb2.SessionFilter(metadata={"1x": "v"}, root_id="nope"),
                )
            )
        )
        assert fields_of(error) == ['filter.metadata["1x"]']
        error = await rpc_error(
            stack.gw.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=stack.space.sid, filter=common_pb2.SessionFilter(root_id="nope")
                )
            )
        )
        assert fields_of(error) == ["filter.root_id"]

    async def test_a_parent_of_no_session_is_not_found(self, stack: Stack) -> None:
        """A filter.parent_id naming no session of the space is NOT_FOUND naming the field
        through the gateway too (its empty page looked like a session without children)."""
        root = await stack.root(label="alone")
        assert await digest_ids(stack, parent_id=root.id) == []
        error = await rpc_error(
            stack.gw.ListSessionDigests(
                agent_pb2.ListSessionDigestsRequest(
                    space_id=stack.space.sid,
                    filter=common_pb2.SessionFilter(parent_id=str(uuid.uuid4())),
                )
            )
        )
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert error_info_reason(error) == "SESSION_NOT_FOUND"
        assert "filter.parent_id" in (error.details() or "")
