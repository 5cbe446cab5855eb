"""Archive, Unarchive, UpdateLabel, GetConfig and PutConfig."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypedDict

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient

pytestmark = pytest.mark.sql

EVENTS = "SELECT kind, session_id FROM space_events WHERE space_id = $1 ORDER BY position"
ACTIVE = common_pb2.SESSION_STATUS_ACTIVE
ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED


async def archive(tree: TreeClient, session_id: str) -> common_pb2.TopologyNode:
    reply: tree_pb2.ArchiveResponse = await tree.stub.Archive(
        tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return reply.node


async def unarchive(tree: TreeClient, session_id: str) -> common_pb2.TopologyNode:
    reply: tree_pb2.UnarchiveResponse = await tree.stub.Unarchive(
        tree_pb2.UnarchiveRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return reply.node


async def relabel(tree: TreeClient, session_id: str, label: str) -> common_pb2.TopologyNode:
    reply: tree_pb2.UpdateLabelResponse = await tree.stub.UpdateLabel(
        tree_pb2.UpdateLabelRequest(space_id=tree.space.sid, session_id=session_id, label=label)
    )
    return reply.node


async def put_config(
    tree: TreeClient, session_id: str, config: common_pb2.SessionConfig
) -> common_pb2.SessionConfig:
    reply: tree_pb2.PutConfigResponse = await tree.stub.PutConfig(
        tree_pb2.PutConfigRequest(space_id=tree.space.sid, session_id=session_id, config=config)
    )
    return reply.config


async def get_config(tree: TreeClient, session_id: str) -> common_pb2.SessionConfig | None:
    reply: tree_pb2.GetConfigResponse = await tree.stub.GetConfig(
        tree_pb2.GetConfigRequest(space_id=tree.space.sid, session_id=session_id)
    )
    return reply.config if reply.HasField("config") else None


async def updated_at(pool: asyncpg.Pool, tree: TreeClient, session_id: str) -> datetime:
    async with pool.acquire() as con:
        stamp: datetime = await con.fetchval(
            "SELECT updated_at FROM sessions WHERE space_id = $1 AND id = $2",
            tree.space.id,
            uuid.UUID(session_id),
        )
    return stamp


class TestArchive:
    async def test_no_cascade(self, tree: TreeClient) -> None:
        """Archiving a parent leaves its children, refs and config alone."""
        root = await tree.create(config=common_pb2.SessionConfig(system_prompt="p"))
        child = await tree.child(root.id)
        other = await tree.create()
        await tree.stub.AddRef(
            tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=root.id, to_id=other.id)
        )
        node = await archive(tree, root.id)
        assert node.status == ARCHIVED and list(node.refs) == [other.id]
        assert (await tree.node(child.id)).status == ACTIVE
        config = await get_config(tree, root.id)
        assert config is not None and config.system_prompt == "p"

    async def test_idempotent_and_reversible(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Archiving twice changes nothing the second time; Unarchive makes it active again."""
        root = await tree.create()
        await archive(tree, root.id)
        stamp = await updated_at(pool, tree, root.id)
        assert (await archive(tree, root.id)).status == ARCHIVED
        assert await updated_at(pool, tree, root.id) == stamp
        assert (await unarchive(tree, root.id)).status == ACTIVE
        assert (await unarchive(tree, root.id)).status == ACTIVE

    @pytest.mark.parametrize("rpc", [archive, unarchive])
    async def test_unknown_is_not_found(
        self, tree: TreeClient, rpc: Callable[[TreeClient, str], Awaitable[common_pb2.TopologyNode]]
    ) -> None:
        """Archive and Unarchive of an unknown id answer NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rpc(tree, str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestUpdateLabel:
    async def test_relabel_bumps(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A new label shows in the node and the tree, and bumps updated_at."""
        root = await tree.create(label="old")
        stamp = await updated_at(pool, tree, root.id)
        assert (await relabel(tree, root.id, "新名称")).label == "新名称"
        assert [n.label for n in await tree.tree()] == ["新名称"]
        assert await updated_at(pool, tree, root.id) > stamp

    async def test_the_same_label_changes_nothing(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A relabel to the label the session has answers its node and, like a no-op Archive,
        bumps nothing and writes no event (it wrote a SESSION_UPDATED event a watcher had to
        re-read the session for); a real change writes one."""
        root = await tree.create(label="same")
        stamp = await updated_at(pool, tree, root.id)
        before = await pool.fetch(EVENTS, tree.space.id)
        node = await relabel(tree, root.id, "same")
        assert (node.id, node.label, node.status) == (root.id, "same", ACTIVE)
        assert await updated_at(pool, tree, root.id) == stamp
        assert await pool.fetch(EVENTS, tree.space.id) == before
        await relabel(tree, root.id, "other")
        added = (await pool.fetch(EVENTS, tree.space.id))[len(before) :]
        assert [(r["kind"], str(r["session_id"])) for r in added] == [("session_updated", root.id)]

    async def test_archived_is_refused(self, tree: TreeClient) -> None:
        """An archived session refuses a new label: FAILED_PRECONDITION SESSION_ARCHIVED."""
        root = await tree.create(label="kept")
        await archive(tree, root.id)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await relabel(tree, root.id, "new")
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(caught.value) == "SESSION_ARCHIVED"
        assert (await tree.node(root.id)).label == "kept"

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """Relabelling an unknown id answers NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await relabel(tree, str(uuid.uuid4()), "x")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


class TestWithoutLinks:
    async def test_the_node_comes_without_children_and_refs(self, tree: TreeClient) -> None:
        """With `without_links`, Archive, Unarchive and UpdateLabel (a change or none) answer
        the node with no children and no refs (neither read); without it, both."""
        root = await tree.create(label="kept")
        child = await tree.child(root.id)
        other = await tree.create()
        await tree.stub.AddRef(
            tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=root.id, to_id=other.id)
        )
        sid, rid = tree.space.sid, root.id
        bare = [
            (await tree.stub.Archive(tree_pb2.ArchiveRequest(**bare_of(sid, rid)))).node,
            (await tree.stub.Unarchive(tree_pb2.UnarchiveRequest(**bare_of(sid, rid)))).node,
        ]
        for label in ("new", "new"):  # a change, then none
            request = tree_pb2.UpdateLabelRequest(label=label, **bare_of(sid, rid))
            bare.append((await tree.stub.UpdateLabel(request)).node)
        assert [(n.id, n.status, n.label) for n in bare] == [
            (rid, ARCHIVED, "kept"),
            (rid, ACTIVE, "kept"),
            (rid, ACTIVE, "new"),
            (rid, ACTIVE, "new"),
        ]
        assert [(list(n.children), list(n.refs)) for n in bare] == [([], [])] * 4
        linked = await relabel(tree, rid, "newer")
        assert (list(linked.children), list(linked.refs)) == ([child.id], [other.id])


class Bare(TypedDict):
    """The fields of a request that asks for the node without its links."""

    space_id: str
    session_id: str
    without_links: bool


def bare_of(space_id: str, session_id: str) -> Bare:
    """The fields of a request that asks for the node without its links."""
    return Bare(space_id=space_id, session_id=session_id, without_links=True)


class TestConfig:
    @pytest.mark.parametrize(
        "config",
        [
            pytest.param(common_pb2.SessionConfig(), id="empty"),
            pytest.param(common_pb2.SessionConfig(system_prompt=""), id="empty-prompt"),
            pytest.param(common_pb2.SessionConfig(system_prompt="be brief"), id="prompt-only"),
            pytest.param(
                common_pb2.SessionConfig(skills=common_pb2.SkillList(names=[])), id="no-skills"
            ),
            pytest.param(
                common_pb2.SessionConfig(
                    system_prompt="p", skills=common_pb2.SkillList(names=["math", "code"])
                ),
                id="both",
            ),
            pytest.param(
                common_pb2.SessionConfig(compressor_prompt="C", consolidator_prompt=""),
                id="prompt-overrides",
            ),
        ],
    )
    async def test_round_trip_keeps_presence(
        self, tree: TreeClient, config: common_pb2.SessionConfig
    ) -> None:
        """PutConfig then GetConfig answers exactly what was written, field presence included."""
        root = await tree.create()
        assert await put_config(tree, root.id, config) == config
        stored = await get_config(tree, root.id)
        assert stored == config
        assert stored is not None
        for name in ("system_prompt", "skills", "compressor_prompt", "consolidator_prompt"):
            assert stored.HasField(name) == config.HasField(name)

    async def test_stored_json_has_only_set_keys(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The jsonb keeps a key only for set fields (skills [] kept as a key)."""
        root = await tree.create()
        await put_config(
            tree, root.id, common_pb2.SessionConfig(skills=common_pb2.SkillList(names=[]))
        )
        async with pool.acquire() as con:
            stored = await con.fetchval(
                "SELECT config FROM session_configs WHERE space_id = $1", tree.space.id
            )
        assert stored == {"skills": []}

    async def test_overwrite_not_merge(self, tree: TreeClient) -> None:
        """A second PutConfig replaces the whole config."""
        root = await tree.create()
        await put_config(
            tree,
            root.id,
            common_pb2.SessionConfig(system_prompt="a", skills=common_pb2.SkillList(names=["x"])),
        )
        await put_config(tree, root.id, common_pb2.SessionConfig(system_prompt="b"))
        assert await get_config(tree, root.id) == common_pb2.SessionConfig(system_prompt="b")

    async def test_independent_of_meta(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """PutConfig leaves the label and updated_at alone; UpdateLabel leaves the config alone."""
        root = await tree.create(label="L")
        stamp = await updated_at(pool, tree, root.id)
        await put_config(tree, root.id, common_pb2.SessionConfig(system_prompt="p"))
        assert await updated_at(pool, tree, root.id) == stamp
        await relabel(tree, root.id, "M")
        assert await get_config(tree, root.id) == common_pb2.SessionConfig(system_prompt="p")

    async def test_allowed_on_archived(self, tree: TreeClient) -> None:
        """PutConfig is allowed on an archived session."""
        root = await tree.create()
        await archive(tree, root.id)
        config = common_pb2.SessionConfig(system_prompt="p")
        assert await put_config(tree, root.id, config) == config

    async def test_unknown_is_not_found(self, tree: TreeClient) -> None:
        """GetConfig and PutConfig of an unknown or provisional id answer NOT_FOUND."""
        hidden = await tree.create(provisional=True)
        for session_id in (str(uuid.uuid4()), hidden.id):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await get_config(tree, session_id)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await put_config(tree, session_id, common_pb2.SessionConfig())
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
