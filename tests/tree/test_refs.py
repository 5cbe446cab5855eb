"""AddRef and RemoveRef: directional, no self/ancestor/descendant, idempotent, insertion order."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from stello.errors import error_info_reason
from stello.tree.v1 import tree_pb2
from tests.tree.conftest import TreeClient

pytestmark = pytest.mark.sql


async def add_ref(tree: TreeClient, from_id: str, to_id: str) -> list[str]:
    reply = await tree.stub.AddRef(
        tree_pb2.AddRefRequest(space_id=tree.space.sid, from_id=from_id, to_id=to_id)
    )
    return list(reply.node.refs)


async def remove_ref(tree: TreeClient, from_id: str, to_id: str) -> list[str]:
    reply = await tree.stub.RemoveRef(
        tree_pb2.RemoveRefRequest(space_id=tree.space.sid, from_id=from_id, to_id=to_id)
    )
    return list(reply.node.refs)


async def ref_rows(pool: asyncpg.Pool, tree: TreeClient) -> int:
    async with pool.acquire() as con:
        return int(
            await con.fetchval(
                "SELECT count(*) FROM session_refs WHERE space_id = $1", tree.space.id
            )
        )


class TestAddRef:
    async def test_allowed_targets_in_insertion_order(self, tree: TreeClient) -> None:
        """Siblings, cousins, other roots and archived sessions may be referenced, in order."""
        root = await tree.create()
        a, b = await tree.child(root.id), await tree.child(root.id)
        cousin = await tree.child(b.id)
        other = await tree.create()
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=other.id)
        )
        await add_ref(tree, a.id, other.id)
        await add_ref(tree, a.id, cousin.id)
        assert await add_ref(tree, a.id, b.id) == [other.id, cousin.id, b.id]
        assert await add_ref(tree, b.id, a.id) == [a.id]  # the reverse direction too

    async def test_idempotent(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Adding an existing ref again is a silent no-op: one row, order kept."""
        root = await tree.create()
        a, b, c = [await tree.child(root.id) for _ in range(3)]
        await add_ref(tree, a.id, b.id)
        await add_ref(tree, a.id, c.id)
        assert await add_ref(tree, a.id, b.id) == [b.id, c.id]
        assert await ref_rows(pool, tree) == 2

    @pytest.mark.parametrize(
        ("case", "reason"),
        [
            pytest.param("self", "REF_TO_SELF", id="self"),
            pytest.param("ancestor", "REF_TO_ANCESTOR", id="ancestor"),
            pytest.param("grand-ancestor", "REF_TO_ANCESTOR", id="grand-ancestor"),
            pytest.param("descendant", "REF_TO_DESCENDANT", id="descendant"),
            pytest.param("grand-descendant", "REF_TO_DESCENDANT", id="grand-descendant"),
        ],
    )
    async def test_refused_targets(
        self, tree: TreeClient, pool: asyncpg.Pool, case: str, reason: str
    ) -> None:
        """Self, ancestors and descendants (any depth) are FAILED_PRECONDITION with the reason."""
        root = await tree.create()
        child = await tree.child(root.id)
        grandchild = await tree.child(child.id)
        pairs = {
            "self": (child.id, child.id),
            "ancestor": (child.id, root.id),
            "grand-ancestor": (grandchild.id, root.id),
            "descendant": (root.id, child.id),
            "grand-descendant": (root.id, grandchild.id),
        }
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await add_ref(tree, *pairs[case])
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(caught.value) == reason
        assert await ref_rows(pool, tree) == 0

    async def test_a_self_ref_of_an_unknown_id_is_not_found(self, tree: TreeClient) -> None:
        """A ref from an unknown, provisional or other space's id to itself answers
        NOT_FOUND, as any tree RPC on such an id (DESIGN §5.1; explore16 D3: it was
        REF_TO_SELF, checked before the ends were read)."""
        hidden = await tree.create(provisional=True)
        for unknown in (str(uuid.uuid4()), hidden.id):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await add_ref(tree, unknown, unknown)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("missing", ["from", "to"])
    async def test_unknown_end_is_not_found(self, tree: TreeClient, missing: str) -> None:
        """An unknown or provisional end answers NOT_FOUND."""
        known = await tree.create()
        hidden = await tree.create(provisional=True)
        for unknown in (str(uuid.uuid4()), hidden.id):
            pair = (unknown, known.id) if missing == "from" else (known.id, unknown)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await add_ref(tree, *pair)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_bumps_from(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Adding a ref bumps the from session's updated_at, not the target's."""
        a, b = await tree.create(), await tree.create()
        query = "SELECT id, updated_at FROM sessions WHERE space_id = $1"
        async with pool.acquire() as con:
            before = dict(list(map(tuple, await con.fetch(query, tree.space.id))))
            await add_ref(tree, a.id, b.id)
            after = dict(list(map(tuple, await con.fetch(query, tree.space.id))))
        assert after[uuid.UUID(a.id)] > before[uuid.UUID(a.id)]
        assert after[uuid.UUID(b.id)] == before[uuid.UUID(b.id)]


class TestRefOrder:
    """The refs' order is per from-session (no sequence spans spaces, DESIGN §3)."""

    async def test_positions_count_per_session(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """Each from-session numbers its refs 0, 1, ... whatever other sessions hold."""
        a, b, c, d = [await tree.create() for _ in range(4)]
        await add_ref(tree, a.id, c.id)
        await add_ref(tree, b.id, c.id)
        await add_ref(tree, a.id, d.id)
        await add_ref(tree, b.id, d.id)
        async with pool.acquire() as con:
            rows = await con.fetch(
                "SELECT from_id, position FROM session_refs WHERE space_id = $1"
                " ORDER BY from_id, position",
                tree.space.id,
            )
        positions: dict[str, list[int]] = {}
        for row in rows:
            positions.setdefault(str(row["from_id"]), []).append(row["position"])
        assert positions == {a.id: [0, 1], b.id: [0, 1]}

    async def test_concurrent_adds_keep_one_order(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """20 parallel AddRefs from one session get 20 distinct positions 0..19, all listed."""
        source = await tree.create()
        targets = [await tree.create() for _ in range(20)]
        await asyncio.gather(*(add_ref(tree, source.id, t.id) for t in targets))
        async with pool.acquire() as con:
            rows = await con.fetch(
                "SELECT to_id FROM session_refs WHERE space_id = $1 AND from_id = $2"
                " ORDER BY position",
                tree.space.id,
                uuid.UUID(source.id),
            )
            positions = await con.fetchval(
                "SELECT array_agg(position ORDER BY position) FROM session_refs"
                " WHERE space_id = $1 AND from_id = $2",
                tree.space.id,
                uuid.UUID(source.id),
            )
        assert positions == list(range(20))
        assert list((await tree.node(source.id)).refs) == [str(r["to_id"]) for r in rows]
        assert {str(r["to_id"]) for r in rows} == {t.id for t in targets}


class TestRemoveRef:
    async def test_remove_keeps_order(self, tree: TreeClient) -> None:
        """Removing a ref leaves the others in insertion order; a re-added one goes last."""
        a, b, c, d = [await tree.create() for _ in range(4)]
        for target in (b, c, d):
            await add_ref(tree, a.id, target.id)
        assert await remove_ref(tree, a.id, c.id) == [b.id, d.id]
        assert await add_ref(tree, a.id, c.id) == [b.id, d.id, c.id]

    async def test_idempotent(self, tree: TreeClient) -> None:
        """Removing a ref that is not there succeeds and changes nothing."""
        a, b = await tree.create(), await tree.create()
        assert await remove_ref(tree, a.id, b.id) == []

    async def test_unknown_end_is_not_found(self, tree: TreeClient) -> None:
        """Removing a ref to an unknown session answers NOT_FOUND."""
        a = await tree.create()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await remove_ref(tree, a.id, str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_refs_go_with_deleted_targets(self, tree: TreeClient) -> None:
        """Deleting a referenced session removes the ref from its sources."""
        a, b = await tree.create(), await tree.create()
        await add_ref(tree, a.id, b.id)
        await tree.stub.DeleteSubtree(
            tree_pb2.DeleteSubtreeRequest(space_id=tree.space.sid, session_id=b.id)
        )
        assert list((await tree.node(a.id)).refs) == []
