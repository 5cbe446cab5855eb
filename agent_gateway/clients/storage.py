"""The gateway's typed async client of the storage service (stello.storage.v1.SessionStorage).

Each method is one RPC through `rpc.ServiceClient`'s shared call path: the
caller's key forwarded, their deadline, bounded UNAVAILABLE retries, and
failures turned back into the kernel's domain errors. The calls of memory
(`memory`), of remembered replies (`remembered`) and of the background runner
(`jobs`) are mixins in their own modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import grpc

from agent_gateway.clients.jobs import JobCalls
from agent_gateway.clients.memory import MemoryCalls
from agent_gateway.clients.remembered import RememberedCalls
from agent_gateway.clients.rpc import Caller, CallPolicy
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc

ALL_SLOTS = (
    storage_pb2.SLOT_KIND_SYSTEM_PROMPT,
    storage_pb2.SLOT_KIND_MEMORY,
    storage_pb2.SLOT_KIND_INSIGHT,
)


class StorageClient(MemoryCalls, RememberedCalls, JobCalls):
    """stello.storage.v1.SessionStorage, typed."""

    def __init__(self, channel: grpc.aio.Channel, policy: CallPolicy, address: str = "") -> None:
        super().__init__("SessionStorage", policy, address)
        self._stub = storage_pb2_grpc.SessionStorageStub(channel)

    async def get_session(
        self, caller: Caller, space_id: UUID, session_id: UUID | str
    ) -> common_pb2.SessionMeta:
        """The conversation meta of a visible session."""
        request = storage_pb2.GetSessionRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetSession", self._stub.GetSession, request, storage_pb2.GetSessionResponse, caller
        )
        return reply.session

    async def get_session_with_slots(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID | str,
        slots: Sequence[storage_pb2.SlotKind] = ALL_SLOTS,
        *,
        progress: bool = False,
    ) -> tuple[common_pb2.SessionMeta, storage_pb2.SessionSlots, common_pb2.HistoryProgress]:
        """The conversation meta of a visible session and its `slots` (default: all), and
        with `progress` how far its summaries and memory cover it, in one call."""
        request = storage_pb2.GetSessionRequest(
            space_id=str(space_id), session_id=str(session_id), slots=list(slots), progress=progress
        )
        reply = await self._call(
            "GetSession", self._stub.GetSession, request, storage_pb2.GetSessionResponse, caller
        )
        return reply.session, reply.slots, reply.progress

    async def get_system_prompt(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> str | None:
        """The system prompt slot; None when unset."""
        request = storage_pb2.GetSystemPromptRequest(
            space_id=str(space_id), session_id=str(session_id)
        )
        reply = await self._call(
            "GetSystemPrompt",
            self._stub.GetSystemPrompt,
            request,
            storage_pb2.GetSystemPromptResponse,
            caller,
        )
        return reply.content if reply.HasField("content") else None

    async def list_records(
        self, caller: Caller, request: storage_pb2.ListRecordsRequest
    ) -> storage_pb2.ListRecordsResponse:
        """One ListRecords call (one page), as given."""
        reply: storage_pb2.ListRecordsResponse = await self._call(
            "ListRecords", self._stub.ListRecords, request, storage_pb2.ListRecordsResponse, caller
        )
        return reply

    async def search_records(
        self, caller: Caller, request: storage_pb2.SearchRecordsRequest
    ) -> storage_pb2.SearchRecordsResponse:
        """One SearchRecords call (one page), as given.

        A long call: storage bounds a search by its own STELLO_STORAGE_SEARCH_TIMEOUT_S and
        answers SEARCH_TOO_BROAD past it, which the per-call cap (as long, 10 s) cut short
        as DEADLINE_EXCEEDED; the caller's deadline still decides.
        """
        reply: storage_pb2.SearchRecordsResponse = await self._call(
            "SearchRecords",
            self._stub.SearchRecords,
            request,
            storage_pb2.SearchRecordsResponse,
            caller,
            long=True,
        )
        return reply

    async def search_sessions(
        self, caller: Caller, request: storage_pb2.SearchSessionsRequest
    ) -> storage_pb2.SearchSessionsResponse:
        """One SearchSessions call (one page), as given; a long call, as `search_records`."""
        reply: storage_pb2.SearchSessionsResponse = await self._call(
            "SearchSessions",
            self._stub.SearchSessions,
            request,
            storage_pb2.SearchSessionsResponse,
            caller,
            long=True,
        )
        return reply

    async def all_records(
        self, caller: Caller, space_id: UUID, session_id: UUID, *, until_seq: int | None = None
    ) -> list[common_pb2.Record]:
        """Every record of a session (up to `until_seq`), page after page (pages are bounded
        in bytes, so a short page is not the last: the token says)."""
        found: list[common_pb2.Record] = []
        request = storage_pb2.ListRecordsRequest(space_id=str(space_id), session_id=str(session_id))
        if until_seq is not None:
            request.before_seq = until_seq + 1
        while True:
            reply = await self.list_records(caller, request)
            found.extend(reply.records)
            if not reply.next_page_token:
                return found
            request.page_token = reply.next_page_token

    async def batch_get_slots(
        self,
        caller: Caller,
        space_id: UUID,
        session_ids: Sequence[str],
        slots: Sequence[storage_pb2.SlotKind] = (),
        *,
        max_reply_bytes: int = 0,
    ) -> storage_pb2.BatchGetSlotsResponse:
        """The `slots` (default: all) of the committed sessions among `session_ids`, in
        request order, as many as fit `max_reply_bytes` (0 = storage's message limit; the
        first always): `next_index` of the reply, when not 0, is the first id left unread."""
        request = storage_pb2.BatchGetSlotsRequest(
            space_id=str(space_id),
            session_ids=list(session_ids),
            slots=list(slots),
            max_reply_bytes=max_reply_bytes,
        )
        return await self._call(
            "BatchGetSlots",
            self._stub.BatchGetSlots,
            request,
            storage_pb2.BatchGetSlotsResponse,
            caller,
        )

    async def transact(
        self,
        caller: Caller,
        space_id: UUID,
        operations: Sequence[storage_pb2.Operation],
        *,
        request_id: str,
        preconditions: Sequence[storage_pb2.Precondition] = (),
        long: bool = False,
    ) -> Sequence[storage_pb2.OperationResult]:
        """Apply `operations` all-or-nothing; idempotent by request_id.

        `long`: a write whose cost grows with the request (a saga's fill: an import's
        records) gets the caller's whole deadline rather than the per-call cap.
        """
        request = storage_pb2.TransactRequest(
            space_id=str(space_id),
            preconditions=list(preconditions),
            operations=list(operations),
            request_id=request_id,
        )
        reply = await self._call(
            "Transact",
            self._stub.Transact,
            request,
            storage_pb2.TransactResponse,
            caller,
            long=long,
        )
        return reply.results

    async def get_compression_cache(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        *,
        at_or_below_seq: int | None = None,
        complete_only: bool = False,
    ) -> storage_pb2.CompressionCache | None:
        """The newest summary (covering no record after `at_or_below_seq`, not lossy with
        `complete_only`); None when there is none."""
        request = storage_pb2.GetCompressionCacheRequest(
            space_id=str(space_id), session_id=str(session_id), complete_only=complete_only
        )
        if at_or_below_seq is not None:
            request.at_or_below_seq = at_or_below_seq
        reply = await self._call(
            "GetCompressionCache",
            self._stub.GetCompressionCache,
            request,
            storage_pb2.GetCompressionCacheResponse,
            caller,
        )
        return reply.cache if reply.HasField("cache") else None

    async def put_compression_cache(
        self, caller: Caller, space_id: UUID, session_id: UUID, cache: storage_pb2.CompressionCache
    ) -> None:
        """Make `cache` the session's compression cache (newer summaries are dropped)."""
        request = storage_pb2.PutCompressionCacheRequest(
            space_id=str(space_id), session_id=str(session_id), cache=cache
        )
        await self._call(
            "PutCompressionCache",
            self._stub.PutCompressionCache,
            request,
            storage_pb2.PutCompressionCacheResponse,
            caller,
        )

    async def start_turn(
        self, caller: Caller, request: storage_pb2.BeginTurnRequest
    ) -> storage_pb2.BeginTurnResponse:
        """BeginTurn with a window: the remembered reply, or the lease and the turn."""
        reply: storage_pb2.BeginTurnResponse = await self._call(
            "BeginTurn", self._stub.BeginTurn, request, storage_pb2.BeginTurnResponse, caller
        )
        return reply

    async def begin_turn(self, caller: Caller, space_id: UUID, session_id: UUID, ttl_s: int) -> str:
        """Take the session's turn lease; its token (ABORTED TURN_IN_PROGRESS while held)."""
        request = storage_pb2.BeginTurnRequest(
            space_id=str(space_id), session_id=str(session_id), ttl_s=ttl_s
        )
        reply = await self._call(
            "BeginTurn", self._stub.BeginTurn, request, storage_pb2.BeginTurnResponse, caller
        )
        return reply.token

    async def release_turn(
        self, caller: Caller, space_id: UUID, session_id: UUID, token: str
    ) -> bool:
        """Give the lease back, writing nothing else; whether it was still live."""
        request = storage_pb2.ReleaseTurnRequest(
            space_id=str(space_id), session_id=str(session_id), token=token
        )
        reply = await self._call(
            "ReleaseTurn", self._stub.ReleaseTurn, request, storage_pb2.ReleaseTurnResponse, caller
        )
        return reply.released

    async def renew_turn(
        self, caller: Caller, space_id: UUID, session_id: UUID, token: str, ttl_s: int
    ) -> storage_pb2.RenewTurnResponse:
        """Extend the lease `token` holds to `ttl_s` from now: `renewed` false when another
        turn took it (or it was released), `interrupted` when an INTERRUPT took it."""
        request = storage_pb2.RenewTurnRequest(
            space_id=str(space_id), session_id=str(session_id), token=token, ttl_s=ttl_s
        )
        reply: storage_pb2.RenewTurnResponse = await self._call(
            "RenewTurn", self._stub.RenewTurn, request, storage_pb2.RenewTurnResponse, caller
        )
        return reply

    async def leave_turn_queue(
        self, caller: Caller, space_id: UUID, session_id: UUID, waiter: str
    ) -> bool:
        """Take a waiting call's ticket out of the session's line; whether it was there."""
        request = storage_pb2.LeaveTurnQueueRequest(
            space_id=str(space_id), session_id=str(session_id), waiter=waiter
        )
        reply = await self._call(
            "LeaveTurnQueue",
            self._stub.LeaveTurnQueue,
            request,
            storage_pb2.LeaveTurnQueueResponse,
            caller,
        )
        return reply.left

    async def claim_fork(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        *,
        min_turns: int,
        cooldown_turns: int,
    ) -> storage_pb2.ClaimForkResponse:
        """Check and take the session's fork guard (granted or not, with the counts)."""
        request = storage_pb2.ClaimForkRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            min_turns=min_turns,
            cooldown_turns=cooldown_turns,
        )
        return await self._call(
            "ClaimFork", self._stub.ClaimFork, request, storage_pb2.ClaimForkResponse, caller
        )

    async def release_fork_claim(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        claim: storage_pb2.ClaimForkResponse,
    ) -> bool:
        """Give back a granted claim whose fork failed; False when a later one replaced it."""
        request = storage_pb2.ReleaseForkClaimRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            claimed_turn=claim.turn_count,
            previous_fork_turn=claim.last_fork_turn if claim.HasField("last_fork_turn") else None,
        )
        reply = await self._call(
            "ReleaseForkClaim",
            self._stub.ReleaseForkClaim,
            request,
            storage_pb2.ReleaseForkClaimResponse,
            caller,
        )
        return reply.released

    async def read_events(
        self, caller: Caller, space_id: UUID, after: int | None, limit: int
    ) -> storage_pb2.ReadEventsResponse:
        """Up to `limit` events after position `after` (None: only the newest position)."""
        request = storage_pb2.ReadEventsRequest(space_id=str(space_id), limit=limit)
        if after is not None:
            request.after_position = after
        return await self._call(
            "ReadEvents", self._stub.ReadEvents, request, storage_pb2.ReadEventsResponse, caller
        )
