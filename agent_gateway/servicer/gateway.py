"""stello.agent.v1.AgentGateway: proto <-> domain, one service call per RPC."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from agent_gateway.clients import TreeClient
from agent_gateway.forks.creator import (
    DEFAULT_ROOT_LABEL,
    ForkInput,
    RootInput,
    SessionCreator,
    SizeLimits,
)
from agent_gateway.forks.import_requests import import_input
from agent_gateway.forks.imports import SessionImporter
from agent_gateway.forks.profiles import ProfileRegistry
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.memory.shared import SharedMemory
from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.servicer.lineage import LineageRpcs
from agent_gateway.servicer.memory import SharedMemoryRpcs
from agent_gateway.servicer.metadata import MetadataRpcs, check_filter, check_metadata
from agent_gateway.servicer.replies import (
    CONTEXTS,
    consolidate_response,
    profile_info,
    session_view,
)
from agent_gateway.servicer.retention import RetentionRpcs
from agent_gateway.servicer.skills import SkillRpcs
from agent_gateway.sessions.service import RecordQuery, SessionService
from agent_gateway.sessions.watch import Watchers, WatchInput
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.tools.skills import SkillRegistry
from agent_gateway.turns.requests import (
    ContentLimits,
    send_input,
    stream_event,
    submit_input,
    submit_response,
    submit_stream_event,
)
from agent_gateway.turns.service import TurnService
from stello import validation
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import WATCH_CURSOR_METADATA
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.idempotency import MAX_REQUEST_ID_CHARS, fingerprint
from stello.interceptors import current_principal
from stello.prefixes import match_limit, parse_prefix

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]

_STATUSES = (
    common_pb2.SESSION_STATUS_UNSPECIFIED,
    common_pb2.SESSION_STATUS_ACTIVE,
    common_pb2.SESSION_STATUS_ARCHIVED,
)


def watch_input(request: agent_pb2.WatchSpaceRequest) -> WatchInput:
    """WatchSpace's request, validated: the space, the cursor's position, the kinds kept."""
    violations = Violations()
    space_id = validation.space_uuid(request.space_id, violations)
    after = None
    if request.HasField("after_cursor"):
        cursor = request.after_cursor
        if cursor.isascii() and cursor.isdigit() and len(cursor) <= 18:
            after = int(cursor)
        elif not cursor:
            # Set but empty: what a client's "saved cursor or empty" gives on a first start.
            violations.add(
                "after_cursor",
                "is set but empty: leave it unset to start at the present, or give a cursor "
                "WatchSpace sent (SpaceEvent.cursor)",
            )
        else:
            violations.add(
                "after_cursor",
                "must be a cursor WatchSpace sent (SpaceEvent.cursor); leave it unset to start "
                "at the present",
            )
    for index, kind in enumerate(request.kinds):
        if kind not in common_pb2.EventKind.values() or kind == common_pb2.EVENT_KIND_UNSPECIFIED:
            violations.add(f"kinds[{index}]", "must be a known EventKind")
    violations.raise_if_any()
    return WatchInput(space_id, after, frozenset(request.kinds))


def _request_id(value: str, violations: Violations) -> str:
    if len(value) > MAX_REQUEST_ID_CHARS:
        violations.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return value


def _request_hash(request: agent_pb2.CreateRootRequest | agent_pb2.ForkRequest) -> bytes:
    """The fingerprint of the request without its request_id (b"" when it has none)."""
    return fingerprint(request) if request.request_id else b""


def _skills(
    message: agent_pb2.CreateRootRequest | agent_pb2.ForkRequest,
    configured: SkillRegistry,
    violations: Violations,
) -> tuple[str, ...] | None:
    """The allow-list asked for; a name no skill can have, or that no configured skill has,
    is a violation (it was stored, and the session then matched no skill, without a word)."""
    if not message.HasField("skills"):
        return None
    names = tuple(message.skills.names)
    for index, name in enumerate(names):
        field = f"skills.names[{index}]"
        if (
            validation.skill_name(name, field, violations)
            and (unknown := configured.unknown(name)) is not None
        ):
            violations.add(field, unknown)
    return names


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

    async def CreateRoot(
        self, request: agent_pb2.CreateRootRequest, context: Context
    ) -> agent_pb2.CreateRootResponse:
        """Create a root session through the provisioning saga."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        label = request.label if request.HasField("label") else DEFAULT_ROOT_LABEL
        validation.label(label, violations)
        request_id = _request_id(request.request_id, violations)
        check_metadata(dict(request.metadata), violations)
        skills = _skills(request, self._builtins.skills, violations)
        violations.raise_if_any()
        root = RootInput(
            space_id=space_id,
            label=label,
            system_prompt=request.system_prompt if request.HasField("system_prompt") else None,
            skills=skills,
            profile=request.profile if request.HasField("profile") else None,
            profile_vars=dict(request.profile_vars),
            request_id=request_id,
            request_hash=_request_hash(request),
            metadata=dict(request.metadata),
        )
        session = await self._creator.create_root(_caller(context), root)
        return agent_pb2.CreateRootResponse(session=session)

    async def Fork(
        self, request: agent_pb2.ForkRequest, context: Context
    ) -> agent_pb2.ForkResponse:
        """Fork a session through the provisioning saga."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        source_id = validation.parse_uuid(
            request.source_session_id, "source_session_id", violations
        )
        validation.label(request.label, violations)
        parent_id = None
        if request.HasField("topology_parent_id"):
            parent_id = validation.parse_uuid(
                request.topology_parent_id, "topology_parent_id", violations
            )
        if request.context not in CONTEXTS:
            violations.add("context", f"unknown ForkContext value {request.context}")
        until = request.inherit_until_seq if request.HasField("inherit_until_seq") else None
        if until is not None and until < 0:
            violations.add("inherit_until_seq", "must not be negative")
        request_id = _request_id(request.request_id, violations)
        check_metadata(dict(request.metadata), violations)
        skills = _skills(request, self._builtins.skills, violations)
        violations.raise_if_any()
        fork = ForkInput(
            space_id=space_id,
            source_id=source_id,
            label=request.label,
            topology_parent_id=parent_id,
            profile=request.profile if request.HasField("profile") else None,
            profile_vars=dict(request.profile_vars),
            system_prompt=request.system_prompt if request.HasField("system_prompt") else None,
            skills=skills,
            context=CONTEXTS[request.context],
            inherit_until_seq=until,
            prompt=request.prompt if request.HasField("prompt") else None,
            request_id=request_id,
            request_hash=_request_hash(request),
            metadata=dict(request.metadata),
            copy_metadata=request.copy_metadata,
        )
        session = await self._creator.fork(_caller(context), fork)
        return agent_pb2.ForkResponse(session=session)

    async def Send(
        self, request: agent_pb2.SendRequest, context: Context
    ) -> agent_pb2.SendResponse:
        """Run one conversation turn and answer it once committed."""
        turn = send_input(request, limits=self._limits)
        return await self._turns.send(_caller(context), turn)

    async def SendStream(
        self, request: agent_pb2.SendStreamRequest, context: Context
    ) -> AsyncIterator[agent_pb2.SendStreamResponse]:
        """Run one turn, streaming text deltas and tool calls, then `done`."""
        turn = send_input(request, limits=self._limits)
        async for event in self._turns.send_events(_caller(context), turn, stream=True):
            yield stream_event(event)

    async def SubmitToolResults(
        self, request: agent_pb2.SubmitToolResultsRequest, context: Context
    ) -> agent_pb2.SubmitToolResultsResponse:
        """Answer the pending client tool calls and continue the turn."""
        turn = submit_input(request, limits=self._limits)
        return submit_response(await self._turns.submit(_caller(context), turn))

    async def SubmitToolResultsStream(
        self, request: agent_pb2.SubmitToolResultsStreamRequest, context: Context
    ) -> AsyncIterator[agent_pb2.SubmitToolResultsStreamResponse]:
        """Answer the pending client tool calls and continue the turn, streaming text deltas
        and tool calls, then `done`."""
        turn = submit_input(request, limits=self._limits)
        async for event in self._turns.submit_events(_caller(context), turn, stream=True):
            yield submit_stream_event(event)

    async def Consolidate(
        self, request: agent_pb2.ConsolidateRequest, context: Context
    ) -> agent_pb2.ConsolidateResponse:
        """Rewrite the session's memory with the LLM."""
        space_id, session_id = _session_ids(request)
        outcome = await self._consolidator.consolidate(_caller(context), space_id, session_id)
        return consolidate_response(outcome)

    async def ListSessionDigests(
        self, request: agent_pb2.ListSessionDigestsRequest, context: Context
    ) -> agent_pb2.ListSessionDigestsResponse:
        """One page of joined digests (one ListAll + one BatchGetSlots)."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        page_size = validation.page_size(request.page_size, violations)
        if request.status not in _STATUSES:
            violations.add("status", f"unknown SessionStatus value {request.status}")
        check_filter(request.filter, violations)
        violations.raise_if_any()
        page = await self._sessions.digests.list_digests(
            _caller(context),
            space_id,
            status=request.status,
            page_size=page_size,
            page_token=request.page_token,
            session_filter=request.filter if request.HasField("filter") else None,
        )
        return agent_pb2.ListSessionDigestsResponse(
            digests=page.digests, next_page_token=page.next_page_token
        )

    async def GetSession(
        self, request: agent_pb2.GetSessionRequest, context: Context
    ) -> agent_pb2.GetSessionResponse:
        """The joined view of one session."""
        space_id, session_id = _session_ids(request)
        details = await self._sessions.get_session(_caller(context), space_id, session_id)
        return agent_pb2.GetSessionResponse(session=session_view(details))

    async def GetTree(self, request: agent_pb2.GetTreeRequest, context: Context) -> bytes:
        """The forest or a subtree, in pre-order: the tree's reply passed on as its bytes
        (served raw, `app.RAW_REPLIES`; tree.proto's GetTreeResponse has the same fields)."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        root_id = None
        if request.HasField("root_id"):
            root_id = validation.parse_uuid(request.root_id, "root_id", violations)
        max_depth = request.max_depth if request.HasField("max_depth") else None
        if max_depth is not None and max_depth < 0:
            violations.add("max_depth", "must not be negative")
        violations.raise_if_any()
        return await self._sessions.get_tree(
            _caller(context), space_id, root_id=root_id, max_depth=max_depth
        )

    async def ListRecords(
        self, request: agent_pb2.ListRecordsRequest, context: Context
    ) -> agent_pb2.ListRecordsResponse:
        """A session's records, chronological."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        session_id = validation.parse_uuid(request.session_id, "session_id", violations)
        limit = request.limit if request.HasField("limit") else None
        if limit is not None and limit < 0:
            violations.add("limit", "must not be negative")
        if request.offset < 0:
            violations.add("offset", "must not be negative")
        violations.raise_if_any()
        query = RecordQuery(
            space_id=space_id,
            session_id=session_id,
            limit=limit,
            offset=request.offset,
            role=request.role,
            after_seq=request.after_seq if request.HasField("after_seq") else None,
            before_seq=request.before_seq if request.HasField("before_seq") else None,
            newest_first=request.newest_first,
            page_token=request.page_token,
        )
        page = await self._sessions.list_records(_caller(context), query)
        return agent_pb2.ListRecordsResponse(
            records=page.records, next_page_token=page.next_page_token
        )

    async def SearchRecords(
        self, request: agent_pb2.SearchRecordsRequest, context: Context
    ) -> agent_pb2.SearchRecordsResponse:
        """A page of the records matching a text query (storage validates the query)."""
        violations = Violations()
        validation.space_uuid(request.space_id, violations)
        violations.raise_if_any()
        reply = await self._sessions.search_records(_caller(context), request)
        return agent_pb2.SearchRecordsResponse(
            hits=reply.hits, next_page_token=reply.next_page_token
        )

    async def SearchSessions(
        self, request: agent_pb2.SearchSessionsRequest, context: Context
    ) -> agent_pb2.SearchSessionsResponse:
        """A page of the sessions whose label matches a text query."""
        violations = Violations()
        validation.space_uuid(request.space_id, violations)
        violations.raise_if_any()
        reply = await self._sessions.search_sessions(_caller(context), request)
        return agent_pb2.SearchSessionsResponse(
            sessions=reply.sessions, next_page_token=reply.next_page_token
        )

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

    async def WatchSpace(
        self, request: agent_pb2.WatchSpaceRequest, context: Context
    ) -> AsyncIterator[agent_pb2.WatchSpaceResponse]:
        """Stream the space's events after the cursor (sent first as metadata), then live ones."""

        async def started(position: int) -> None:
            await context.send_initial_metadata(((WATCH_CURSOR_METADATA, str(position)),))

        async for event in self._watchers.watch(_caller(context), watch_input(request), started):
            yield agent_pb2.WatchSpaceResponse(event=event)

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

    async def ResolveSessionPrefix(
        self, request: agent_pb2.ResolveSessionPrefixRequest, context: Context
    ) -> agent_pb2.ResolveSessionPrefixResponse:
        """The sessions whose id starts with a prefix."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        digits = parse_prefix(request.prefix, violations)
        limit = match_limit(request.limit, violations)
        violations.raise_if_any()
        found = await self._sessions.resolve_prefix(_caller(context), space_id, digits, limit)
        return agent_pb2.ResolveSessionPrefixResponse(sessions=found)

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

    async def ImportSession(
        self, request: agent_pb2.ImportSessionRequest, context: Context
    ) -> agent_pb2.ImportSessionResponse:
        """Create a session from given records, config and slots through the saga."""
        imported = import_input(request, limits=self._sizes)
        session = await self._importer.import_session(_caller(context), imported)
        return agent_pb2.ImportSessionResponse(session=session)
