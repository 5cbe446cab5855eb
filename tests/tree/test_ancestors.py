"""ListAncestors: a session's ancestors nearest first, a page at a time (GetLineage's tree half)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.errors import field_violations
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient
from tests.tree.seed import chain, seed_topology
from tree_service.encoding import encode_ancestor_token
from tree_service.nodes.repository import ANCESTOR_PAGE, TOKEN_KEY

pytestmark = pytest.mark.sql


async def page(tree: TreeClient, session_id: str, size: int = 0, token: str = "") -> Any:
    """One ListAncestors page."""
    return await tree.stub.ListAncestors(
        tree_pb2.ListAncestorsRequest(
            space_id=tree.space.sid, session_id=session_id, page_size=size, page_token=token
        )
    )


async def walk(tree: TreeClient, session_id: str, size: int) -> tuple[list[str], int]:
    """Every ancestor id page after page, and how many pages it took."""
    ids: list[str] = []
    token, pages = "", 0
    while True:
        reply = await page(tree, session_id, size, token)
        pages += 1
        ids += [node.id for node in reply.nodes]
        token = reply.next_page_token
        if not token:
            return ids, pages


class TestPages:
    async def test_a_thousand_deep_chain_pages_nearest_first_each_once(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Pages of 64 over 1,000 ancestors give each once, parent first, root last."""
        ids = await seed_topology(pool, tree.space.id, chain(1001))
        found, pages = await walk(tree, str(ids[-1]), 64)
        assert found == [str(i) for i in reversed(ids[:-1])]
        assert pages == 16  # 15 full pages and the root's
        first = await page(tree, str(ids[-1]), 2)
        assert [(n.label, n.depth) for n in first.nodes] == [("n999", 999), ("n998", 998)]
        assert first.nodes[0].parent_id == str(ids[998])

    async def test_a_root_and_a_page_ending_at_the_root(self, tree: TreeClient) -> None:
        """A root answers no ancestors; a page that reaches the root has no token."""
        root = await tree.create(label="r")
        kid = await tree.child(root.id, label="k")
        assert (
            list((await page(tree, root.id)).nodes),
            (await page(tree, root.id)).next_page_token,
        ) == ([], "")
        reply = await page(tree, kid.id, 1)
        assert ([n.id for n in reply.nodes], reply.next_page_token) == ([root.id], "")

    @pytest.mark.plain_postgres(
        "reads the plan of EXPLAIN ANALYZE, which Citus wraps in its own Custom Scan"
    )
    async def test_a_page_reads_its_own_rows_only(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The statement of a page deep in a 1,000-chain walks page + 1 rows, not the depth."""
        ids = await seed_topology(pool, tree.space.id, chain(1001))
        async with pool.acquire() as con:
            plan = await con.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {ANCESTOR_PAGE}",
                tree.space.id,
                ids[500],
                10,
                ids[-1],
            )
        walked = _cte_rows(json.loads(plan) if isinstance(plan, str) else plan)
        assert walked == 11


def _cte_rows(plan: Any) -> int:
    """The rows the recursive CTE produced, from an EXPLAIN ANALYZE JSON plan."""
    stack = [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Node Type") == "Recursive Union":
            return int(node["Actual Rows"])
        stack.extend(node.get("Plans", ()))
    raise AssertionError("no recursive union in the plan")


class TestRefusals:
    async def test_unknown_provisional_and_foreign_sessions_are_not_found(
        self, tree: TreeClient, other_tree: TreeClient
    ) -> None:
        """An unknown id, a provisional session and another space's session are NOT_FOUND."""
        root = await tree.create(label="r")
        hidden = await tree.child(root.id, label="p", provisional=True)
        for client, session_id in (
            (tree, str(uuid.uuid4())),
            (tree, hidden.id),
            (other_tree, root.id),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await page(client, session_id)
            assert caught.value.code() is grpc.StatusCode.NOT_FOUND

    async def test_a_token_of_another_session_is_refused(self, tree: TreeClient) -> None:
        """A token is bound to its session: another session's (or a made-up one) is refused."""
        root = await tree.create(label="r")
        mid = await tree.child(root.id, label="m")
        a = await tree.child(mid.id, label="a")
        b = await tree.child(mid.id, label="b")
        token = (await page(tree, a.id, 1)).next_page_token
        assert token
        for bad in (token, "not-a-token"):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await page(tree, b.id, 1, bad)
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in field_violations(caught.value)] == ["page_token"]

    async def test_a_hand_made_token_is_refused(self, tree: TreeClient) -> None:
        """A token no page answered, naming as the last ancestor a session of another
        branch above the requested one (same tree, lower depth), is INVALID_ARGUMENT on
        page_token: on main it was accepted and the next page was the other branch's
        ancestors. Tokens are signed (migration 0031); neither the unsigned form nor one
        signed with another key is taken, and a fair one still pages."""
        root = await tree.create(label="r")
        left = await tree.child(root.id, label="left")
        right = await tree.child(root.id, label="right")
        right_child = await tree.child(right.id, label="rc")
        l2 = await tree.child(left.id, label="l2")
        leaf = await tree.child(l2.id, label="leaf")
        session, after = uuid.UUID(leaf.id), uuid.UUID(right_child.id)
        unsigned = base64.urlsafe_b64encode(f"a.{session.hex}.{after.hex}".encode()).decode()
        for bad in (unsigned, encode_ancestor_token(b"k" * 32, tree.space.id, session, after)):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await page(tree, leaf.id, 1, bad)
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert [v.field for v in field_violations(caught.value)] == ["page_token"]
        assert (await walk(tree, leaf.id, 1))[0] == [l2.id, left.id, root.id]

    async def test_a_token_whose_ancestor_is_not_above_the_session_is_refused(
        self, tree: TreeClient, other_tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """A token signed with the deployment's key yet naming, as the last ancestor, a
        descendant of the session, the session itself, another tree's or another space's
        session is INVALID_ARGUMENT on page_token, not a page of another chain (explore2
        finding 14): the service checks the ancestor too, not only the signature."""
        key = await pool.fetchval(TOKEN_KEY)
        chain_ids = [(await tree.create(label="c0")).id]
        for i in range(1, 5):
            chain_ids.append((await tree.child(chain_ids[-1], label=f"c{i}")).id)
        unrelated = (await tree.create(label="u")).id
        theirs = (await other_tree.create(label="t")).id
        c1, c4 = uuid.UUID(chain_ids[1]), uuid.UUID(chain_ids[4])
        cases = [
            (c1, chain_ids[4]),
            (c1, chain_ids[2]),
            (c4, chain_ids[4]),
            (c4, unrelated),
            (c4, theirs),
            (c4, str(uuid.uuid4())),
        ]
        for session, after in cases:
            token = encode_ancestor_token(key, tree.space.id, session, uuid.UUID(after))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await page(tree, str(session), 2, token)
            assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, (session, after)
            assert [v.field for v in field_violations(caught.value)] == ["page_token"]
        fair = encode_ancestor_token(key, tree.space.id, c4, uuid.UUID(chain_ids[2]))
        reply = await page(tree, str(c4), 2, fair)
        assert [n.id for n in reply.nodes] == [chain_ids[1], chain_ids[0]]

    async def test_a_session_erased_between_pages_is_not_found(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """The next page of a session erased since the first is NOT_FOUND."""
        root = await tree.create(label="r")
        mid = await tree.child(root.id, label="m")
        leaf = await tree.child(mid.id, label="l")
        token = (await page(tree, leaf.id, 1)).next_page_token
        await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=leaf.id)
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await page(tree, leaf.id, 1, token)
        assert caught.value.code() is grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("size", [-1, 1001])
    async def test_a_page_size_out_of_range_is_refused(self, tree: TreeClient, size: int) -> None:
        """page_size below 0 or above 1000 is INVALID_ARGUMENT on page_size."""
        root = await tree.create(label="r")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await page(tree, root.id, size)
        assert [v.field for v in field_violations(caught.value)] == ["page_size"]
