"""The listing and search RPCs: ListSessionDigests, GetTree, ListRecords, SearchRecords,
SearchSessions, ResolveSessionPrefix.

Mixed into `gateway.AgentGatewayServicer`, like its other RPCs thin: each validates its
request and makes one `sessions.service.SessionService` call, paged or bounded as the
caller asked (STYLE §17).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.servicer.metadata import check_filter
from agent_gateway.sessions.service import RecordQuery, SessionService
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.rules.prefixes import match_limit, parse_prefix

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


_STATUSES = (
    common_pb2.SESSION_STATUS_UNSPECIFIED,
    common_pb2.SESSION_STATUS_ACTIVE,
    common_pb2.SESSION_STATUS_ARCHIVED,
)


class SessionReadRpcs:
    """ListSessionDigests, GetTree, ListRecords, SearchRecords, SearchSessions,
    ResolveSessionPrefix."""

    _sessions: SessionService

    async def ListSessionDigests(
        self, request: agent_pb2.ListSessionDigestsRequest, context: Context
    ) -> agent_pb2.ListSessionDigestsResponse:
        """One page of joined digests (one ListAll + one BatchGetSlots)."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        page_size = validation.page_size(request.page_size, violations)
        if request.status not in _STATUSES:
            violations.add(
                "status", validation.not_one_of(common_pb2.SessionStatus, request.status)
            )
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
        after_seq = validation.seq_bound(request, "after_seq", violations)
        before_seq = validation.seq_bound(request, "before_seq", violations)
        violations.raise_if_any()
        query = RecordQuery(
            space_id=space_id,
            session_id=session_id,
            limit=limit,
            offset=request.offset,
            role=request.role,
            after_seq=after_seq,
            before_seq=before_seq,
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
