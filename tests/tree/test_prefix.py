"""ResolveSessionPrefix: sessions by the first hex digits of their id, one index range each."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.errors import field_violations
from stello.tree.v1 import tree_pb2
from tests.support.fixtures import TestSpace
from tests.tree.conftest import TreeClient
from tests.tree.seed import fanout_tree, seed_topology
from tree_service.nodes.listing import RESOLVE_PREFIX

pytestmark = pytest.mark.sql

INSERT = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label, provisional_until)
VALUES ($1, $2, $2, 0, $3, CASE WHEN $4 THEN now() + interval '1 hour' END)
"""


async def insert(
    pool: asyncpg.Pool, space: TestSpace, session_id: str, *, provisional: bool = False
) -> str:
    """A root with a chosen id, written by SQL (the tree would pick a random one)."""
    async with pool.acquire() as con:
        await con.execute(INSERT, space.id, uuid.UUID(session_id), f"s-{session_id}", provisional)
    return session_id


async def resolve(tree: TreeClient, prefix: str, **fields: Any) -> list[str]:
    """The ids ResolveSessionPrefix answers for `prefix`."""
    reply: tree_pb2.ResolveSessionPrefixResponse = await tree.stub.ResolveSessionPrefix(
        tree_pb2.ResolveSessionPrefixRequest(space_id=tree.space.sid, prefix=prefix, **fields)
    )
    return [s.id for s in reply.sessions]


A1 = "abc00000-0000-4000-8000-000000000001"
A2 = "abc00000-0000-4000-8000-000000000002"
B1 = "abd00000-0000-4000-8000-000000000001"


class TestMatches:
    async def test_unique_and_ambiguous(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A prefix answers every session starting with it, in id order, and only those."""
        for session_id in (A2, B1, A1):
            await insert(pool, tree.space, session_id)
        assert await resolve(tree, "abc") == [A1, A2]
        assert await resolve(tree, "abd") == [B1]
        assert await resolve(tree, "ab") == [A1, A2, B1]
        assert await resolve(tree, "abe") == []
        assert await resolve(tree, A2) == [A2]

    async def test_hyphens_and_case_are_ignored(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """'ABC00000-00' names the same sessions as 'abc0000000'."""
        await insert(pool, tree.space, A1)
        assert await resolve(tree, "ABC00000-00") == [A1]
        assert await resolve(tree, "abc0000000") == [A1]

    async def test_limit(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """`limit` caps the answer (lowest ids first); 0 means 10."""
        ids = [f"abc00000-0000-4000-8000-0000000000{i:02d}" for i in range(12)]
        for session_id in ids:
            await insert(pool, tree.space, session_id)
        assert await resolve(tree, "abc", limit=2) == ids[:2]
        assert await resolve(tree, "abc") == ids[:10]

    async def test_answers_summaries(self, tree: TreeClient) -> None:
        """Each match carries its label, parent and turn count, as ListAll's summaries do."""
        root = await tree.create(label="R")
        child = await tree.child(root.id, label="C")
        reply = await tree.stub.ResolveSessionPrefix(
            tree_pb2.ResolveSessionPrefixRequest(space_id=tree.space.sid, prefix=child.id[:32])
        )
        [found] = reply.sessions
        assert (found.id, found.label, found.parent_id) == (child.id, "C", root.id)

    async def test_provisional_sessions_are_left_out(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A session still being created is not found by its prefix."""
        await insert(pool, tree.space, A1, provisional=True)
        await insert(pool, tree.space, A2)
        assert await resolve(tree, "abc") == [A2]

    async def test_other_spaces_are_invisible(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A prefix never finds another tenant's session."""
        await insert(pool, other_tree.space, A1)
        assert await resolve(tree, "abc") == []
        assert await resolve(other_tree, "abc") == [A1]


class TestValidation:
    @pytest.mark.parametrize(
        ("fields", "bad"),
        [
            pytest.param({"prefix": ""}, ["prefix"], id="empty"),
            pytest.param({"prefix": "-"}, ["prefix"], id="only-hyphens"),
            pytest.param({"prefix": "abz"}, ["prefix"], id="not-hex"),
            pytest.param({"prefix": "a" * 33}, ["prefix"], id="too-long"),
            pytest.param({"prefix": "a", "limit": -1}, ["limit"], id="negative-limit"),
            pytest.param({"prefix": "a", "limit": 101}, ["limit"], id="limit-too-high"),
            pytest.param({"prefix": "x", "space_id": "nope"}, ["space_id"], id="space"),
        ],
    )
    async def test_bad_requests_name_the_field(
        self, tree: TreeClient, fields: dict[str, Any], bad: list[str]
    ) -> None:
        """A malformed prefix or limit is INVALID_ARGUMENT naming exactly that field."""
        request = tree_pb2.ResolveSessionPrefixRequest(space_id=tree.space.sid)
        for name, value in fields.items():
            setattr(request, name, value)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.ResolveSessionPrefix(request)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == bad


@pytest.mark.plain_postgres(
    "reads the plan of EXPLAIN ANALYZE, which Citus wraps in its own Custom Scan"
)
async def test_reads_only_the_matching_rows(
    tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
) -> None:
    """Over 5,000 sessions the statement is one primary-key range scan that reads the matches."""
    ids = await seed_topology(pool, space.id, fanout_tree(5000, 4))
    prefix = str(ids[1234])[:3]
    matches = [str(i) for i in sorted(ids) if str(i).startswith(prefix)]
    assert await resolve(tree, prefix, limit=100) == matches[:100]
    low, high = prefix.ljust(32, "0"), prefix.ljust(32, "f")
    async with pool.acquire() as con:
        raw = await con.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + RESOLVE_PREFIX,
            space.id,
            uuid.UUID(low),
            uuid.UUID(high),
            100,
        )
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    scan = _index_node(plan)
    # An index scan in key order, or a bitmap scan of the same range then a sort of the
    # few matches: the planner picks by statistics the rest of the suite shapes; either
    # way only the primary-key range of the prefix is read.
    assert scan["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"), plan
    assert scan["Index Name"] == "sessions_pkey"
    assert "id >=" in scan["Index Cond"] and "id <=" in scan["Index Cond"]
    assert scan["Actual Rows"] <= len(matches) < 5000


def _index_node(plan: dict[str, Any]) -> dict[str, Any]:
    """The first node of `plan` (depth first) that reads an index."""
    if "Index Name" in plan:
        return plan
    for child in plan.get("Plans", ()):
        found = _index_node(child)
        if found:
            return found
    return {}
