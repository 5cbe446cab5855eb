"""Session metadata in the tree: CreateSession, UpdateSessionMetadata, GetNode, ListAll filters."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import timestamp_pb2

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient, erased

pytestmark = pytest.mark.sql

EVENTS = "SELECT kind, session_id FROM space_events WHERE space_id = $1 ORDER BY position"
ROWS = "SELECT count(*) FROM session_metadata WHERE space_id = $1"


async def update(tree: TreeClient, session_id: str, **fields: Any) -> dict[str, str]:
    reply: tree_pb2.UpdateSessionMetadataResponse = await tree.stub.UpdateSessionMetadata(
        tree_pb2.UpdateSessionMetadataRequest(
            space_id=tree.space.sid, session_id=session_id, **fields
        )
    )
    return dict(reply.metadata)


async def metadata_of(tree: TreeClient, session_id: str) -> dict[str, str]:
    reply: tree_pb2.GetNodeResponse = await tree.stub.GetNode(
        tree_pb2.GetNodeRequest(space_id=tree.space.sid, session_id=session_id, include_config=True)
    )
    return dict(reply.metadata)


async def listed(tree: TreeClient, page_size: int = 100, **filters: Any) -> list[str]:
    """Every id ListAll answers with `filters`, walking all pages."""
    ids: list[str] = []
    token = ""
    status = filters.pop("status", common_pb2.SESSION_STATUS_UNSPECIFIED)
    while True:
        reply: tree_pb2.ListAllResponse = await tree.stub.ListAll(
            tree_pb2.ListAllRequest(
                space_id=tree.space.sid,
                page_size=page_size,
                page_token=token,
                status=status,
                filter=common_pb2.SessionFilter(**filters),
            )
        )
        ids += [s.id for s in reply.sessions]
        token = reply.next_page_token
        if not token:
            return ids


async def violation_fields(call: Any) -> list[str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return [v.field for v in field_violations(caught.value)]


class TestWrite:
    async def test_create_stores_and_get_node_answers(self, tree: TreeClient) -> None:
        """Metadata given to CreateSession is answered by GetNode and ListAll."""
        node = await tree.create(metadata={"owner": "alice", "ticket": "T-1"})
        assert await metadata_of(tree, node.id) == {"owner": "alice", "ticket": "T-1"}
        reply = await tree.stub.ListAll(tree_pb2.ListAllRequest(space_id=tree.space.sid))
        assert dict(reply.sessions[0].metadata) == {"owner": "alice", "ticket": "T-1"}

    async def test_copy_source_metadata(self, tree: TreeClient) -> None:
        """A session copies its source's metadata only when asked, its own pairs on top."""
        source = await tree.create(metadata={"owner": "alice", "project": "x"})
        plain = await tree.child(source.id, source_session_id=source.id)
        copied = await tree.child(
            source.id,
            source_session_id=source.id,
            copy_source_metadata=True,
            metadata={"owner": "bob"},
        )
        assert await metadata_of(tree, plain.id) == {}
        assert await metadata_of(tree, copied.id) == {"owner": "bob", "project": "x"}

    async def test_copy_over_the_limit_is_refused(self, tree: TreeClient, pool: Any) -> None:
        """A copy whose result holds over 16 pairs is INVALID_ARGUMENT and creates nothing."""
        source = await tree.create(metadata={f"k{i}": "v" for i in range(16)})
        before = await pool.fetchval(
            "SELECT count(*) FROM sessions WHERE space_id = $1", tree.space.id
        )
        fields = await violation_fields(
            tree.create(
                source_session_id=source.id, copy_source_metadata=True, metadata={"extra": "1"}
            )
        )
        assert fields == ["metadata"]
        after = await pool.fetchval(
            "SELECT count(*) FROM sessions WHERE space_id = $1", tree.space.id
        )
        assert after == before

    async def test_update_merges_removes_and_writes_one_event(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Set and remove apply atomically; a change writes one METADATA_CHANGED event naming
        the session only; a change that changes nothing writes none."""
        node = await tree.create(metadata={"a": "1", "b": "2"})
        assert await update(tree, node.id, set={"b": "3", "c": "4"}, remove=["a"]) == {
            "b": "3",
            "c": "4",
        }
        assert await update(tree, node.id, set={"b": "3"}, remove=["zzz"]) == {"b": "3", "c": "4"}
        assert await metadata_of(tree, node.id) == {"b": "3", "c": "4"}
        kinds = [r["kind"] for r in await pool.fetch(EVENTS, tree.space.id)]
        assert kinds.count("metadata_changed") == 1

    async def test_unknown_and_foreign_sessions_are_not_found(
        self, tree: TreeClient, other_tree: TreeClient
    ) -> None:
        """Another space's session, or an unknown one, answers NOT_FOUND."""
        theirs = await other_tree.create()
        for session_id in (theirs.id, str(uuid.uuid4())):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await update(tree, session_id, set={"a": "1"})
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await metadata_of(other_tree, theirs.id) == {}


class TestLimits:
    @pytest.mark.parametrize(
        ("pairs", "field"),
        [
            pytest.param({"1bad": "v"}, 'set["1bad"]', id="key-starts-with-digit"),
            pytest.param({"a b": "v"}, 'set["a b"]', id="key-with-space"),
            pytest.param({"k" * 65: "v"}, f'set["{"k" * 65}"]', id="key-too-long"),
            pytest.param({"": "v"}, 'set[""]', id="empty-key"),
            pytest.param({"k": "v" * 513}, 'set["k"]', id="value-too-long"),
            pytest.param({f"k{i}": "" for i in range(17)}, "set", id="too-many-pairs"),
            pytest.param({f"k{i}": "v" * 500 for i in range(9)}, "set", id="over-4-KiB"),
        ],
    )
    async def test_over_a_limit_names_the_field_and_writes_nothing(
        self, tree: TreeClient, pool: asyncpg.Pool, pairs: dict[str, str], field: str
    ) -> None:
        """A key or value out of the limits, or too much in all, is INVALID_ARGUMENT naming
        the field, and nothing is written."""
        node = await tree.create(metadata={"keep": "me"})
        assert await violation_fields(update(tree, node.id, set=pairs)) == [field]
        assert await metadata_of(tree, node.id) == {"keep": "me"}

    async def test_limits_at_their_edge_pass(self, tree: TreeClient) -> None:
        """16 pairs, a 64-character key, a 512-character value, 4096 bytes pass."""
        pairs = {f"k{i:02}": "v" * 250 for i in range(15)}
        pairs["K" + "x" * 63] = "v" * (4096 - sum(3 + 250 for _ in range(15)) - 64)
        node = await tree.create(metadata=pairs)
        assert await metadata_of(tree, node.id) == pairs

    async def test_merged_result_is_checked(self, tree: TreeClient) -> None:
        """Adding a 17th pair to 16 is refused though the request alone is small, and the
        message says the sum is over (it said "at most 16 pairs, got 17" of a request of
        one pair)."""
        node = await tree.create(metadata={f"k{i}": "" for i in range(16)})
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await update(tree, node.id, set={"one": "more"})
        assert [(v.field, v.description) for v in field_violations(caught.value)] == [
            ("set", "with its own pairs the session would hold 17 pairs, over the 16 allowed")
        ]

    async def test_create_names_metadata_key(self, tree: TreeClient) -> None:
        """CreateSession names the bad key as `metadata["key"]`."""
        assert await violation_fields(tree.create(metadata={"bad key": "v"})) == [
            'metadata["bad key"]'
        ]

    async def test_remove_and_set_same_key(self, tree: TreeClient) -> None:
        """A key both set and removed, or a malformed key to remove, is INVALID_ARGUMENT."""
        node = await tree.create()
        fields = await violation_fields(update(tree, node.id, set={"a": "1"}, remove=["a", "-"]))
        assert sorted(fields) == ["remove[0]", "remove[1]"]


def _stamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


class TestFilters:
    async def test_each_filter(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Metadata (one and two keys), status, label prefix, parent, root, roots only and the
        created/updated ranges each list exactly the matching sessions, in order."""
        a = await tree.create(label="alpha one", metadata={"user": "u1", "team": "t1"})
        b = await tree.child(a.id, label="alpha two", metadata={"user": "u1", "team": "t2"})
        c = await tree.child(b.id, label="beta", metadata={"user": "u2"})
        d = await tree.create(label="Alpha", metadata={"user": "u1", "team": "t1"})
        await tree.stub.Archive(tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=d.id))
        times = {
            r["id"]: r
            for r in await pool.fetch(
                "SELECT id::text, created_at, updated_at FROM sessions WHERE space_id = $1",
                tree.space.id,
            )
        }
        assert await listed(tree, metadata={"user": "u1"}) == [a.id, b.id, d.id]
        assert await listed(tree, metadata={"user": "u1", "team": "t1"}) == [a.id, d.id]
        assert await listed(tree, metadata={"user": "u3"}) == []
        assert await listed(tree, status=common_pb2.SESSION_STATUS_ARCHIVED) == [d.id]
        assert await listed(tree, label_prefix="alpha") == [a.id, b.id]
        assert await listed(tree, parent_id=a.id) == [b.id]
        assert await listed(tree, root_id=a.id) == [a.id, b.id, c.id]
        assert await listed(tree, roots_only=True) == [a.id, d.id]
        assert await listed(
            tree,
            created_after=_stamp(times[b.id]["created_at"]),
            created_before=_stamp(times[d.id]["created_at"]),
        ) == [b.id, c.id]
        assert await listed(tree, updated_after=_stamp(times[d.id]["updated_at"])) == [d.id]
        assert await listed(
            tree,
            metadata={"user": "u1"},
            status=common_pb2.SESSION_STATUS_ACTIVE,
            label_prefix="alpha t",
        ) == [b.id]

    async def test_paging_walks_each_match_once(self, tree: TreeClient) -> None:
        """Pages of 2 over a metadata filter list every match once, in order."""
        ids = [(await tree.create(metadata={"m": "x" if i % 2 else "y"})).id for i in range(9)]
        assert await listed(tree, page_size=2, metadata={"m": "x"}) == ids[1::2]
        assert await listed(tree, page_size=2, label_prefix="Ro") == ids

    async def test_other_spaces_and_provisional_sessions_never_match(
        self, tree: TreeClient, other_tree: TreeClient
    ) -> None:
        """Another space's sessions and provisional ones never match a filter."""
        await other_tree.create(metadata={"user": "u1"})
        await tree.create(metadata={"user": "u1"}, provisional=True)
        mine = await tree.create(metadata={"user": "u1"})
        assert await listed(tree, metadata={"user": "u1"}) == [mine.id]
        assert await listed(tree, label_prefix="R") == [mine.id]

    async def test_bad_filters_are_named(self, tree: TreeClient) -> None:
        """Malformed filter fields are INVALID_ARGUMENT naming `filter.<field>`."""
        fields = await violation_fields(
            tree.stub.ListAll(
                tree_pb2.ListAllRequest(
                    space_id=tree.space.sid,
                    filter=common_pb2.SessionFilter(
                        metadata={"bad key": "v"}, parent_id="nope", label_prefix=""
                    ),
                )
            )
        )
        assert sorted(fields) == [
            "filter.label_prefix",
            'filter.metadata["bad key"]',
            "filter.parent_id",
        ]

    async def test_a_root_id_that_is_no_root_is_named(self, tree: TreeClient) -> None:
        """filter.root_id naming a child is INVALID_ARGUMENT naming `filter.root_id` and the
        child's parent (it answered an empty page: no session has a child as its root, so
        the child's tree a client meant silently listed nothing); an id of no session is
        NOT_FOUND, as a parent_id of none is (test_a_parent_or_root_of_no_session_...)."""
        root = await tree.create()
        child = await tree.child(root.id)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await listed(tree, root_id=child.id)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        [violation] = field_violations(caught.value)
        assert violation.field == "filter.root_id"
        assert root.id in violation.description
        assert await listed(tree, root_id=root.id) == [root.id, child.id]

    @pytest.mark.parametrize("field", ["parent_id", "root_id"])
    async def test_a_parent_or_root_of_no_session_is_not_found(
        self, tree: TreeClient, other_tree: TreeClient, field: str
    ) -> None:
        """An empty page whose filter.parent_id (or root_id) names no visible session of the
        space is NOT_FOUND naming the field, as GetChildren and GetTree's root_id are (a
        mistyped or deleted id listed nothing, silently); another space's session and a
        provisional one answer exactly as an unknown id (nothing leaks), and a session with
        nothing to list still answers an empty page."""
        lonely = await tree.create()
        by: dict[str, Any] = {field: lonely.id}
        assert await listed(tree, **by) == ([] if field == "parent_id" else [lonely.id])
        archived = await tree.child(lonely.id)
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=archived.id)
        )
        active = common_pb2.SESSION_STATUS_ACTIVE
        assert await listed(tree, status=active, parent_id=lonely.id) == []
        theirs = await other_tree.create()
        hidden = await tree.create(provisional=True)
        answers = []
        for named in (str(uuid.uuid4()), theirs.id, hidden.id):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await listed(tree, **{**by, field: named})
            error = caught.value
            assert error.code() == grpc.StatusCode.NOT_FOUND
            assert error_info_reason(error) == "SESSION_NOT_FOUND"
            assert f"filter.{field}" in (error.details() or "")
            answers.append((error.details() or "").replace(named, "<id>"))
        assert len(set(answers)) == 1, answers

    async def test_label_prefix_edges(self, tree: TreeClient) -> None:
        """A prefix matches by code points (non-ASCII included); LIKE's wildcards are text."""
        wanted = await tree.create(label="日本語のセッション")
        await tree.create(label="日本人")
        await tree.create(label="a%b")
        assert await listed(tree, label_prefix="日本語") == [wanted.id]
        assert await listed(tree, label_prefix="a%") != []
        assert await listed(tree, label_prefix="_") == []


class TestErasure:
    async def test_delete_leaves_no_metadata_row(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """DeleteSubtree hides the sessions from every filter at once and the erasure job
        leaves no metadata row of them."""
        root = await tree.create(metadata={"user": "u1"})
        await tree.child(root.id, metadata={"user": "u1"})
        await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=root.id)
        )
        assert await listed(tree, metadata={"user": "u1"}) == []
        await erased(pool)
        assert await pool.fetchval(ROWS, tree.space.id) == 0


def test_prefix_bounds() -> None:
    """The byte range of a prefix ends at its last character plus one (surrogates skipped)."""
    from tree_service.nodes.listing import prefix_bounds

    assert prefix_bounds("ab") == ("ab", "ac")
    assert prefix_bounds("a\U0010ffff") == ("a\U0010ffff", "b")
    assert prefix_bounds("\U0010ffff") == ("\U0010ffff", None)
    assert prefix_bounds("a\ud7ff") == ("a\ud7ff", "a\ue000")
