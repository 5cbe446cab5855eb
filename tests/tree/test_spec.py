"""STELLO-SPEC §6.3 (SessionTree behaviours 1-39) restated for gRPC with DESIGN §5's overrides.

Overrides applied: unknown ids are NOT_FOUND, not null (§5.1); TopologyNode carries
status (§5.2); refs to self/ancestor/descendant are FAILED_PRECONDITION (§5.3);
GetAncestors is nearest first and listings order by (created_at, id) (§5.8).
Item 16 (a legacy ``metadata.sourceSessionId``) has no counterpart: the schema has
only the first-class column. Item 30's turnCount belongs to storage (DESIGN §3),
so it is restated with the label alone.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient

pytestmark = pytest.mark.sql

ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED


async def roots(tree: TreeClient) -> list[common_pb2.TopologyNode]:
    reply: tree_pb2.ListRootsResponse = await tree.stub.ListRoots(
        tree_pb2.ListRootsRequest(space_id=tree.space.sid)
    )
    return list(reply.nodes)


async def summaries(tree: TreeClient) -> list[common_pb2.SessionSummary]:
    reply: tree_pb2.ListAllResponse = await tree.stub.ListAll(
        tree_pb2.ListAllRequest(space_id=tree.space.sid)
    )
    return list(reply.sessions)


async def ancestors(tree: TreeClient, session_id: str) -> list[common_pb2.TopologyNode]:
    reply: tree_pb2.GetAncestorsResponse = await tree.stub.GetAncestors(
        tree_pb2.GetAncestorsRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return list(reply.nodes)


async def siblings(tree: TreeClient, session_id: str) -> list[common_pb2.TopologyNode]:
    reply: tree_pb2.GetSiblingsResponse = await tree.stub.GetSiblings(
        tree_pb2.GetSiblingsRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return list(reply.nodes)


async def add_ref(tree: TreeClient, from_id: str, to_id: str) -> common_pb2.TopologyNode:
    reply: tree_pb2.AddRefResponse = await tree.stub.AddRef(
        tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=from_id, to_id=to_id)
    )
    return reply.node


async def put_config(tree: TreeClient, session_id: str, **fields: Any) -> None:
    await tree.stub.PutConfig(
        tree_pb2.PutConfigRequest(
            space_id=tree.space.sid,
            session_id=session_id,
            config=common_pb2.SessionConfig(**fields),
        )
    )


async def get_config(tree: TreeClient, session_id: str) -> common_pb2.SessionConfig | None:
    reply: tree_pb2.GetConfigResponse = await tree.stub.GetConfig(
        tree_pb2.GetConfigRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return reply.config if reply.HasField("config") else None


async def relabel(tree: TreeClient, session_id: str, label: str) -> common_pb2.TopologyNode:
    reply: tree_pb2.UpdateLabelResponse = await tree.stub.UpdateLabel(
        tree_pb2.UpdateLabelRequest(space_id=tree.space.sid, session_id=session_id, label=label)
    )
    return reply.node


def parent_of(node: common_pb2.TopologyNode | common_pb2.TreeNode) -> str | None:
    return node.parent_id if node.HasField("parent_id") else None


class TestSessionTreeSpec:
    async def test_01_labelled_root(self, tree: TreeClient) -> None:
        """§6.3.1: a labelled root: no parent, depth 0, index 0, that label, no children or refs."""
        node = await tree.create(label="我的根")
        assert (parent_of(node), node.depth, node.index, node.label) == (None, 0, 0, "我的根")
        assert (list(node.children), list(node.refs)) == ([], [])

    async def test_02_root_default_label(self, tree: TreeClient) -> None:
        """§6.3.2: a root without label is labelled "Root"."""
        assert (await tree.create()).label == "Root"

    async def test_03_two_roots(self, tree: TreeClient) -> None:
        """§6.3.3: two roots get different ids and ListRoots returns both at depth 0."""
        a, b = await tree.create(), await tree.create()
        assert a.id != b.id
        listed = await roots(tree)
        assert [n.id for n in listed] == [a.id, b.id]
        assert all(parent_of(n) is None and n.depth == 0 for n in listed)

    async def test_04_no_roots(self, tree: TreeClient) -> None:
        """§6.3.4: an empty space lists no roots."""
        assert await roots(tree) == []

    async def test_05_child(self, tree: TreeClient) -> None:
        """§6.3.5: a child has the parent, depth 1, index 0, nothing below; the parent lists it."""
        root = await tree.create()
        child = await tree.child(root.id)
        assert (parent_of(child), child.depth, child.index) == (root.id, 1, 0)
        assert (list(child.children), list(child.refs)) == ([], [])
        assert child.id in (await tree.node(root.id)).children

    async def test_06_child_default_label(self, tree: TreeClient) -> None:
        """§6.3.6: a child without label is labelled "Session"."""
        root = await tree.create()
        assert (await tree.child(root.id)).label == "Session"

    async def test_07_missing_parent(self, tree: TreeClient) -> None:
        """§6.3.7: a malformed parent id is INVALID_ARGUMENT; an unknown (zero) UUID NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.child("fake-id")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.child(str(uuid.UUID(int=0)))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_08_sequential_indexes(self, tree: TreeClient) -> None:
        """§6.3.8: children created in sequence get indexes 0 and 1."""
        root = await tree.create()
        assert [(await tree.child(root.id)).index for _ in range(2)] == [0, 1]

    async def test_09_concurrent_indexes(self, tree: TreeClient) -> None:
        """§6.3.9: 8 concurrent children get unique ids, indexes 0..7, and all are listed."""
        root = await tree.create()
        made = await asyncio.gather(*(tree.child(root.id) for _ in range(8)))
        assert len({n.id for n in made}) == 8
        assert sorted(n.index for n in made) == list(range(8))
        assert set((await tree.node(root.id)).children) == {n.id for n in made}

    async def test_10_source_session(self, tree: TreeClient) -> None:
        """§6.3.10: the created node and GetNode both report the source session."""
        root = await tree.create()
        a = await tree.child(root.id)
        b = await tree.child(root.id, label="B", source_session_id=a.id)
        assert b.source_session_id == a.id == (await tree.node(b.id)).source_session_id

    async def test_11_no_source_session(self, tree: TreeClient) -> None:
        """§6.3.11: without a source, the field is unset on the node and on GetNode."""
        root = await tree.create()
        child = await tree.child(root.id)
        assert not child.HasField("source_session_id")
        assert not (await tree.node(child.id)).HasField("source_session_id")

    async def test_12_meta_of_a_root(self, tree: TreeClient) -> None:
        """§6.3.12: a root's summary has id, label, active status and turn_count 0."""
        root = await tree.create(label="测试")
        (summary,) = await summaries(tree)
        assert (summary.id, summary.label, summary.status, summary.turn_count) == (
            root.id,
            "测试",
            ACTIVE,
            0,
        )
        assert not summary.HasField("parent_id")

    async def test_13_missing_meta(self, tree: TreeClient) -> None:
        """§6.3.13 with DESIGN §5.1: an unknown id is NOT_FOUND, not null."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.node(str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_14_list_all(self, tree: TreeClient) -> None:
        """§6.3.14: ListAll returns the root and both children."""
        root = await tree.create()
        children = [await tree.child(root.id) for _ in range(2)]
        assert [s.id for s in await summaries(tree)] == [root.id] + [c.id for c in children]

    async def test_15_get_node(self, tree: TreeClient) -> None:
        """§6.3.15 with DESIGN §5.2: GetNode shows parent, depth, exact children and status."""
        root = await tree.create(label="R")
        a, b = await tree.child(root.id), await tree.child(root.id)
        node = await tree.node(root.id)
        assert (parent_of(node), node.depth, node.label, node.status) == (None, 0, "R", ACTIVE)
        assert list(node.children) == [a.id, b.id]
        child = await tree.node(a.id)
        assert (parent_of(child), child.depth) == (root.id, 1)

    async def test_17_tree_shape(self, tree: TreeClient) -> None:
        """§6.3.17: root -> (A -> A1 sourced from A, B) comes back in pre-order with links."""
        root = await tree.create(label="root")
        a = await tree.child(root.id, label="A")
        b = await tree.child(root.id, label="B")
        a1 = await tree.child(a.id, label="A1", source_session_id=a.id)
        nodes = await tree.tree()
        assert [(n.id, parent_of(n)) for n in nodes] == [
            (root.id, None),
            (a.id, root.id),
            (a1.id, a.id),
            (b.id, root.id),
        ]
        assert nodes[2].source_session_id == a.id
        assert nodes[0].label == "root" and nodes[0].status == ACTIVE

    async def test_18_forest(self, tree: TreeClient) -> None:
        """§6.3.18: two roots give two tops, R1 with its child, R2 alone."""
        r1 = await tree.create(label="R1")
        c1 = await tree.child(r1.id)
        r2 = await tree.create(label="R2")
        nodes = await tree.tree()
        assert [(n.id, parent_of(n)) for n in nodes] == [
            (r1.id, None),
            (c1.id, r1.id),
            (r2.id, None),
        ]

    async def test_19_empty_forest(self, tree: TreeClient) -> None:
        """§6.3.19: no roots gives an empty tree (not an error)."""
        assert await tree.tree() == []

    async def test_20_ancestors_nearest_first(self, tree: TreeClient) -> None:
        """§6.3.20 with DESIGN §5.8: ancestors are [parent, root], nearest first."""
        root = await tree.create()
        child = await tree.child(root.id)
        grandchild = await tree.child(child.id)
        found = await ancestors(tree, grandchild.id)
        assert [(n.id, parent_of(n), n.depth) for n in found] == [
            (child.id, root.id, 1),
            (root.id, None, 0),
        ]

    async def test_21_root_has_no_ancestors(self, tree: TreeClient) -> None:
        """§6.3.21: a root has no ancestors."""
        assert await ancestors(tree, (await tree.create()).id) == []

    async def test_22_siblings(self, tree: TreeClient) -> None:
        """§6.3.22: B's siblings are exactly A and C, each under the root with depth and index."""
        root = await tree.create()
        a, b, c = [await tree.child(root.id) for _ in range(3)]
        found = await siblings(tree, b.id)
        assert [(n.id, parent_of(n), n.depth, n.index) for n in found] == [
            (a.id, root.id, 1, 0),
            (c.id, root.id, 1, 2),
        ]

    async def test_23_root_has_no_siblings(self, tree: TreeClient) -> None:
        """§6.3.23: a root has no siblings."""
        assert await siblings(tree, (await tree.create()).id) == []

    async def test_24_archive_does_not_cascade(self, tree: TreeClient) -> None:
        """§6.3.24: archiving a root leaves its child active."""
        root = await tree.create()
        child = await tree.child(root.id)
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=root.id)
        )
        assert (await tree.node(root.id)).status == ARCHIVED
        assert (await tree.node(child.id)).status == ACTIVE

    async def test_25_ref_between_siblings(self, tree: TreeClient) -> None:
        """§6.3.25: a ref between siblings shows in the from node's refs."""
        root = await tree.create()
        a, b = await tree.child(root.id), await tree.child(root.id)
        await add_ref(tree, a.id, b.id)
        assert list((await tree.node(a.id)).refs) == [b.id]

    @pytest.mark.parametrize(
        ("pair", "reason"),
        [
            pytest.param(("child", "child"), "REF_TO_SELF", id="26-self"),
            pytest.param(("child", "root"), "REF_TO_ANCESTOR", id="27-ancestor"),
            pytest.param(("root", "child"), "REF_TO_DESCENDANT", id="28-descendant"),
        ],
    )
    async def test_26_to_28_refused_refs(
        self, tree: TreeClient, pair: tuple[str, str], reason: str
    ) -> None:
        """§6.3.26-28, DESIGN §5.3: self, ancestor and descendant refs are FAILED_PRECONDITION."""
        root = await tree.create()
        child = await tree.child(root.id)
        ids = {"root": root.id, "child": child.id}
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await add_ref(tree, ids[pair[0]], ids[pair[1]])
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(caught.value) == reason

    async def test_29_ref_twice(self, tree: TreeClient) -> None:
        """§6.3.29: adding the same ref twice keeps one and does not fail."""
        a, b = await tree.create(), await tree.create()
        await add_ref(tree, a.id, b.id)
        assert list((await add_ref(tree, a.id, b.id)).refs) == [b.id]

    async def test_30_update_label(self, tree: TreeClient) -> None:
        """§6.3.30: a new label is answered and re-read."""
        root = await tree.create()
        assert (await relabel(tree, root.id, "新名称")).label == "新名称"
        assert (await tree.node(root.id)).label == "新名称"

    async def test_31_config_round_trip(self, tree: TreeClient) -> None:
        """§6.3.31: a prompt and two skills read back deep-equal."""
        root = await tree.create()
        skills = common_pb2.SkillList(names=["math", "code"])
        await put_config(tree, root.id, system_prompt="sys", skills=skills)
        assert await get_config(tree, root.id) == common_pb2.SessionConfig(
            system_prompt="sys", skills=skills
        )

    async def test_32_no_config(self, tree: TreeClient) -> None:
        """§6.3.32: a session without config reads `config` unset."""
        assert await get_config(tree, (await tree.create()).id) is None

    async def test_33_config_overwrite(self, tree: TreeClient) -> None:
        """§6.3.33: two puts read back exactly the second."""
        root = await tree.create()
        await put_config(tree, root.id, system_prompt="one", skills=common_pb2.SkillList())
        await put_config(tree, root.id, system_prompt="two")
        assert await get_config(tree, root.id) == common_pb2.SessionConfig(system_prompt="two")

    async def test_34_config_key_presence(self, tree: TreeClient) -> None:
        """§6.3.34: a prompt-only config has no skills; a skills-only one has no prompt."""
        a, b = await tree.create(), await tree.create()
        await put_config(tree, a.id, system_prompt="p")
        await put_config(tree, b.id, skills=common_pb2.SkillList(names=["x"]))
        config_a, config_b = await get_config(tree, a.id), await get_config(tree, b.id)
        assert config_a is not None and not config_a.HasField("skills")
        assert config_b is not None and not config_b.HasField("system_prompt")

    async def test_35_empty_config(self, tree: TreeClient) -> None:
        """§6.3.35: an empty config reads back set and empty, not unset."""
        root = await tree.create()
        await put_config(tree, root.id)
        assert await get_config(tree, root.id) == common_pb2.SessionConfig()

    async def test_36_config_and_meta_independent(self, tree: TreeClient) -> None:
        """§6.3.36: a label change keeps the config; a config change keeps the label."""
        root = await tree.create()
        await put_config(tree, root.id, system_prompt="p")
        await relabel(tree, root.id, "L")
        assert await get_config(tree, root.id) == common_pb2.SessionConfig(system_prompt="p")
        await put_config(tree, root.id, system_prompt="q")
        assert (await tree.node(root.id)).label == "L"

    async def test_37_spaces_are_isolated(self, tree: TreeClient, other_tree: TreeClient) -> None:
        """§6.3.37: a root in one space is NOT_FOUND in another, whose ListAll stays empty."""
        root = await tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await other_tree.node(root.id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await summaries(other_tree) == []

    async def test_38_concurrent_relabel_and_child(self, tree: TreeClient) -> None:
        """§6.3.38: a concurrent UpdateLabel(parent) and child creation both persist."""
        root = await tree.create()
        _, child = await asyncio.gather(relabel(tree, root.id, "new"), tree.child(root.id))
        node = await tree.node(root.id)
        assert (node.label, list(node.children)) == ("new", [child.id])

    async def test_39_child_of_archived_parent(self, tree: TreeClient) -> None:
        """§6.3.39 with DESIGN §5.4: creating a child under an archived parent succeeds."""
        root = await tree.create()
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=root.id)
        )
        assert parent_of(await tree.child(root.id)) == root.id
