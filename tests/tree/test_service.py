"""Pure parts of the service: the pre-order walk and the encodings (no database)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from stello.errors import InvalidArgument
from tree_service.encoding import (
    config_from_json,
    config_to_json,
    decode_node,
    decode_page_token,
    encode_node,
    encode_page_token,
)
from tree_service.models import Node, SessionConfig, TreeEntry, TreeRows
from tree_service.service import preorder


def entry(name: str, parent: str | None, index: int = 0) -> TreeEntry:
    return TreeEntry(
        id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        parent_id=None if parent is None else uuid.uuid5(uuid.NAMESPACE_DNS, parent),
        depth=0,
        index=index,
        label=name,
        status="active",
        turn_count=0,
        source_session_id=None,
    )


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
        assert [e.label for e in preorder(rows)] == ["r1", "a", "a1", "b", "r2", "c"]

    def test_deep_chain_without_recursion(self) -> None:
        """A 50,000-deep chain is walked with an explicit stack (no RecursionError)."""
        names = [f"n{i}" for i in range(50_000)]
        below = tuple(entry(n, names[i - 1]) for i, n in enumerate(names) if i)
        ordered = preorder(TreeRows(tops=(entry(names[0], None),), below=below))
        assert [e.label for e in ordered] == names


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
