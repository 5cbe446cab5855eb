"""The gateway's GetLineage RPC (DESIGN §4.5): validate, one service call, convert back.

Mixed into `servicer.AgentGatewayServicer`; the logic is
`service.SessionService.lineage`'s (one tree and one storage call per page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of
from agent_gateway.sessions.service import SessionService
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.errors import Violations

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


class LineageRpcs:
    """GetLineage."""

    _sessions: SessionService

    async def GetLineage(
        self, request: agent_pb2.GetLineageRequest, context: Context
    ) -> agent_pb2.GetLineageResponse:
        """One page of a session's ancestors, nearest first, with memory and insight."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        page_size = validation.page_size(request.page_size, violations)
        violations.raise_if_any()
        page = await self._sessions.digests.lineage(
            caller_of(context),
            space_id,
            session_id,
            page_size=page_size,
            page_token=request.page_token,
        )
        return agent_pb2.GetLineageResponse(
            ancestors=page.digests, next_page_token=page.next_page_token
        )
