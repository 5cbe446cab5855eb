"""Bad input answers INVALID_ARGUMENT with field violations, and writes nothing."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import field_violations
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient, session_count

pytestmark = pytest.mark.sql


def with_unknown_field(config: common_pb2.SessionConfig, skills: bool = False) -> Any:
    """A config carrying a field number this server does not know (a newer client's field)."""
    extra = b"\x9a\x06\x02hi"  # field 99, length-delimited
    if skills:
        inner = common_pb2.SkillList.FromString(config.skills.SerializeToString() + extra)
        parsed = common_pb2.SessionConfig()
        parsed.skills.CopyFrom(inner)
        return parsed
    return common_pb2.SessionConfig.FromString(config.SerializeToString() + extra)


MIB = 1024 * 1024
CONFIG_LIMITS: list[tuple[common_pb2.SessionConfig, str, str]] = [
    (
        common_pb2.SessionConfig(system_prompt="é" * (MIB // 2) + "x"),
        "config.system_prompt",
        "system-prompt-over-the-slot-limit-in-bytes",
    ),
    (
        common_pb2.SessionConfig(compressor_prompt="x" * (MIB + 1)),
        "config.compressor_prompt",
        "compressor-prompt-over-the-slot-limit",
    ),
    (
        common_pb2.SessionConfig(consolidator_prompt="x" * (MIB + 1)),
        "config.consolidator_prompt",
        "consolidator-prompt-over-the-slot-limit",
    ),
    (
        common_pb2.SessionConfig(skills=common_pb2.SkillList(names=["ok", ""])),
        "config.skills.names[1]",
        "skill-name-empty",
    ),
    (
        common_pb2.SessionConfig(skills=common_pb2.SkillList(names=["s" * 65])),
        "config.skills.names[0]",
        "skill-name-65",
    ),
    (
        common_pb2.SessionConfig(skills=common_pb2.SkillList(names=["a b"])),
        "config.skills.names[0]",
        "skill-name-space",
    ),
    (
        common_pb2.SessionConfig(skills=common_pb2.SkillList(names=["ok\n"])),
        "config.skills.names[0]",
        "skill-name-trailing-newline",
    ),
]
"""What a config may hold (common.v1 SessionConfig): the slot limit (1 MiB by default) on
each prompt, in UTF-8 bytes, and the gateway's skill names (explore16 D5: a 2 MiB system
prompt was stored, and a Fork from the session failed naming a field its caller never set)."""

CREATE_CASES = [
    pytest.param({"space_id": "nope"}, ["space_id"], id="space-malformed"),
    pytest.param({"parent_id": "nope"}, ["parent_id"], id="parent-malformed"),
    pytest.param({"parent_id": ""}, ["parent_id"], id="parent-empty-but-set"),
    pytest.param({"source_session_id": "42"}, ["source_session_id"], id="source-malformed"),
    pytest.param({"label": ""}, ["label"], id="label-empty"),
    pytest.param({"label": "   "}, ["label"], id="label-blank"),
    pytest.param({"label": "x" * 201}, ["label"], id="label-201"),
    pytest.param({"label": "a\x01b"}, ["label"], id="label-control-character"),
    pytest.param({"label": "a\u2028b"}, ["label"], id="label-line-separator"),
    pytest.param({"request_id": "r" * 201}, ["request_id"], id="request-id-too-long"),
    pytest.param(
        {"config": with_unknown_field(common_pb2.SessionConfig(system_prompt="p"))},
        ["config"],
        id="config-unknown-field",
    ),
    pytest.param(
        {
            "config": with_unknown_field(
                common_pb2.SessionConfig(skills=common_pb2.SkillList(names=["a"])), skills=True
            )
        },
        ["config.skills"],
        id="skills-unknown-field",
    ),
    pytest.param({"parent_id": "bad", "label": ""}, ["parent_id", "label"], id="two-at-once"),
    *(pytest.param({"config": c}, [bad], id=i) for c, bad, i in CONFIG_LIMITS),
]

SESSION_RPCS = [
    "CommitSession",
    "GetNode",
    "GetChildren",
    "GetSiblings",
    "GetAncestors",
    "Archive",
    "Unarchive",
    "GetConfig",
    "DeleteSubtree",
]


class TestBadInput:
    @pytest.mark.parametrize(("fields", "bad"), CREATE_CASES)
    async def test_create_session(
        self, tree: TreeClient, pool: asyncpg.Pool, fields: dict[str, Any], bad: list[str]
    ) -> None:
        """A malformed CreateSession names each bad field and creates nothing."""
        request = {"space_id": tree.space.sid, **fields}
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.CreateSession(tree_pb2.CreateSessionRequest(**request))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == bad
        assert await session_count(pool, tree.space.id) == 0

    async def test_label_of_200_characters_is_fine(self, tree: TreeClient) -> None:
        """A label of exactly 200 characters (any script) is accepted."""
        assert (await tree.create(label="名" * 200)).label == "名" * 200

    @pytest.mark.parametrize("rpc", SESSION_RPCS)
    @pytest.mark.parametrize("session_id", ["", "not-a-uuid"])
    async def test_session_id(self, tree: TreeClient, rpc: str, session_id: str) -> None:
        """Every RPC on one session refuses a missing or malformed session_id, naming it."""
        request_type = getattr(tree_pb2, f"{rpc}Request")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(tree.stub, rpc)(
                request_type(space_id=tree.space.sid, session_id=session_id)
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == ["session_id"]

    @pytest.mark.parametrize("rpc", ["AddRef", "RemoveRef"])
    async def test_ref_ids(self, tree: TreeClient, rpc: str) -> None:
        """AddRef and RemoveRef name each malformed end."""
        request_type = getattr(tree_pb2, f"{rpc}Request")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(tree.stub, rpc)(
                request_type(space_id=tree.space.sid, from_id="x", to_id="y")
            )
        assert [v.field for v in field_violations(caught.value)] == ["from_id", "to_id"]

    @pytest.mark.parametrize("label", ["", "x" * 201, "two\nlines", "\x9bred"])
    async def test_update_label(self, tree: TreeClient, label: str) -> None:
        """UpdateLabel refuses an empty, over-long or multi-line label, or one holding a
        control character (a terminal escape), and keeps the old one."""
        root = await tree.create(label="kept")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.UpdateLabel(
                tree_pb2.UpdateLabelRequest(
                    space_id=tree.space.sid, session_id=root.id, label=label
                )
            )
        assert [v.field for v in field_violations(caught.value)] == ["label"]
        assert (await tree.node(root.id)).label == "kept"

    @pytest.mark.parametrize(
        ("config", "bad"),
        [
            pytest.param(None, ["config"], id="unset"),
            pytest.param(
                with_unknown_field(common_pb2.SessionConfig()), ["config"], id="unknown-field"
            ),
            *(pytest.param(c, [bad], id=i) for c, bad, i in CONFIG_LIMITS),
        ],
    )
    async def test_put_config(
        self, tree: TreeClient, pool: asyncpg.Pool, config: Any, bad: list[str]
    ) -> None:
        """PutConfig refuses a missing config, unknown fields or a config over its limits,
        and stores nothing."""
        root = await tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.PutConfig(
                tree_pb2.PutConfigRequest(
                    space_id=tree.space.sid, session_id=root.id, config=config
                )
            )
        assert [v.field for v in field_violations(caught.value)] == bad
        async with pool.acquire() as con:
            assert (
                await con.fetchval(
                    "SELECT count(*) FROM session_configs WHERE space_id = $1", tree.space.id
                )
                == 0
            )

    @pytest.mark.parametrize(
        ("fields", "bad"),
        [
            pytest.param({"max_depth": -1}, ["max_depth"], id="negative-depth"),
            pytest.param({"root_id": "x"}, ["root_id"], id="root-malformed"),
        ],
    )
    async def test_get_tree(self, tree: TreeClient, fields: dict[str, Any], bad: list[str]) -> None:
        """GetTree refuses a negative max_depth or a malformed root_id."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.tree(**fields)
        assert [v.field for v in field_violations(caught.value)] == bad

    async def test_list_roots_space(self, tree: TreeClient) -> None:
        """ListRoots refuses a malformed space_id."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.ListRoots(tree_pb2.ListRootsRequest(space_id="x"))
        assert [v.field for v in field_violations(caught.value)] == ["space_id"]
