"""Topology reads: GetNode, ListRoots, ListAll, GetChildren, GetSiblings, GetAncestors."""

from __future__ import annotations

import uuid
from base64 import b64decode, b64encode
from collections.abc import Awaitable
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient

pytestmark = pytest.mark.sql

ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE


async def list_all(tree: TreeClient, **fields: Any) -> tree_pb2.ListAllResponse:
    reply: tree_pb2.ListAllResponse = await tree.stub.ListAll(
        tree_pb2.ListAllRequest(space_id=tree.space.sid, **fields)
    )
    return reply


async def ids(call: Awaitable[Any]) -> list[str]:
    reply = await call
    return [n.id for n in reply.nodes]


class TestGetNode:
    async def test_node_has_links_and_status(self, tree: TreeClient) -> None:
        """GetNode answers parent, children by index, refs by insertion, depth, label and status."""
        root = await tree.create(label="R")
        a, b = await tree.child(root.id), await tree.child(root.id)
        x, y, z = await tree.create(), await tree.create(), await tree.create()
        for target in (z.id, x.id, y.id):
            await tree.stub.AddRef(
                tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=root.id, to_id=target)
            )
        for gone in (a.id, x.id):
            await tree.stub.DeleteSubtree(
                tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=gone)
            )
        c = await tree.child(root.id)
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=root.id)
        )
        node = await tree.node(root.id)
        assert list(node.children) == [b.id, c.id]
        assert list(node.refs) == [z.id, y.id]
        assert (node.label, node.depth, node.status) == ("R", 0, ARCHIVED)

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """An unknown id answers NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.node(str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestGetNodeWithConfig:
    """GetNode with include_config: the node and the stored config in one call."""

    async def _get(self, tree: TreeClient, session_id: str, **fields: Any) -> Any:
        return await tree.stub.GetNode(
            tree_pb2.GetNodeRequest(space_id=tree.space.sid, session_id=session_id, **fields)
        )

    async def test_answers_the_node_and_the_config_as_get_config(self, tree: TreeClient) -> None:
        """The node is GetNode's, the config GetConfig's exactly (presence of each field kept)."""
        root = await tree.create(label="R")
        node = await tree.create(
            parent_id=root.id,
            label="C",
            config=common_pb2.SessionConfig(
                system_prompt="be brief", skills=common_pb2.SkillList(names=[])
            ),
        )
        reply = await self._get(tree, node.id, include_config=True)
        config = await tree.stub.GetConfig(
            tree_pb2.GetConfigRequest(space_id=tree.space.sid, session_id=node.id)
        )
        assert reply.node == await tree.node(node.id)
        assert reply.HasField("config") and reply.config == config.config
        assert reply.config.HasField("skills") and list(reply.config.skills.names) == []
        assert reply.config.system_prompt == "be brief"

    async def test_no_config_written_is_unset(self, tree: TreeClient) -> None:
        """A session that never had a config answers the node and `config` unset."""
        node = await tree.create(label="plain")
        reply = await self._get(tree, node.id, include_config=True)
        assert reply.node.label == "plain"
        assert not reply.HasField("config")

    async def test_without_the_flag_no_config_is_read(self, tree: TreeClient) -> None:
        """Plain GetNode leaves `config` unset even when the session has one."""
        node = await tree.create(config=common_pb2.SessionConfig(system_prompt="p"))
        reply = await self._get(tree, node.id)
        assert not reply.HasField("config")

    async def test_malformed_session_id_is_invalid(self, tree: TreeClient) -> None:
        """A malformed session_id is INVALID_ARGUMENT naming the field."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await self._get(tree, "nope", include_config=True)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == ["session_id"]

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """An unknown id answers NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await self._get(tree, str(uuid.uuid4()), include_config=True)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestListRoots:
    async def test_empty_space(self, tree: TreeClient) -> None:
        """An empty space has no roots."""
        assert (
            await ids(tree.stub.ListRoots(tree_pb2.ListRootsRequest(space_id=tree.space.sid))) == []
        )

    async def test_roots_by_creation(self, tree: TreeClient) -> None:
        """Roots (archived included) come by (created_at, id); children are not roots."""
        first = await tree.create()
        await tree.child(first.id)
        second = await tree.create()
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=second.id)
        )
        listed = await ids(tree.stub.ListRoots(tree_pb2.ListRootsRequest(space_id=tree.space.sid)))
        assert listed == [first.id, second.id]


class TestListAll:
    async def test_pages_cover_everything_once(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Pages of 3 walk 10 sessions in (created_at, id) order, each once, then an empty token."""
        root = await tree.create()
        made = [root.id] + [(await tree.child(root.id)).id for _ in range(9)]
        async with pool.acquire() as con:
            # Equal timestamps: the id breaks the tie, and the key paging must too.
            await con.execute(
                "UPDATE sessions SET created_at = '2030-01-01' WHERE space_id = $1", tree.space.id
            )
        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            reply = await list_all(tree, page_size=3, page_token=token)
            seen += [s.id for s in reply.sessions]
            pages += 1
            token = reply.next_page_token
            if not token:
                break
        assert pages == 4
        assert seen == sorted(made, key=uuid.UUID)

    @pytest.mark.parametrize(
        "other",
        [
            pytest.param({"status": ARCHIVED}, id="status"),
            pytest.param({"filter": common_pb2.SessionFilter(label_prefix="b")}, id="filter"),
            pytest.param({}, id="no-filter"),
        ],
    )
    async def test_a_token_is_refused_by_a_listing_with_other_fields(
        self, tree: TreeClient, other: dict[str, Any]
    ) -> None:
        """A token continues only the listing that answered it: with another status or other
        filters it is INVALID_ARGUMENT on page_token (explore12 F8: it was taken, and the
        walk went on under the new filters from the old one's position)."""
        for label in ("a1", "a2", "b1"):
            await tree.create(label=label)
        asked: dict[str, Any] = {"filter": common_pb2.SessionFilter(label_prefix="a")}
        first = await list_all(tree, page_size=1, **asked)
        assert first.next_page_token
        again = await list_all(tree, page_size=1, page_token=first.next_page_token, **asked)
        assert [s.label for s in again.sessions] == ["a2"]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await list_all(tree, page_size=1, page_token=first.next_page_token, **other)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == (
            "page_token: was answered to a listing with another status or other filters; pass "
            "next_page_token with the same request, or leave it empty to start again"
        )

    async def test_a_token_made_before_tokens_were_bound_is_taken(self, tree: TreeClient) -> None:
        """A token of the older form (no binding: held by a client across the upgrade)
        still continues a listing."""
        made = [(await tree.create(label=f"s{i}")).id for i in range(3)]
        first = await list_all(tree, page_size=1)
        micros, hex_id, _ = b64decode(first.next_page_token, altchars=b"-_").decode().split(".")
        older = b64encode(f"{micros}.{hex_id}".encode(), altchars=b"-_").decode()
        rest = await list_all(tree, page_size=5, page_token=older)
        assert [s.id for s in [*first.sessions, *rest.sessions]] == made

    async def test_summary_fields(self, tree: TreeClient) -> None:
        """A summary has parent, label, status, turn count and the three timestamps."""
        root = await tree.create(label="R")
        child = await tree.child(root.id, label="C")
        reply = await list_all(tree)
        by_id = {s.id: s for s in reply.sessions}
        assert not by_id[root.id].HasField("parent_id")
        summary = by_id[child.id]
        assert (summary.parent_id, summary.label, summary.status, summary.turn_count) == (
            root.id,
            "C",
            ACTIVE,
            0,
        )
        assert summary.created_at.seconds > 0 and summary.last_active_at.seconds > 0
        assert reply.next_page_token == ""

    async def test_status_filter(self, tree: TreeClient) -> None:
        """The status filter keeps only matching sessions; UNSPECIFIED keeps all."""
        a, b = await tree.create(), await tree.create()
        await tree.stub.Archive(tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=b.id))
        assert [s.id for s in (await list_all(tree, status=ARCHIVED)).sessions] == [b.id]
        assert [s.id for s in (await list_all(tree, status=ACTIVE)).sessions] == [a.id]
        assert len((await list_all(tree)).sessions) == 2

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            pytest.param({"page_size": -1}, "page_size", id="negative-size"),
            pytest.param({"page_size": 1001}, "page_size", id="size-over-max"),
            pytest.param({"page_token": "not-a-token"}, "page_token", id="bad-token"),
            pytest.param({"status": 9}, "status", id="unknown-status"),
        ],
    )
    async def test_bad_paging_is_invalid(
        self, tree: TreeClient, fields: dict[str, object], field: str
    ) -> None:
        """A bad page size, token or status filter answers INVALID_ARGUMENT naming the field."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await list_all(tree, **fields)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == [field]

    async def test_an_unknown_status_lists_the_values(self, tree: TreeClient) -> None:
        """A status number no SessionStatus has names the values (it said "is not a
        SessionStatus, got 9")."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await list_all(tree, status=9)
        assert [v.description for v in field_violations(caught.value)] == [
            "must be one of active, archived, got 9"
        ]


class TestGetChildren:
    async def test_children_by_index(self, tree: TreeClient) -> None:
        """Children come in index order, archived included; a leaf has none."""
        root = await tree.create()
        a, b = await tree.child(root.id), await tree.child(root.id)
        await tree.stub.Archive(tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=a.id))
        req = tree_pb2.GetChildrenRequest
        assert await ids(
            tree.stub.GetChildren(req(space_id=tree.space.sid, session_id=root.id))
        ) == [
            a.id,
            b.id,
        ]
        assert await ids(tree.stub.GetChildren(req(space_id=tree.space.sid, session_id=b.id))) == []

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """Children of an unknown session answer NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.GetChildren(
                tree_pb2.GetChildrenRequest(space_id=tree.space.sid, session_id=str(uuid.uuid4()))
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestGetSiblings:
    async def test_siblings_exclude_self(self, tree: TreeClient) -> None:
        """Siblings are the parent's other children by index; roots have none."""
        root = await tree.create()
        await tree.create()  # another root is not a sibling
        a, b, c = [await tree.child(root.id) for _ in range(3)]
        req = tree_pb2.GetSiblingsRequest
        assert await ids(tree.stub.GetSiblings(req(space_id=tree.space.sid, session_id=b.id))) == [
            a.id,
            c.id,
        ]
        assert (
            await ids(tree.stub.GetSiblings(req(space_id=tree.space.sid, session_id=root.id))) == []
        )

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """Siblings of an unknown session answer NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.GetSiblings(
                tree_pb2.GetSiblingsRequest(space_id=tree.space.sid, session_id=str(uuid.uuid4()))
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestGetAncestors:
    async def test_nearest_first(self, tree: TreeClient) -> None:
        """Ancestors come parent first, root last; a root has none."""
        root = await tree.create()
        child = await tree.child(root.id)
        grandchild = await tree.child(child.id)
        req = tree_pb2.GetAncestorsRequest
        reply = await tree.stub.GetAncestors(req(space_id=tree.space.sid, session_id=grandchild.id))
        assert [(n.id, n.depth) for n in reply.nodes] == [(child.id, 1), (root.id, 0)]
        assert reply.nodes[0].parent_id == root.id and not reply.nodes[1].HasField("parent_id")
        assert (
            await ids(tree.stub.GetAncestors(req(space_id=tree.space.sid, session_id=root.id)))
            == []
        )

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """Ancestors of an unknown session answer NOT_FOUND (not an empty list)."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.GetAncestors(
                tree_pb2.GetAncestorsRequest(space_id=tree.space.sid, session_id=str(uuid.uuid4()))
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
