"""The gateway's retention RPCs (issue #38): the tree's policy, sweep and pinned flag, reached
with the caller's key; time moved through the database, never slept."""

from __future__ import annotations

import uuid

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from tests.gateway.conftest import Stack, new_id, rpc_error

pytestmark = pytest.mark.sql

IDLE = """
UPDATE sessions SET last_active_at = now() - interval '400 days'
WHERE space_id = $1 AND id = ANY ($2::uuid[])
"""


async def put(stack: Stack, **days: int) -> common_pb2.RetentionPolicy:
    reply = await stack.gw.PutRetention(
        agent_pb2.PutRetentionRequest(
            space_id=stack.space.sid, policy=common_pb2.RetentionPolicy(**days)
        )
    )
    policy: common_pb2.RetentionPolicy = reply.policy
    return policy


async def apply(stack: Stack, dry_run: bool = False) -> agent_pb2.ApplyRetentionResponse:
    reply: agent_pb2.ApplyRetentionResponse = await stack.gw.ApplyRetention(
        agent_pb2.ApplyRetentionRequest(space_id=stack.space.sid, dry_run=dry_run)
    )
    return reply


class TestRetention:
    async def test_policy_dry_run_apply_and_pin(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """The policy round-trips; a dry run lists an idle root without archiving it; a pin
        keeps it; unpinned, ApplyRetention archives its subtree (GetSession shows it)."""
        root = await stack.root(label="old")
        child = await stack.fork(root.id, "kid")
        await pool.execute(IDLE, stack.space.id, [uuid.UUID(root.id), uuid.UUID(child.id)])
        stored = await put(stack, archive_after_days=30)
        assert stored.archive_after_days == 30 and not stored.HasField("delete_after_days")
        got = await stack.gw.GetRetention(agent_pb2.GetRetentionRequest(space_id=stack.space.sid))
        assert got.policy == stored
        listed = await apply(stack, dry_run=True)
        assert [(a.root_id, a.label) for a in listed.actions] == [(root.id, "old")]
        assert (await stack.view(root.id)).node.status == common_pb2.SESSION_STATUS_ACTIVE
        pin = agent_pb2.PinSessionRequest(
            space_id=stack.space.sid, session_id=child.id, pinned=True
        )
        assert (await stack.gw.PinSession(pin)).pinned
        assert list((await apply(stack)).actions) == []
        pin.pinned = False
        await stack.gw.PinSession(pin)
        done = await apply(stack)
        assert sorted(done.actions[0].session_ids) == sorted([root.id, child.id])
        assert (await stack.view(child.id)).node.status == common_pb2.SESSION_STATUS_ARCHIVED

    async def test_reads_show_the_pin(self, stack: Stack) -> None:
        """GetSession, ListSessionDigests and the summary a change answers (Archive) say
        whether a session is pinned (on main: stored, shown nowhere)."""
        root = await stack.root(label="kept")
        other = await stack.root(label="free")
        assert not (await stack.view(root.id)).pinned
        pin = agent_pb2.PinSessionRequest(space_id=stack.space.sid, session_id=root.id, pinned=True)
        await stack.gw.PinSession(pin)
        assert (await stack.view(root.id)).pinned
        assert not (await stack.view(other.id)).pinned
        listed = await stack.gw.ListSessionDigests(
            agent_pb2.ListSessionDigestsRequest(space_id=stack.space.sid)
        )
        assert {d.id: d.pinned for d in listed.digests} == {root.id: True, other.id: False}
        archived = await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=root.id)
        )
        assert archived.session.pinned

    async def test_errors(self, stack: Stack) -> None:
        """No policy is FAILED_PRECONDITION NO_RETENTION_POLICY; days out of range are
        INVALID_ARGUMENT on the field; pinning an unknown session is NOT_FOUND."""
        error = await rpc_error(apply(stack))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "NO_RETENTION_POLICY"
        bad = await rpc_error(put(stack, delete_after_days=40_000))
        assert [v.field for v in field_violations(bad)] == ["policy.delete_after_days"]
        missing = await rpc_error(
            stack.gw.PinSession(
                agent_pb2.PinSessionRequest(space_id=stack.space.sid, session_id=new_id())
            )
        )
        assert missing.code() is grpc.StatusCode.NOT_FOUND

    async def test_an_unset_policy_is_refused(self, stack: Stack) -> None:
        """PutRetention without `policy` is INVALID_ARGUMENT naming it, as PutConfig without
        its config, and stores nothing: it stored an empty policy, and GetRetention then
        answered a policy the client never gave. An empty policy stays the way to say that
        nothing expires."""
        error = await rpc_error(
            stack.gw.PutRetention(agent_pb2.PutRetentionRequest(space_id=stack.space.sid))
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == ["policy"]
        got = await stack.gw.GetRetention(agent_pb2.GetRetentionRequest(space_id=stack.space.sid))
        assert not got.HasField("policy")
        assert await put(stack) == common_pb2.RetentionPolicy()
