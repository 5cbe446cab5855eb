"""The turn lease's RPCs (DESIGN §4.2, §4.3): BeginTurn and its line, renewal, release.

Mixed into `storage.SessionStorageServicer`, thin like its other RPCs: the logic is
`turns.service.TurnService`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stello.errors import Violations
from stello.formats.timestamps import timestamp
from stello.storage.v1 import storage_pb2
from stello.validation import parse_uuid
from storage_service.convert import turn_start_to_proto
from storage_service.parse import RequestParser
from storage_service.sessions.wire import target
from storage_service.turns.service import TurnService
from storage_service.turns.wire import turn_budget, turn_busy, turn_key

if TYPE_CHECKING:
    from storage_service.servicer.storage import Context


class TurnRpcs:
    """BeginTurn, LeaveTurnQueue, ReleaseTurn, RenewTurn."""

    _parse: RequestParser
    _turns: TurnService

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
