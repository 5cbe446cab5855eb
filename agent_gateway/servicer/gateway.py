"""stello.agent.v1.AgentGateway: proto <-> domain, one service call per RPC.

`AgentGatewayServicer` holds the services and runs the RPCs of one session (GetSession,
the slot writes, Archive, Unarchive, DeleteSession, UpdateLabel, Consolidate) and
ListProfiles and WhoAmI; the others are mixed in from `provisioning`, `turns`, `reads`,
`watch`, `memory`, `skills`, `lineage`, `metadata` and `retention`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from agent_gateway.clients import TreeClient
from agent_gateway.forks.creator import SessionCreator
from agent_gateway.forks.imports import SessionImporter
from agent_gateway.forks.inputs import SizeLimits
from agent_gateway.forks.profiles import ProfileRegistry
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.memory.shared import SharedMemory
from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.servicer.lineage import LineageRpcs
from agent_gateway.servicer.memory import SharedMemoryRpcs
from agent_gateway.servicer.metadata import MetadataRpcs
from agent_gateway.servicer.provisioning import ProvisioningRpcs
from agent_gateway.servicer.reads import SessionReadRpcs
from agent_gateway.servicer.replies import consolidate_response, profile_info, session_view
from agent_gateway.servicer.retention import RetentionRpcs
from agent_gateway.servicer.skills import SkillRpcs
from agent_gateway.servicer.turns import TurnRpcs
from agent_gateway.servicer.watch import WatchRpcs
from agent_gateway.sessions.service import SessionService
from agent_gateway.sessions.watch import Watchers
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.turns.requests import ContentLimits
from agent_gateway.turns.service import TurnService
from stello import validation
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.errors import Violations
from stello.serving.interceptors import current_principal

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def _session_ids(
    request: agent_pb2.GetSessionRequest
    | agent_pb2.PutInsightRequest
    | agent_pb2.PutMemoryRequest
    | agent_pb2.ArchiveRequest
    | agent_pb2.UnarchiveRequest
    | agent_pb2.ConsolidateRequest,
) -> tuple[uuid.UUID, uuid.UUID]:
    violations = Violations()
    space_id = validation.space_uuid(request.space_id, violations)
    session_id = validation.parse_uuid(request.session_id, "session_id", violations)
    violations.raise_if_any()
    return space_id, session_id


class AgentGatewayServicer(
    ProvisioningRpcs,
    TurnRpcs,
    SessionReadRpcs,
    WatchRpcs,
    SharedMemoryRpcs,
    SkillRpcs,
    LineageRpcs,
    MetadataRpcs,
    RetentionRpcs,
    agent_pb2_grpc.AgentGatewayServicer,
):
    """The public API; the logic lives in the creator and the session, turn and memory services
    (the shared memory RPCs in `memory_rpcs`, ListSkills in `skill_rpcs`, GetLineage in
    `lineage_rpcs`)."""

    def __init__(
        self,
        creator: SessionCreator,
        sessions: SessionService,
        profiles: ProfileRegistry,
        turns: TurnService,
        consolidator: Consolidator,
        watchers: Watchers,
        importer: SessionImporter,
        keys: KeyStore,
        memory: SharedMemory,
        builtins: BuiltinTools,
        tree: TreeClient,
        *,
        limits: ContentLimits,
        sizes: SizeLimits,
    ) -> None:
        self._creator = creator
        self._sessions = sessions
        self._profiles = profiles
        self._turns = turns
        self._consolidator = consolidator
        self._watchers = watchers
        self._importer = importer
        self._keys = keys
        self._memory = memory
        self._builtins = builtins
        self._tree = tree
        self._limits = limits
        self._sizes = sizes

    async def Consolidate(
        self, request: agent_pb2.ConsolidateRequest, context: Context
    ) -> agent_pb2.ConsolidateResponse:
        """Rewrite the session's memory with the LLM."""
        space_id, session_id = _session_ids(request)
        outcome = await self._consolidator.consolidate(_caller(context), space_id, session_id)
        return consolidate_response(outcome)

    async def GetSession(
        self, request: agent_pb2.GetSessionRequest, context: Context
    ) -> agent_pb2.GetSessionResponse:
        """The joined view of one session."""
        space_id, session_id = _session_ids(request)
        details = await self._sessions.get_session(_caller(context), space_id, session_id)
        return agent_pb2.GetSessionResponse(session=session_view(details))

    async def PutInsight(
        self, request: agent_pb2.PutInsightRequest, context: Context
    ) -> agent_pb2.PutInsightResponse:
        """Replace the insight (refused on archived sessions)."""
        space_id, session_id = _session_ids(request)
        await self._sessions.put_insight(_caller(context), space_id, session_id, request.content)
        return agent_pb2.PutInsightResponse()

    async def PutMemory(
        self, request: agent_pb2.PutMemoryRequest, context: Context
    ) -> agent_pb2.PutMemoryResponse:
        """Replace the memory."""
        space_id, session_id = _session_ids(request)
        await self._sessions.put_memory(_caller(context), space_id, session_id, request.content)
        return agent_pb2.PutMemoryResponse()

    async def Archive(
        self, request: agent_pb2.ArchiveRequest, context: Context
    ) -> agent_pb2.ArchiveResponse:
        """Archive a session."""
        space_id, session_id = _session_ids(request)
        session = await self._sessions.archive(_caller(context), space_id, session_id)
        return agent_pb2.ArchiveResponse(session=session)

    async def Unarchive(
        self, request: agent_pb2.UnarchiveRequest, context: Context
    ) -> agent_pb2.UnarchiveResponse:
        """Unarchive a session."""
        space_id, session_id = _session_ids(request)
        session = await self._sessions.unarchive(_caller(context), space_id, session_id)
        return agent_pb2.UnarchiveResponse(session=session)

    async def DeleteSession(
        self, request: agent_pb2.DeleteSessionRequest, context: Context
    ) -> agent_pb2.DeleteSessionResponse:
        """Erase a session and its subtree."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        limit = request.max_reply_bytes
        if limit < 0:
            violations.add("max_reply_bytes", f"must not be negative, got {limit}")
        violations.raise_if_any()
        deleted = await self._sessions.delete_session(
            _caller(context),
            space_id,
            session_id,
            count_only=request.count_only,
            max_reply_bytes=limit,
        )
        return agent_pb2.DeleteSessionResponse(
            deleted_ids=deleted.deleted_ids, deleted_count=deleted.deleted_count
        )

    async def ListProfiles(
        self, request: agent_pb2.ListProfilesRequest, context: Context
    ) -> agent_pb2.ListProfilesResponse:
        """The configured fork profiles, in file order."""
        validation.space_uuid(request.space_id)
        return agent_pb2.ListProfilesResponse(profiles=[profile_info(p) for p in self._profiles])

    async def UpdateLabel(
        self, request: agent_pb2.UpdateLabelRequest, context: Context
    ) -> agent_pb2.UpdateLabelResponse:
        """Rename a session."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        validation.label(request.label, violations)
        violations.raise_if_any()
        session = await self._sessions.rename(_caller(context), space_id, session_id, request.label)
        return agent_pb2.UpdateLabelResponse(session=session)

    async def WhoAmI(
        self, request: agent_pb2.WhoAmIRequest, context: Context
    ) -> agent_pb2.WhoAmIResponse:
        """The caller's principal and the spaces its key reaches."""
        principal = current_principal()
        identity = await self._keys.identity(principal)
        return agent_pb2.WhoAmIResponse(
            principal=identity.principal,
            key_id=str(principal.key_id),
            scope=agent_pb2.KEY_SCOPE_ADMIN if principal.is_admin else agent_pb2.KEY_SCOPE_TENANT,
            spaces=[agent_pb2.SpaceInfo(id=str(i), name=name) for i, name in identity.spaces],
        )
