"""gRPC face of SessionStorage: validate and convert, one service call, convert back.

No SQL, no rules, no try blocks: domain errors raised below are mapped to
status codes by the kernel's call chain (`stello.interceptors`).
"""

from __future__ import annotations

import grpc

from stello import memory_rules
from stello.errors import Violations
from stello.interceptors import current_principal
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.timestamps import timestamp
from stello.validation import page_size, parse_uuid, space_uuid
from storage_service.convert import (
    add_event,
    add_records,
    cache_to_proto,
    entry_to_proto,
    hit_to_proto,
    meta_to_proto,
    result_to_proto,
    slots_to_proto,
    turn_start_to_proto,
)
from storage_service.events.service import EventLog
from storage_service.events.wire import read_events
from storage_service.guard.service import ForkGuard
from storage_service.jobs import wire
from storage_service.jobs.service import JobService
from storage_service.keys.wire import idempotency, remembered_key
from storage_service.memory.service import SharedMemoryService
from storage_service.models import SlotName
from storage_service.parse import RequestParser
from storage_service.records.service import RecordService
from storage_service.records.wire import keep_recent, record_query
from storage_service.search.service import SearchService
from storage_service.search.wire import record_search, search_page_size
from storage_service.sessions.service import SessionService
from storage_service.sessions.wire import meta_update, target
from storage_service.sessions.wire import status as parse_status
from storage_service.slots.service import SlotService
from storage_service.slots.wire import batch_ids, session_slots, slot_kinds
from storage_service.slots.wire import max_reply_bytes as parse_max_reply_bytes
from storage_service.transact.service import TransactService
from storage_service.turns.service import TurnService
from storage_service.turns.wire import turn_budget, turn_busy, turn_key

Context = grpc.aio.ServicerContext[object, object]
SlotWrite = (
    storage_pb2.PutSystemPromptRequest
    | storage_pb2.PutInsightRequest
    | storage_pb2.PutMemoryRequest
)


class SessionStorageServicer(storage_pb2_grpc.SessionStorageServicer):
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

    async def _put_slot(self, request: SlotWrite, slot: SlotName) -> None:
        """Validate a Put<Slot> request and overwrite that slot."""
        v = Violations()
        space_id, session_id = target(request, v)
        content = self._parse.slot(request.content, "content", v)
        v.raise_if_any()
        await self._slots.put_slot(space_id, session_id, slot, content)

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

    async def GetSystemPrompt(
        self, request: storage_pb2.GetSystemPromptRequest, context: Context
    ) -> storage_pb2.GetSystemPromptResponse:
        """Read the system prompt slot."""
        content = await self._slots.get_slot(*target(request), "system_prompt")
        return storage_pb2.GetSystemPromptResponse(content=content)

    async def PutSystemPrompt(
        self, request: storage_pb2.PutSystemPromptRequest, context: Context
    ) -> storage_pb2.PutSystemPromptResponse:
        """Overwrite the system prompt slot."""
        await self._put_slot(request, "system_prompt")
        return storage_pb2.PutSystemPromptResponse()

    async def GetInsight(
        self, request: storage_pb2.GetInsightRequest, context: Context
    ) -> storage_pb2.GetInsightResponse:
        """Read the insight without consuming it."""
        content = await self._slots.get_slot(*target(request), "insight")
        return storage_pb2.GetInsightResponse(content=content)

    async def PutInsight(
        self, request: storage_pb2.PutInsightRequest, context: Context
    ) -> storage_pb2.PutInsightResponse:
        """Overwrite the insight slot."""
        await self._put_slot(request, "insight")
        return storage_pb2.PutInsightResponse()

    async def ClearInsight(
        self, request: storage_pb2.ClearInsightRequest, context: Context
    ) -> storage_pb2.ClearInsightResponse:
        """Delete the insight."""
        await self._slots.clear_insight(*target(request))
        return storage_pb2.ClearInsightResponse()

    async def ConsumeInsight(
        self, request: storage_pb2.ConsumeInsightRequest, context: Context
    ) -> storage_pb2.ConsumeInsightResponse:
        """Read and clear the insight atomically."""
        content = await self._slots.consume_insight(*target(request))
        return storage_pb2.ConsumeInsightResponse(content=content)

    async def GetMemory(
        self, request: storage_pb2.GetMemoryRequest, context: Context
    ) -> storage_pb2.GetMemoryResponse:
        """Read the memory slot and the seq it covers."""
        content, covered, version = await self._slots.get_memory(*target(request))
        return storage_pb2.GetMemoryResponse(
            content=content, covered_until_seq=covered, version=version
        )

    async def PutMemory(
        self, request: storage_pb2.PutMemoryRequest, context: Context
    ) -> storage_pb2.PutMemoryResponse:
        """Overwrite the memory slot (and the seq it covers, when given)."""
        v = Violations()
        space_id, session_id = target(request, v)
        content = self._parse.slot(request.content, "content", v)
        covered = request.covered_until_seq if request.HasField("covered_until_seq") else None
        if covered is not None and covered < 0:
            v.add("covered_until_seq", "must not be negative")
        v.raise_if_any()
        await self._slots.put_memory(space_id, session_id, content, covered)
        return storage_pb2.PutMemoryResponse()

    async def ListSharedMemory(
        self, request: storage_pb2.ListSharedMemoryRequest, context: Context
    ) -> storage_pb2.ListSharedMemoryResponse:
        """One page of the space's shared memory entries, in insertion order."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        size = page_size(request.page_size, v)
        v.raise_if_any()
        page = await self._memory.list_entries(space_id, size, request.page_token)
        return storage_pb2.ListSharedMemoryResponse(
            entries=[entry_to_proto(e) for e in page.entries],
            next_page_token=page.next_page_token,
            total_count=page.total_count,
        )

    async def GetSharedMemoryEntry(
        self, request: storage_pb2.GetSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.GetSharedMemoryEntryResponse:
        """One shared memory entry, body included."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        memory_rules.check_slug(request.slug, v)
        v.raise_if_any()
        entry = await self._memory.get_entry(space_id, request.slug)
        return storage_pb2.GetSharedMemoryEntryResponse(entry=entry_to_proto(entry))

    async def UpsertSharedMemoryEntry(
        self, request: storage_pb2.UpsertSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.UpsertSharedMemoryEntryResponse:
        """Create or replace a shared memory entry."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        self._parse.memory_entry(request, v)
        key = idempotency(request, v)
        v.raise_if_any()
        upserted = await self._memory.upsert_entry(
            space_id, request.slug, request.summary, request.body, key
        )
        return storage_pb2.UpsertSharedMemoryEntryResponse(
            entry=entry_to_proto(upserted.entry), created=upserted.created
        )

    async def RemoveSharedMemoryEntry(
        self, request: storage_pb2.RemoveSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.RemoveSharedMemoryEntryResponse:
        """Remove a shared memory entry (absent: a no-op)."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        memory_rules.check_slug(request.slug, v)
        key = idempotency(request, v)
        v.raise_if_any()
        removed = await self._memory.remove_entry(space_id, request.slug, key)
        return storage_pb2.RemoveSharedMemoryEntryResponse(removed=removed)

    async def ClaimFork(
        self, request: storage_pb2.ClaimForkRequest, context: Context
    ) -> storage_pb2.ClaimForkResponse:
        """Check and take the session's fork guard."""
        v = Violations()
        space_id, session_id = target(request, v)
        for name in ("min_turns", "cooldown_turns"):
            if getattr(request, name) < 0:
                v.add(name, "must not be negative")
        v.raise_if_any()
        claim = await self._guard.claim(
            space_id, session_id, request.min_turns, request.cooldown_turns
        )
        return storage_pb2.ClaimForkResponse(
            granted=claim.granted,
            turn_count=claim.state.turn_count,
            last_fork_turn=claim.state.last_fork_turn,
        )

    async def ReleaseForkClaim(
        self, request: storage_pb2.ReleaseForkClaimRequest, context: Context
    ) -> storage_pb2.ReleaseForkClaimResponse:
        """Give back a fork claim whose fork failed."""
        v = Violations()
        space_id, session_id = target(request, v)
        previous = request.previous_fork_turn if request.HasField("previous_fork_turn") else None
        if request.claimed_turn < 0:
            v.add("claimed_turn", "must not be negative")
        if previous is not None and previous < 0:
            v.add("previous_fork_turn", "must not be negative")
        v.raise_if_any()
        released = await self._guard.release(space_id, session_id, request.claimed_turn, previous)
        return storage_pb2.ReleaseForkClaimResponse(released=released)

    async def ClaimJob(
        self, request: storage_pb2.ClaimJobRequest, context: Context
    ) -> storage_pb2.ClaimJobResponse:
        """Claim the session's background job of a kind unless another run holds it."""
        v = Violations()
        space_id, session_id = target(request, v)
        kind = wire.job_kind(request.kind, "kind", v)
        ttl_s = self._parse.ttl(request.ttl_s, v)
        token = parse_uuid(request.token, "token", v) if request.token else None
        v.raise_if_any()
        claim = await self._jobs.claim(space_id, session_id, kind, ttl_s, token)
        reply = storage_pb2.ClaimJobResponse(
            granted=claim.granted, job=wire.job_to_proto(claim.job)
        )
        if claim.token is not None and claim.expires_at is not None:
            reply.token = str(claim.token)
            reply.expires_at.CopyFrom(timestamp(claim.expires_at))
        return reply

    async def ListOrphanedJobs(
        self, request: storage_pb2.ListOrphanedJobsRequest, context: Context
    ) -> storage_pb2.ListOrphanedJobsResponse:
        """The background jobs left without a gateway that the key reaches."""
        v = Violations()
        limit = wire.orphans_limit(request.limit, v)
        v.raise_if_any()
        principal = current_principal()
        found = await self._jobs.orphaned(None if principal.is_admin else principal.space_id, limit)
        return storage_pb2.ListOrphanedJobsResponse(jobs=[wire.orphan_to_proto(o) for o in found])

    async def RenewJob(
        self, request: storage_pb2.RenewJobRequest, context: Context
    ) -> storage_pb2.RenewJobResponse:
        """Extend a background job's claim while its run works."""
        v = Violations()
        space_id, session_id = target(request, v)
        kind = wire.job_kind(request.kind, "kind", v)
        token = wire.token(request.token, "token", v)
        ttl_s = self._parse.ttl(request.ttl_s, v)
        v.raise_if_any()
        expires_at = await self._jobs.renew(space_id, session_id, kind, token, ttl_s)
        if expires_at is None:
            return storage_pb2.RenewJobResponse(renewed=False)
        return storage_pb2.RenewJobResponse(renewed=True, expires_at=timestamp(expires_at))

    async def GetCompressionCache(
        self, request: storage_pb2.GetCompressionCacheRequest, context: Context
    ) -> storage_pb2.GetCompressionCacheResponse:
        """Read the compression cache (or an older summary)."""
        v = Violations()
        space_id, session_id = target(request, v)
        below = request.at_or_below_seq if request.HasField("at_or_below_seq") else None
        if below is not None and below < 0:
            v.add("at_or_below_seq", "must not be negative")
        v.raise_if_any()
        cache = await self._slots.get_compression_cache(
            space_id, session_id, below, request.complete_only
        )
        if cache is None:
            return storage_pb2.GetCompressionCacheResponse()
        return storage_pb2.GetCompressionCacheResponse(cache=cache_to_proto(cache))

    async def PutCompressionCache(
        self, request: storage_pb2.PutCompressionCacheRequest, context: Context
    ) -> storage_pb2.PutCompressionCacheResponse:
        """Overwrite the compression cache."""
        v = Violations()
        space_id, session_id = target(request, v)
        cache = self._parse.cache(request.HasField("cache"), request.cache, "cache", v)
        v.raise_if_any()
        await self._slots.put_compression_cache(space_id, session_id, cache)
        return storage_pb2.PutCompressionCacheResponse()

    async def BatchGetSlots(
        self, request: storage_pb2.BatchGetSlotsRequest, context: Context
    ) -> storage_pb2.BatchGetSlotsResponse:
        """Read the slots of many sessions, as many as fit the reply's bytes."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        ids = batch_ids(request.session_ids, v)
        slots = slot_kinds(request.slots, v)
        max_reply_bytes = parse_max_reply_bytes(request.max_reply_bytes, v)
        v.raise_if_any()
        found = await self._slots.batch_get_slots(space_id, ids, slots, max_reply_bytes)
        return storage_pb2.BatchGetSlotsResponse(
            slots=[slots_to_proto(s) for s in found.slots], next_index=found.next_index
        )

    async def BeginTurn(
        self, request: storage_pb2.BeginTurnRequest, context: Context
    ) -> storage_pb2.BeginTurnResponse:
        """Take the session's turn lease; with a window, answer the turn too."""
        v = Violations()
        space_id, session_id = target(request, v)
        ttl_s = self._parse.ttl(request.ttl_s, v)
        key = turn_key(request, v)
        budget = turn_budget(request, v)
        busy = turn_busy(request, v)
        v.raise_if_any()
        if key is None and budget is None:
            lease = await self._turns.begin_turn(space_id, session_id, ttl_s)
            return storage_pb2.BeginTurnResponse(
                token=str(lease.token), expires_at=timestamp(lease.expires_at)
            )
        start = await self._turns.start_turn(space_id, session_id, ttl_s, key, budget, busy)
        return turn_start_to_proto(start)

    async def LeaveTurnQueue(
        self, request: storage_pb2.LeaveTurnQueueRequest, context: Context
    ) -> storage_pb2.LeaveTurnQueueResponse:
        """Take a waiting call's ticket out of the session's line."""
        v = Violations()
        space_id, session_id = target(request, v)
        waiter = parse_uuid(request.waiter, "waiter", v)
        v.raise_if_any()
        left = await self._turns.leave_queue(space_id, session_id, waiter)
        return storage_pb2.LeaveTurnQueueResponse(left=left)

    async def ReleaseTurn(
        self, request: storage_pb2.ReleaseTurnRequest, context: Context
    ) -> storage_pb2.ReleaseTurnResponse:
        """Give the turn lease back."""
        v = Violations()
        space_id, session_id = target(request, v)
        if not request.token:
            v.add("token", "is required")
        v.raise_if_any()
        released = await self._turns.release_turn(space_id, session_id, request.token)
        return storage_pb2.ReleaseTurnResponse(released=released)

    async def RenewTurn(
        self, request: storage_pb2.RenewTurnRequest, context: Context
    ) -> storage_pb2.RenewTurnResponse:
        """Extend the turn lease while its turn runs."""
        v = Violations()
        space_id, session_id = target(request, v)
        if not request.token:
            v.add("token", "is required")
        ttl_s = self._parse.ttl(request.ttl_s, v)
        v.raise_if_any()
        renewal = await self._turns.renew_turn(space_id, session_id, request.token, ttl_s)
        if renewal.expires_at is None:
            return storage_pb2.RenewTurnResponse(renewed=False, interrupted=renewal.interrupted)
        return storage_pb2.RenewTurnResponse(renewed=True, expires_at=timestamp(renewal.expires_at))

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
