"""gRPC face of SessionStorage: validate and convert, one service call, convert back.

`SessionStorageServicer` holds the rooms' services and runs the RPCs of sessions,
records, search, Transact and the event log; the slots', shared memory's, claims'
and turns' RPCs are mixed in from `slots`, `memory`, `claims` and `turns`.
No SQL, no rules, no try blocks: domain errors raised below are mapped to
status codes by the kernel's call chain (`stello.serving.interceptors`).
"""

from __future__ import annotations

import grpc

from stello.errors import Violations
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.validation import page_size, space_uuid
from storage_service.convert import (
    add_event,
    add_records,
    hit_to_proto,
    meta_to_proto,
    result_to_proto,
    slots_to_proto,
)
from storage_service.events.service import EventLog
from storage_service.events.wire import read_events
from storage_service.guard.service import ForkGuard
from storage_service.jobs import wire
from storage_service.jobs.service import JobService
from storage_service.keys.wire import idempotency, remembered_key
from storage_service.memory.service import SharedMemoryService
from storage_service.parse import RequestParser
from storage_service.records.service import RecordService
from storage_service.records.wire import keep_recent, record_query
from storage_service.search.service import SearchService
from storage_service.search.wire import record_search, search_page_size
from storage_service.servicer.claims import ClaimRpcs
from storage_service.servicer.memory import SharedMemoryRpcs
from storage_service.servicer.slots import SlotRpcs
from storage_service.servicer.turns import TurnRpcs
from storage_service.sessions.service import SessionService
from storage_service.sessions.wire import meta_update, target
from storage_service.sessions.wire import status as parse_status
from storage_service.slots.service import SlotService
from storage_service.slots.wire import session_slots
from storage_service.transact.service import TransactService
from storage_service.turns.service import TurnService

Context = grpc.aio.ServicerContext[object, object]


class SessionStorageServicer(
    SlotRpcs,
    SharedMemoryRpcs,
    ClaimRpcs,
    TurnRpcs,
    storage_pb2_grpc.SessionStorageServicer,
):
    """stello.storage.v1.SessionStorage over the rooms' services, one per subsystem."""

    def __init__(
        self,
        parser: RequestParser,
        *,
        sessions: SessionService,
        records: RecordService,
        slots: SlotService,
        turns: TurnService,
        transact: TransactService,
        memory: SharedMemoryService,
        guard: ForkGuard,
        events: EventLog,
        jobs: JobService,
        search: SearchService,
    ) -> None:
        self._parse = parser
        self._sessions = sessions
        self._records = records
        self._slots = slots
        self._turns = turns
        self._transact = transact
        self._memory = memory
        self._guard = guard
        self._events = events
        self._jobs = jobs
        self._search = search

    async def GetSession(
        self, request: storage_pb2.GetSessionRequest, context: Context
    ) -> storage_pb2.GetSessionResponse:
        """Read a visible session's meta, and the slots asked for with it (and its
        progress, when asked)."""
        if request.progress:
            return await self._session_view(request)
        if not request.slots:
            meta = await self._sessions.get_session(*target(request))
            return storage_pb2.GetSessionResponse(session=meta_to_proto(meta))
        v = Violations()
        space_id, session_id = target(request, v)
        slots = session_slots(request.slots, v)
        v.raise_if_any()
        meta, found = await self._sessions.get_session_with_slots(space_id, session_id, slots)
        return storage_pb2.GetSessionResponse(
            session=meta_to_proto(meta), slots=slots_to_proto(found)
        )

    async def _session_view(
        self, request: storage_pb2.GetSessionRequest
    ) -> storage_pb2.GetSessionResponse:
        """GetSession with progress."""
        v = Violations()
        space_id, session_id = target(request, v)
        slots = session_slots(request.slots, v)
        v.raise_if_any()
        view = await self._sessions.get_session_view(space_id, session_id, slots)
        reply = storage_pb2.GetSessionResponse(
            session=meta_to_proto(view.meta),
            progress=wire.progress_to_proto(view.coverage, view.jobs),
        )
        if view.slots is not None:
            reply.slots.CopyFrom(slots_to_proto(view.slots))
        return reply

    async def PutSession(
        self, request: storage_pb2.PutSessionRequest, context: Context
    ) -> storage_pb2.PutSessionResponse:
        """Replace label and status of an existing session."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        update = meta_update(request.HasField("session"), request.session, "session", v)
        v.raise_if_any()
        meta = await self._sessions.put_session(space_id, update)
        return storage_pb2.PutSessionResponse(session=meta_to_proto(meta))

    async def ListSessions(
        self, request: storage_pb2.ListSessionsRequest, context: Context
    ) -> storage_pb2.ListSessionsResponse:
        """One page of the space's committed sessions."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        status = parse_status(request.status, "status", v, allow_unspecified=True)
        size = page_size(request.page_size, v)
        v.raise_if_any()
        page = await self._sessions.list_sessions(space_id, status, size, request.page_token)
        return storage_pb2.ListSessionsResponse(
            sessions=[meta_to_proto(m) for m in page.sessions],
            next_page_token=page.next_page_token,
        )

    async def AppendRecords(
        self, request: storage_pb2.AppendRecordsRequest, context: Context
    ) -> storage_pb2.AppendRecordsResponse:
        """Append records atomically with contiguous seqs."""
        v = Violations()
        space_id, session_id = target(request, v)
        records = self._parse.records(request.records, "records", v)
        key = idempotency(request, v)
        v.raise_if_any()
        stored = await self._records.append_records(space_id, session_id, records, key)
        reply = storage_pb2.AppendRecordsResponse()
        add_records(reply.records, stored)
        return reply

    async def ListRecords(
        self, request: storage_pb2.ListRecordsRequest, context: Context
    ) -> storage_pb2.ListRecordsResponse:
        """Read records, always chronological."""
        v = Violations()
        space_id, session_id = target(request, v)
        query = record_query(request, v)
        v.raise_if_any()
        page = await self._records.list_records(space_id, session_id, query)
        reply = storage_pb2.ListRecordsResponse(next_page_token=page.next_page_token)
        add_records(reply.records, page.records)
        return reply

    async def SearchRecords(
        self, request: storage_pb2.SearchRecordsRequest, context: Context
    ) -> storage_pb2.SearchRecordsResponse:
        """One page of the records matching a text query."""
        v = Violations()
        search = record_search(request, v)
        v.raise_if_any()
        page = await self._search.search_records(search)
        return storage_pb2.SearchRecordsResponse(
            hits=[hit_to_proto(h) for h in page.hits], next_page_token=page.next_page_token
        )

    async def SearchSessions(
        self, request: storage_pb2.SearchSessionsRequest, context: Context
    ) -> storage_pb2.SearchSessionsResponse:
        """One page of the sessions whose label matches a text query."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        status = parse_status(request.status, "status", v, allow_unspecified=True)
        size = search_page_size(request.page_size, v)
        v.raise_if_any()
        page = await self._search.search_sessions(
            space_id, request.query, status, size, request.page_token
        )
        return storage_pb2.SearchSessionsResponse(
            sessions=[meta_to_proto(m) for m in page.sessions],
            next_page_token=page.next_page_token,
        )

    async def TrimRecords(
        self, request: storage_pb2.TrimRecordsRequest, context: Context
    ) -> storage_pb2.TrimRecordsResponse:
        """Keep only the newest records."""
        v = Violations()
        space_id, session_id = target(request, v)
        keep = keep_recent(request.HasField("keep_recent"), request.keep_recent, "keep_recent", v)
        v.raise_if_any()
        removed = await self._records.trim_records(space_id, session_id, keep)
        return storage_pb2.TrimRecordsResponse(removed_count=removed)

    async def Transact(
        self, request: storage_pb2.TransactRequest, context: Context
    ) -> storage_pb2.TransactResponse:
        """Preconditions and operations, all or nothing."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        preconditions, operations = self._parse.transact(request, v)
        key = idempotency(request, v)
        v.raise_if_any()
        results = await self._transact.transact(space_id, preconditions, operations, key)
        return storage_pb2.TransactResponse(results=[result_to_proto(r) for r in results])

    async def GetRememberedResult(
        self, request: storage_pb2.GetRememberedResultRequest, context: Context
    ) -> storage_pb2.GetRememberedResultResponse:
        """Read an idempotency entry a RememberResultOp stored."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        remembered_key(request.scope, request.request_id, "", v)
        v.raise_if_any()
        found = await self._transact.get_remembered_result(
            space_id, request.scope, request.request_id
        )
        if found is None:
            return storage_pb2.GetRememberedResultResponse(found=False)
        return storage_pb2.GetRememberedResultResponse(
            found=True, request_hash=found.request_hash, response=found.response
        )

    async def ReadEvents(
        self, request: storage_pb2.ReadEventsRequest, context: Context
    ) -> storage_pb2.ReadEventsResponse:
        """The space's events after a position, in commit order."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        after, limit = read_events(request, v)
        v.raise_if_any()
        rows = await self._events.read(space_id, after, limit)
        reply = storage_pb2.ReadEventsResponse(last_position=rows.last_position)
        for event in rows.events:
            add_event(reply.events, event)
        return reply
