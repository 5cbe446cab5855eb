"""Pure parts of the service: the pre-order walk and the encodings (no database)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from stello.common.v1 import common_pb2
from stello.errors import InvalidArgument
from stello.tree.v1 import tree_pb2
from tree_service.convert import tree_reply
from tree_service.encoding import (
    config_from_json,
    config_to_json,
    decode_node,
    decode_page_token,
    encode_node,
    encode_page_token,
)
from tree_service.models import Node, SessionConfig, TreeRows
from tree_service.trees.service import preorder


def entry(name: str, parent: str | None, index: int = 0) -> tuple[object, ...]:
    """A GetTree row (`TreeRow`) named `name` under `parent`."""
    node_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
    parent_id = None if parent is None else str(uuid.uuid5(uuid.NAMESPACE_DNS, parent))
    top_at = datetime(2026, 1, 1, tzinfo=UTC) if parent is None else None
    return (node_id, parent_id, 0, index, name, "active", 0, None, top_at)


class TestPreorder:
    def test_children_by_index_under_ranked_tops(self) -> None:
        """Tops keep their given order; children are placed by index whatever the read order."""
        rows = TreeRows(
            tops=(entry("r1", None), entry("r2", None)),
            below=(
                entry("b", "r1", 1),
                entry("a1", "a", 0),
                entry("c", "r2", 0),
                entry("a", "r1", 0),
            ),
        )
        assert [e[4] for e in preorder(rows)] == ["r1", "a", "a1", "b", "r2", "c"]

    def test_deep_chain_without_recursion(self) -> None:
        """A 50,000-deep chain is walked with an explicit stack (no RecursionError)."""
        names = [f"n{i}" for i in range(50_000)]
        below = tuple(entry(n, names[i - 1]) for i, n in enumerate(names) if i)
        ordered = preorder(TreeRows(tops=(entry(names[0], None),), below=below))
        assert [e[4] for e in ordered] == names


class TestTreeReply:
    @pytest.mark.parametrize(
        "row",
        [
            pytest.param(("a" * 36, None, 0, 0, "Root", "active", 0, None, 0), id="root"),
            pytest.param(("b" * 36, "a" * 36, 3, 7, "x", "archived", 2, "c" * 36, None), id="all"),
            pytest.param(
                ("b" * 36, "a" * 36, 20_000, 16_383, "é" * 200, "active", 2**31 - 1, None, None),
                id="large-and-unicode",
            ),
            pytest.param(
                ("b" * 36, "a" * 36, 1, 16_384, "", "active", 128, None, None), id="edges"
            ),
        ],
    )
    def test_bytes_are_protobufs(self, row: tuple[Any, ...]) -> None:
        """The reply's bytes are exactly what protobuf serializes for the same nodes."""
        node_id, parent, depth, index, label, status, turns, source, _ = row
        node = tree_pb2.GetTreeResponse().nodes.add(
            id=node_id, depth=depth, index=index, label=label, turn_count=turns
        )
        node.status = (
            common_pb2.SESSION_STATUS_ARCHIVED
            if status == "archived"
            else common_pb2.SESSION_STATUS_ACTIVE
        )
        if parent is not None:
            node.parent_id = parent
        if source is not None:
            node.source_session_id = source
        expected = tree_pb2.GetTreeResponse(nodes=[node, node])
        assert tree_reply([row, row]) == expected.SerializeToString()

    def test_no_rows_is_an_empty_reply(self) -> None:
        """No node: the empty message (zero bytes)."""
        assert tree_reply([]) == b""


class TestEncodings:
    @pytest.mark.parametrize(
        ("config", "stored"),
        [
            pytest.param(SessionConfig(), {}, id="empty"),
            pytest.param(SessionConfig(system_prompt=""), {"system_prompt": ""}, id="empty-prompt"),
            pytest.param(SessionConfig(skills=()), {"skills": []}, id="no-skills"),
            pytest.param(
                SessionConfig("p", ("a", "b")),
                {"system_prompt": "p", "skills": ["a", "b"]},
                id="both",
            ),
        ],
    )
    def test_config_json_keeps_presence(
        self, config: SessionConfig, stored: dict[str, object]
    ) -> None:
        """A config is stored with a key per set field and read back equal."""
        assert config_to_json(config) == stored
        assert config_from_json(stored) == config

    def test_node_round_trip(self) -> None:
        """An idempotent response decodes to the node that was stored."""
        node = Node(
            id=uuid.uuid4(),
            parent_id=uuid.uuid4(),
            children=(uuid.uuid4(),),
            refs=(),
            depth=3,
            index=2,
            label="名",
            source_session_id=None,
            status="archived",
        )
        assert decode_node(encode_node(node)) == node

    def test_page_token_round_trip(self) -> None:
        """A page token carries (created_at, id) exactly, to the microsecond."""
        key = (datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), uuid.uuid4())
        assert decode_page_token(encode_page_token(*key)) == key

    @pytest.mark.parametrize("token", ["x", "bm9wZQ==", "MTIz", "!!!"])
    def test_foreign_page_token(self, token: str) -> None:
        """A token this server did not issue is INVALID_ARGUMENT on page_token."""
        with pytest.raises(InvalidArgument, match="page_token") as caught:
            decode_page_token(token)
        assert [v.field for v in caught.value.violations] == ["page_token"]
