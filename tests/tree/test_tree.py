"""GetTree: one read of the forest (a recursive CTE below a depth or for a subtree), pre-order by
an explicit stack, light nodes, the node cap."""

from __future__ import annotations

import re
import uuid
from typing import Any

import asyncpg
import grpc
import pytest

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.db.pool import create_pool
from stello.errors import error_info_reason
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.support.database import create_test_database, drop_test_database
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tests.tree.conftest import TreeClient, open_tree
from tests.tree.seed import COLUMNS, chain, fanout_tree, seed_topology
from tree_service.app import create_app
from tree_service.config import TreeSettings
from tree_service.trees.repository import FOREST, ROOT_TREE, tree_settings

pytestmark = pytest.mark.sql

BULK_CHAIN = 40_000
BULK_CAP = 2_000


def shape(nodes: list[common_pb2.TreeNode]) -> list[tuple[str, str | None, int, int]]:
    return [
        (n.id, n.parent_id if n.HasField("parent_id") else None, n.depth, n.index) for n in nodes
    ]


class TestGetTree:
    async def test_empty_space(self, tree: TreeClient) -> None:
        """An empty space answers an empty forest."""
        assert await tree.tree() == []

    async def test_forest_in_preorder(self, tree: TreeClient) -> None:
        """Roots by creation, each followed by its subtree, children by index (spec §6.3.17-18)."""
        r1 = await tree.create(label="R1")
        a = await tree.child(r1.id, label="A")
        b = await tree.child(r1.id, label="B")
        a1 = await tree.child(a.id, label="A1", source_session_id=a.id)
        r2 = await tree.create(label="R2")
        nodes = await tree.tree()
        assert [n.label for n in nodes] == ["R1", "A", "A1", "B", "R2"]
        assert shape(nodes) == [
            (r1.id, None, 0, 0),
            (a.id, r1.id, 1, 0),
            (a1.id, a.id, 2, 0),
            (b.id, r1.id, 1, 1),
            (r2.id, None, 0, 0),
        ]
        assert nodes[2].source_session_id == a.id
        assert not nodes[1].HasField("source_session_id")
        assert all(
            n.status == common_pb2.SESSION_STATUS_ACTIVE and n.turn_count == 0 for n in nodes
        )

    async def test_a_whole_tree_is_one_read(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """The whole forest, or a root's whole tree (no max_depth), is one pass over the
        sessions, not a lookup per session (a walk scans the children of each: 2,000 scans
        here): every scan of sessions in the statement's plan runs once. The answers are
        the pre-orders, a root's tree alone."""
        ids = await seed_topology(pool, tree.space.id, [*fanout_tree(2_000, 10), None, 2_000])
        big, small = str(ids[0]), str(ids[2_000])
        for statement, args in ((FOREST, ()), (ROOT_TREE, (ids[0],))):
            async with pool.acquire() as con, con.transaction():
                await con.execute(tree_settings(60_000))
                plan = await con.fetchval(  # json: decoded by the pool (stello.db.pool)
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", tree.space.id, 2_003, *args
                )
            loops = [node["Actual Loops"] for node in _scans_of_sessions(plan)]
            assert loops and set(loops) == {1}, loops
        nodes = await tree.tree(root_id=big)
        assert [n.id for n in nodes[:3]] == [big, str(ids[1]), str(ids[11])]
        assert len(nodes) == 2_000
        smaller = [n.id for n in await tree.tree(root_id=small)]
        assert smaller == [small, str(ids[2_001])]
        trees = sorted(([n.id for n in nodes], smaller))  # roots of one COPY: by id
        assert [n.id for n in await tree.tree()] == trees[0] + trees[1]

    async def test_subtree_and_depth_limit(self, tree: TreeClient) -> None:
        """root_id narrows to a subtree; max_depth counts levels below it (0 = the top only)."""
        root = await tree.create()
        a = await tree.child(root.id)
        a1 = await tree.child(a.id)
        a11 = await tree.child(a1.id)
        await tree.child(root.id)
        assert [n.id for n in await tree.tree(root_id=a.id)] == [a.id, a1.id, a11.id]
        assert [n.id for n in await tree.tree(root_id=a.id, max_depth=1)] == [a.id, a1.id]
        assert [n.id for n in await tree.tree(root_id=a.id, max_depth=0)] == [a.id]
        assert len(await tree.tree(max_depth=1)) == 3

    async def test_archived_included_provisional_not(self, tree: TreeClient) -> None:
        """Archived sessions are in the tree; provisional ones are not."""
        root = await tree.create()
        archived = await tree.child(root.id)
        await tree.stub.Archive(
            tree_pb2.ArchiveRequest(space_id=tree.space.sid, session_id=archived.id)
        )
        await tree.child(root.id, provisional=True)
        nodes = await tree.tree()
        assert [n.id for n in nodes] == [root.id, archived.id]
        assert nodes[1].status == common_pb2.SESSION_STATUS_ARCHIVED

    async def test_unknown_root_is_not_found(self, tree: TreeClient) -> None:
        """A root_id that does not exist answers NOT_FOUND."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.tree(root_id=str(uuid.uuid4()))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    async def test_roots_tie_on_time_break_on_id(
        self, tree: TreeClient, pool: asyncpg.Pool
    ) -> None:
        """Roots created in one instant come by id."""
        ids = await seed_topology(pool, tree.space.id, [None, None, None, 0])
        nodes = await tree.tree()
        tops = [uuid.UUID(n.id) for n in nodes if not n.HasField("parent_id")]
        assert tops == sorted(ids[:3])

    async def test_too_large(
        self, start_server: ServerStarter, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """Above max_tree_nodes GetTree is FAILED_PRECONDITION TREE_TOO_LARGE; narrowing works."""
        running: RunningServer = await start_server(
            lambda s, p, k: create_app(s, p, k, TreeSettings(max_tree_nodes=5))
        )
        ids = await seed_topology(pool, space.id, fanout_tree(6, 5))
        async for tree in open_tree(running, space):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await tree.tree()
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_info_reason(caught.value) == "TREE_TOO_LARGE"
            assert len(await tree.tree(root_id=str(ids[1]))) == 1
            assert len(await tree.tree(max_depth=0)) == 1

    async def test_read_past_its_timeout(
        self, start_server: ServerStarter, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """A read longer than STELLO_TREE_GET_TREE_TIMEOUT_S is TREE_TOO_LARGE, not a hang."""
        running: RunningServer = await start_server(
            lambda s, p, k: create_app(s, p, k, TreeSettings(get_tree_timeout_s=0.001))
        )
        # 20,000 rows: tens of milliseconds to read, far past the 1 ms (the whole forest is
        # one read of the space's sessions, no walk). Roots: a chain's COPY checks each
        # row's parent key, which on a Citus shard's stale plan scanned the shard each
        # time (over 120 s in CI).
        await seed_topology(pool, space.id, [None] * 20_000)
        async for tree in open_tree(running, space):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await tree.tree()
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_info_reason(caught.value) == "TREE_TOO_LARGE"
            assert "longer than" in (caught.value.details() or "")


@pytest.mark.slow
class TestLargeTrees:
    async def test_ten_thousand_deep_chain(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A 10,000-deep chain comes back whole, in order, each node one level deeper."""
        ids = await seed_topology(pool, tree.space.id, chain(10_000))
        nodes = await tree.tree()
        assert [n.id for n in nodes] == [str(i) for i in ids]
        assert [n.depth for n in nodes] == list(range(10_000))
        assert all(nodes[i].parent_id == nodes[i - 1].id for i in range(1, 10_000))
        ancestors = await tree.stub.GetAncestors(
            tree_pb2.GetAncestorsRequest(space_id=tree.space.sid, session_id=str(ids[-1]))
        )
        assert [n.id for n in ancestors.nodes] == [str(i) for i in reversed(ids[:-1])]

    async def test_hundred_thousand_nodes(self, tree: TreeClient, pool: asyncpg.Pool) -> None:
        """A 100,000-node tree comes back whole in pre-order (checked against path order).

        How fast is measured by bench/bench_tree.py against a bare server, not asserted here.
        """
        parents = fanout_tree(100_000, 10)
        ids = await seed_topology(pool, tree.space.id, parents)
        paths: list[tuple[int, ...]] = [()]
        for i in range(1, len(parents)):
            parent = parents[i]
            assert parent is not None
            paths.append((*paths[parent], (i - 1) % 10))
        expected = [str(ids[i]) for i in sorted(range(len(ids)), key=paths.__getitem__)]
        nodes = await tree.tree()
        assert [n.id for n in nodes] == expected
        assert [n.index for n in nodes[:3]] == [0, 0, 0]


class TestAfterBulkLoad:
    """Finding 8 of issue #13: GetTree stays bounded when the planner's picture is stale."""

    async def test_too_large_answers_at_once_after_a_bulk_load(
        self, admin_dsn: str, settings: StelloSettings
    ) -> None:
        """A space loaded by COPY behind a plan cached while the table was tiny (one pooled
        connection; statistics from five rows of another space) still answers
        TREE_TOO_LARGE well within the client's deadline (the cached plan rescanned the
        whole space once per level: many seconds on a 40,000 chain, for 2,000 rows)."""
        dsn = await create_test_database(admin_dsn)
        try:
            one = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 1})
            async with create_pool(dsn, one) as pool:
                keys = KeyStore(pool, 0)
                small, loaded = [await _space(keys, name) for name in ("small", "loaded")]
                app = create_app(one, pool, keys, TreeSettings(max_tree_nodes=BULK_CAP))
                server, port = await create_server(app, "127.0.0.1:0")
                await server.start()
                try:
                    error = await _after_bulk_load(pool, port, small, loaded)
                finally:
                    await shutdown(app, server, 0)
        finally:
            await drop_test_database(admin_dsn, dsn)
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
        assert error_info_reason(error) == "TREE_TOO_LARGE"


def _scans_of_sessions(plan: Any) -> list[dict[str, Any]]:
    """The plan nodes (an EXPLAIN in JSON, Citus's remote plans included) reading sessions
    (or a shard of it)."""
    if isinstance(plan, list):
        return [node for item in plan for node in _scans_of_sessions(item)]
    if not isinstance(plan, dict):
        return []
    found = [plan] if re.fullmatch(r"sessions(_\d+)?", plan.get("Relation Name", "")) else []
    return found + [node for value in plan.values() for node in _scans_of_sessions(value)]


async def _space(keys: KeyStore, name: str) -> TestSpace:
    created = await keys.create_key(space=name, principal=name)
    assert created.space_id is not None
    return TestSpace(created.space_id, created.secret, created.key_id)


async def _get_tree(port: int, space: TestSpace, deadline_s: float) -> list[common_pb2.TreeNode]:
    async with open_channel(f"127.0.0.1:{port}", key=space.key) as channel:
        stub = tree_pb2_grpc.SessionTreeStub(channel)
        reply = await stub.GetTree(tree_pb2.GetTreeRequest(space_id=space.sid), timeout=deadline_s)
    return list(reply.nodes)


async def _after_bulk_load(
    pool: asyncpg.Pool, port: int, small: TestSpace, loaded: TestSpace
) -> grpc.aio.AioRpcError:
    """GetTree of `loaded` after its chain was COPYed behind a plan made for `small`."""
    await seed_topology(pool, small.id, chain(5))  # analyzed while the table is tiny
    for _ in range(8):  # past the point where PostgreSQL settles on a generic plan
        assert len(await _get_tree(port, small, 10)) == 5
    ids = [uuid.uuid4() for _ in range(BULK_CHAIN)]
    rows = [
        (loaded.id, ids[i], ids[i - 1] if i else None, ids[0], i, 0, "bulk")
        for i in range(BULK_CHAIN)
    ]
    async with pool.acquire() as con:  # no ANALYZE: as right after a bulk load
        await con.copy_records_to_table("sessions", records=rows, columns=COLUMNS)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _get_tree(port, loaded, 5)
    return caught.value


async def test_a_space_that_does_not_answer_is_unavailable_not_too_large(
    start_server: ServerStarter, space: TestSpace, direct_database_url: str
) -> None:
    """A GetTree read past its bound because the database does not answer the space's rows
    at all (here a lock on `sessions`; on Citus a worker frozen or out of reach) is
    UNAVAILABLE, retryable, not TREE_TOO_LARGE's "narrow it" (explore13 F3): a probe of one
    row tells the two apart."""
    running: RunningServer = await start_server(
        lambda s, p, k: create_app(s, p, k, TreeSettings(get_tree_timeout_s=0.2))
    )
    holder = await asyncpg.connect(direct_database_url)
    try:
        async for tree in open_tree(running, space):
            async with holder.transaction():
                await holder.execute("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await tree.tree()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value.details()
            assert caught.value.details() == (
                "the database did not answer a read of this space within 1 s (a database "
                "node slow or out of reach, or the table locked); retry the call"
            )
            assert await tree.tree() == []  # the lock gone, answered
    finally:
        await holder.close()
