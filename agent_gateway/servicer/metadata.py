"""The gateway's UpdateSessionMetadata RPC (issue #37): validate, one tree call, convert back.

Mixed into `servicer.AgentGatewayServicer`. The limits are checked here on the
request before the tree is called, and by the tree again on the merged result
in its transaction (stello.rules.metadata).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of
from agent_gateway.sessions.service import SessionService
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.rules import metadata

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


class MetadataRpcs:
    """UpdateSessionMetadata."""

    _sessions: SessionService

    async def UpdateSessionMetadata(
        self, request: agent_pb2.UpdateSessionMetadataRequest, context: Context
    ) -> agent_pb2.UpdateSessionMetadataResponse:
        """Add, replace and remove a session's metadata keys at once."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        written = dict(request.set)
        metadata.check_pairs(written, violations, "set")
        metadata.check_keys(request.remove, violations, "remove")
        for index, key in enumerate(request.remove):
            if key in written:
                violations.add(f"remove[{index}]", f"key {key!r} is also in set")
        violations.raise_if_any()
        pairs = await self._sessions.update_metadata(
            caller_of(context), space_id, session_id, written, list(request.remove)
        )
        return agent_pb2.UpdateSessionMetadataResponse(metadata=pairs)


def check_metadata(pairs: dict[str, str], violations: Violations) -> None:
    """A CreateRoot / Fork / ImportSession request's `metadata`, before anything is written."""
    metadata.check_pairs(pairs, violations, "metadata")


def check_filter(session_filter: common_pb2.SessionFilter, violations: Violations) -> None:
    """ListSessionDigests' `filter` metadata (the tree checks the rest, naming each field)."""
    metadata.check_pairs(dict(session_filter.metadata), violations, "filter.metadata")
