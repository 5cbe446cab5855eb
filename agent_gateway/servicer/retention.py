"""The gateway's retention RPCs (issue #38): GetRetention, PutRetention, ApplyRetention,
PinSession — each validated here, then one call to the tree service, which owns the policy,
the sweep and the pinned flag.

Mixed into `servicer.AgentGatewayServicer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.clients import TreeClient
from agent_gateway.servicer.callers import caller_of
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.rules.retention_days import days_problem

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


def _check_policy(policy: common_pb2.RetentionPolicy, v: Violations) -> None:
    for name in ("archive_after_days", "delete_after_days"):
        problem = days_problem(getattr(policy, name)) if policy.HasField(name) else None
        if problem is not None:
            v.add(f"policy.{name}", problem)


class RetentionRpcs:
    """GetRetention, PutRetention, ApplyRetention, PinSession."""

    _tree: TreeClient

    async def GetRetention(
        self, request: agent_pb2.GetRetentionRequest, context: Context
    ) -> agent_pb2.GetRetentionResponse:
        """The space's retention policy."""
        space_id = validation.space_uuid(request.space_id)
        policy = await self._tree.get_retention(caller_of(context), space_id)
        return agent_pb2.GetRetentionResponse(policy=policy)

    async def PutRetention(
        self, request: agent_pb2.PutRetentionRequest, context: Context
    ) -> agent_pb2.PutRetentionResponse:
        """Set the space's retention policy."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        if not request.HasField("policy"):
            violations.add(
                "policy",
                "is required (an empty RetentionPolicy, neither step set, expires nothing)",
            )
        _check_policy(request.policy, violations)
        violations.raise_if_any()
        policy = await self._tree.put_retention(caller_of(context), space_id, request.policy)
        return agent_pb2.PutRetentionResponse(policy=policy)

    async def ApplyRetention(
        self, request: agent_pb2.ApplyRetentionRequest, context: Context
    ) -> agent_pb2.ApplyRetentionResponse:
        """Apply the space's policy now, or list what it would do."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        if request.max_batches < 0:
            violations.add("max_batches", f"must not be negative, got {request.max_batches}")
        violations.raise_if_any()
        reply = await self._tree.apply_retention(
            caller_of(context), space_id, request.dry_run, request.max_batches, request.page_token
        )
        return agent_pb2.ApplyRetentionResponse(
            actions=reply.actions, done=reply.done, next_page_token=reply.next_page_token
        )

    async def PinSession(
        self, request: agent_pb2.PinSessionRequest, context: Context
    ) -> agent_pb2.PinSessionResponse:
        """Pin or unpin a session."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        violations.raise_if_any()
        pinned = await self._tree.set_pinned(
            caller_of(context), space_id, session_id, request.pinned
        )
        return agent_pb2.PinSessionResponse(pinned=pinned)
