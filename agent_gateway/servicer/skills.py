"""The gateway's ListSkills RPC (spec §4.10): validate, one call, convert back.

Mixed into `servicer.AgentGatewayServicer`; the session's view of the skills
is `builtins.BuiltinTools.visible_skills`, the one its turns offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of
from agent_gateway.tools.builtins import BuiltinTools
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.errors import Violations

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


class SkillRpcs:
    """ListSkills."""

    _builtins: BuiltinTools

    async def ListSkills(
        self, request: agent_pb2.ListSkillsRequest, context: Context
    ) -> agent_pb2.ListSkillsResponse:
        """The configured skills, or those one session's allow-list leaves."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = None
        if request.HasField("session_id"):
            session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        violations.raise_if_any()
        if session_id is None:
            skills = self._builtins.all_skills()
        else:
            skills = await self._builtins.visible_skills(caller_of(context), space_id, session_id)
        return agent_pb2.ListSkillsResponse(
            skills=[
                agent_pb2.SkillInfo(name=s.name, description=s.description, content=s.content)
                for s in skills
            ]
        )
