"""Probes of the consistency tests: is a session invisible everywhere, complete, or gone?"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
from google.protobuf.message import Message

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from tests.gateway.conftest import Stack, record, rpc_error
from tests.support.fixtures import TestSpace

PROVISIONAL_IDS = """
SELECT id::text FROM sessions WHERE space_id = $1 AND provisional_until IS NOT NULL ORDER BY id
"""

LEFTOVERS = """
SELECT (SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY($2::uuid[]))
     + (SELECT count(*) FROM records WHERE space_id = $1 AND session_id = ANY($2::uuid[]))
     + (SELECT count(*) FROM session_slots WHERE space_id = $1 AND session_id = ANY($2::uuid[]))
     + (SELECT count(*) FROM session_configs WHERE space_id = $1 AND session_id = ANY($2::uuid[]))
     + (SELECT count(*) FROM session_metadata WHERE space_id = $1 AND session_id = ANY($2::uuid[]))
"""

FORK_FIELDS: dict[str, Any] = {
    "label": "forked",
    "context": common_pb2.FORK_CONTEXT_INHERIT,
    "system_prompt": "child prompt",
    "skills": common_pb2.SkillList(),  # set, none allowed: a config the fork writes
    "prompt": "opening",
}
"""A fork that writes every kind of thing: config, system prompt and records."""


async def provisional_ids(pool: asyncpg.Pool, space: TestSpace) -> list[str]:
    """Ids of the space's provisional (uncommitted) sessions, read by SQL."""
    return [row["id"] for row in await pool.fetch(PROVISIONAL_IDS, space.id)]


async def wait_until_gone(
    pool: asyncpg.Pool, space: TestSpace, ids: list[str], within_s: float
) -> int:
    """Poll until no row of `ids` is left in any per-session table; answer what is left."""
    deadline = time.monotonic() + within_s
    while True:
        left = int(await pool.fetchval(LEFTOVERS, space.id, [uuid.UUID(i) for i in ids]))
        if left == 0 or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.1)


async def seeded_source(stack: Stack) -> str:
    """A root with two records to fork from."""
    source = await stack.root(label="source")
    await stack.append(source.id, record("user", "q"), record("assistant", "a"))
    return source.id


def fork_request(stack: Stack, source: str, request_id: str, **overrides: Any) -> Any:
    """The ForkRequest of FORK_FIELDS (with overrides) from `source`."""
    fields = {**FORK_FIELDS, **overrides}
    return agent_pb2.ForkRequest(
        space_id=stack.space.sid, source_session_id=source, request_id=request_id, **fields
    )


async def assert_complete(stack: Stack, session_id: str) -> None:
    """The session is visible with its config, system prompt and records (FORK_FIELDS)."""
    view = await stack.view(session_id)
    assert view.config.system_prompt == "child prompt"
    assert view.config.HasField("skills") and list(view.config.skills.names) == []
    assert view.system_prompt == "child prompt"
    assert [r.content for r in await stack.records(session_id)] == ["q", "a", "opening"]


async def _not_found(call: Any) -> None:
    error = await rpc_error(call)
    assert error.code() is grpc.StatusCode.NOT_FOUND, error


async def assert_invisible(stack: Stack, session_id: str, source_id: str) -> None:
    """Every read RPC of all three services answers as if `session_id` did not exist."""
    sid = stack.space.sid
    cls: Callable[..., Message]  # the request class of each read RPC, of all three services
    for rpc, cls in (
        ("GetNode", tree_pb2.GetNodeRequest),
        ("GetConfig", tree_pb2.GetConfigRequest),
        ("GetChildren", tree_pb2.GetChildrenRequest),
        ("GetSiblings", tree_pb2.GetSiblingsRequest),
        ("GetAncestors", tree_pb2.GetAncestorsRequest),
    ):
        await _not_found(getattr(stack.tree, rpc)(cls(space_id=sid, session_id=session_id)))
    await _not_found(stack.tree.GetTree(tree_pb2.GetTreeRequest(space_id=sid, root_id=session_id)))
    for rpc, cls in (
        ("GetSession", storage_pb2.GetSessionRequest),
        ("ListRecords", storage_pb2.ListRecordsRequest),
        ("GetSystemPrompt", storage_pb2.GetSystemPromptRequest),
        ("GetInsight", storage_pb2.GetInsightRequest),
        ("GetMemory", storage_pb2.GetMemoryRequest),
        ("GetCompressionCache", storage_pb2.GetCompressionCacheRequest),
    ):
        await _not_found(getattr(stack.storage, rpc)(cls(space_id=sid, session_id=session_id)))
    for rpc, cls in (
        ("GetSession", agent_pb2.GetSessionRequest),
        ("ListRecords", agent_pb2.ListRecordsRequest),
    ):
        await _not_found(getattr(stack.gw, rpc)(cls(space_id=sid, session_id=session_id)))
    slots = await stack.storage.BatchGetSlots(
        storage_pb2.BatchGetSlotsRequest(space_id=sid, session_ids=[session_id, source_id])
    )
    assert [s.session_id for s in slots.slots] == [source_id]
    listed: list[list[str]] = [
        list(
            (
                await stack.tree.GetNode(
                    tree_pb2.GetNodeRequest(space_id=sid, session_id=source_id)
                )
            ).node.children
        ),
        [
            n.id
            for n in (
                await stack.tree.GetChildren(
                    tree_pb2.GetChildrenRequest(space_id=sid, session_id=source_id)
                )
            ).nodes
        ],
        [n.id for n in (await stack.tree.ListRoots(tree_pb2.ListRootsRequest(space_id=sid))).nodes],
        [s.id for s in (await stack.tree.ListAll(tree_pb2.ListAllRequest(space_id=sid))).sessions],
        [n.id for n in (await stack.tree.GetTree(tree_pb2.GetTreeRequest(space_id=sid))).nodes],
        [
            s.id
            for s in (
                await stack.storage.ListSessions(storage_pb2.ListSessionsRequest(space_id=sid))
            ).sessions
        ],
        [
            d.id
            for d in (
                await stack.gw.ListSessionDigests(agent_pb2.ListSessionDigestsRequest(space_id=sid))
            ).digests
        ],
        [n.id for n in (await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=sid))).nodes],
    ]
    for ids in listed:
        assert session_id not in ids
    assert listed[2] == [source_id]


async def children_of(stack: Stack, source_id: str) -> list[str]:
    """The visible children of `source_id`."""
    reply = await stack.tree.GetChildren(
        tree_pb2.GetChildrenRequest(space_id=stack.space.sid, session_id=source_id)
    )
    return [n.id for n in reply.nodes]
