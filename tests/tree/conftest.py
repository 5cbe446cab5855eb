"""Tree fixtures: a real SessionTree server on port 0 and a small typed client for tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.support.erasure import Con
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tests.support.history import waiting_on_a_lock
from tree_service.app import create_app, create_service
from tree_service.sessions.repository import CREATE_SESSION, LOCK_PARENT
from tree_service.unit import TreeTx

T = TypeVar("T")


@dataclass(slots=True)
class TreeClient:
    """A SessionTree stub bound to one space, with shorthands for the common calls."""

    stub: Any
    space: TestSpace

    async def create(self, **fields: Any) -> common_pb2.TopologyNode:
        """CreateSession in this space; `fields` as in CreateSessionRequest."""
        reply: tree_pb2.CreateSessionResponse = await self.stub.CreateSession(
            tree_pb2.CreateSessionRequest(space_id=self.space.sid, **fields)
        )
        return reply.node

    async def child(self, parent: str, **fields: Any) -> common_pb2.TopologyNode:
        """CreateSession under `parent`."""
        return await self.create(parent_id=parent, **fields)

    async def commit(self, session_id: str) -> common_pb2.TopologyNode:
        """CommitSession."""
        reply: tree_pb2.CommitSessionResponse = await self.stub.CommitSession(
            tree_pb2.CommitSessionRequest(space_id=self.space.sid, session_id=session_id)
        )
        return reply.node

    async def node(self, session_id: str) -> common_pb2.TopologyNode:
        """GetNode."""
        reply: tree_pb2.GetNodeResponse = await self.stub.GetNode(
            tree_pb2.GetNodeRequest(space_id=self.space.sid, session_id=session_id)
        )
        return reply.node

    async def tree(self, **fields: Any) -> list[common_pb2.TreeNode]:
        """GetTree nodes."""
        reply: tree_pb2.GetTreeResponse = await self.stub.GetTree(
            tree_pb2.GetTreeRequest(space_id=self.space.sid, **fields)
        )
        return list(reply.nodes)


async def open_tree(running: RunningServer, space: TestSpace) -> AsyncIterator[TreeClient]:
    """A client on `running` authenticated as `space`'s key."""
    async with running.channel(space.key) as channel:
        yield TreeClient(tree_pb2_grpc.SessionTreeStub(channel), space)


@pytest.fixture(name="tree_server")
async def _tree_server(start_server: ServerStarter) -> RunningServer:
    return await start_server(create_app)


@pytest.fixture(name="tree")
async def _tree(tree_server: RunningServer, space: TestSpace) -> AsyncIterator[TreeClient]:
    async for client in open_tree(tree_server, space):
        yield client


@pytest.fixture(name="other_tree")
async def _other_tree(
    tree_server: RunningServer, other_space: TestSpace
) -> AsyncIterator[TreeClient]:
    async for client in open_tree(tree_server, other_space):
        yield client


async def session_count(pool: asyncpg.Pool, space_id: uuid.UUID) -> int:
    """Rows of `sessions` in the space, provisional included."""
    async with pool.acquire() as con:
        return int(
            await con.fetchval("SELECT count(*) FROM sessions WHERE space_id = $1", space_id)
        )


async def visible_count(pool: asyncpg.Pool, space_id: uuid.UUID) -> int:
    """Sessions of the space every read shows (neither provisional nor being erased)."""
    return int(await pool.fetchval(VISIBLE, space_id))


VISIBLE = "SELECT count(*) FROM sessions WHERE space_id = $1 AND provisional_until IS NULL"


async def commit_a_child_while(
    pool: asyncpg.Pool,
    watcher: asyncpg.Connection | asyncpg.Pool,
    space_id: uuid.UUID,
    parent: uuid.UUID,
    child: uuid.UUID,
    start: Callable[[], Awaitable[asyncio.Task[T]]],
) -> asyncio.Task[T]:
    """Create `child` under `parent` as CreateSession does (the parent's row lock, then the
    child's row), `start` a call while that create holds the lock, and commit the child
    once something waits on a lock (`watcher` looks) or the call ended; the call's task."""

    async def create(con: Con) -> None:
        assert await con.fetchval(LOCK_PARENT, space_id, parent)
        args = (parent, "late", None, None, None)
        await con.fetchrow(CREATE_SESSION, space_id, child, *args)

    return await commit_while(pool, watcher, create, start)


async def hide_while(
    pool: asyncpg.Pool,
    watcher: asyncpg.Connection | asyncpg.Pool,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    start: Callable[[], Awaitable[asyncio.Task[T]]],
) -> asyncio.Task[T]:
    """Lock and hide `session_id`'s subtree as DeleteSubtree does (its events left out),
    `start` a call while those rows are held, and commit once the call waits on a lock or
    ended."""

    async def hide(con: Con) -> None:
        subtrees = TreeTx(cast("asyncpg.Connection", con)).subtrees
        locked = await subtrees.lock_subtree(space_id, session_id)
        assert locked, "nothing to hide"
        await subtrees.hide_subtree(space_id, session_id, locked)

    return await commit_while(pool, watcher, hide, start)


async def commit_while(
    pool: asyncpg.Pool,
    watcher: asyncpg.Connection | asyncpg.Pool,
    write: Callable[[Con], Awaitable[None]],
    start: Callable[[], Awaitable[asyncio.Task[T]]],
) -> asyncio.Task[T]:
    """`write` in a transaction, `start` a call while it holds its locks, and commit once
    something waits on a lock (`watcher` looks) or the call ended; the call's task."""
    async with pool.acquire() as con:
        writing = con.transaction()
        await writing.start()
        await write(con)
        task = await start()
        for _ in range(1000):
            if await waiting_on_a_lock(watcher) or task.done():
                break
            await asyncio.sleep(0.01)
        await writing.commit()
    return task


def code_of(error: BaseException) -> grpc.StatusCode:
    """The status code of an RPC error."""
    assert isinstance(error, grpc.aio.AioRpcError)
    return error.code()


async def erased(pool: asyncpg.Pool) -> None:
    """Wait until the erasure job has erased every session DeleteSubtree hid (it runs in
    the background: this erases what is left, queued behind a running round)."""
    service = create_service(pool)
    while await service.erasure.erase_hidden(wait=True):
        pass
