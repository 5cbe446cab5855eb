"""BeginTurn, RenewTurn, ReleaseTurn and LeaveTurnQueue over the unit of work; no gRPC here.

One live lease per session (DESIGN §4.2): taking it while another lives is
ABORTED `TURN_IN_PROGRESS` — unless the caller's busy policy says otherwise:
ENQUEUE waits in the session's line (`line`), INTERRUPT takes the lease over.
BeginTurn with a request_id or a window answers the turn in one transaction
(DESIGN §4.3): a remembered reply first; else the row locked, the lease taken
and the turn read under that lock (`window.read_turn`).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from stello.errors import Aborted
from stello.reasons import TURN_IN_PROGRESS
from storage_service.models import (
    TurnBudget,
    TurnBusy,
    TurnKey,
    TurnLease,
    TurnStart,
    TurnState,
    session_not_found,
)
from storage_service.sessions.repository import session_event
from storage_service.turns.line import wait_or_start
from storage_service.turns.repository import LockedTurn, Renewal, lease_token
from storage_service.turns.window import read_turn
from storage_service.unit import Database, UnitOfWork


def _lease(
    session_id: uuid.UUID, token: uuid.UUID, found: bool, expires_at: datetime | None
) -> TurnLease:
    """The lease BeginTurn's statement took; NotFound or Aborted TURN_IN_PROGRESS."""
    if not found:
        raise session_not_found(session_id)
    if expires_at is None:
        raise Aborted(
            f"session {session_id} has a turn in progress; retry after it ends",
            reason=TURN_IN_PROGRESS,
        )
    return TurnLease(token, expires_at)


def _running(session_id: uuid.UUID) -> Aborted:
    """A REJECT turn refused by a live one: what the caller's `busy` could do instead."""
    return Aborted(
        f"session {session_id} has a turn in progress (busy policy reject); retry after it "
        "ends, or set busy to enqueue (wait in line) or interrupt (stop it and run this turn)",
        reason=TURN_IN_PROGRESS,
    )


class TurnService:
    """A session's turn lease, and the turn BeginTurn answers with it."""

    def __init__(self, db: Database, *, max_page_bytes: int) -> None:
        self._db = db
        self._max_page_bytes = max_page_bytes

    async def begin_turn(self, space_id: uuid.UUID, session_id: uuid.UUID, ttl_s: int) -> TurnLease:
        """Take the turn lease for `ttl_s` seconds; Aborted while another lives."""
        token = uuid.uuid4()
        found, expires_at = await self._db.statement(
            lambda uow: uow.turns.begin(space_id, session_id, token, ttl_s)
        )
        return _lease(session_id, token, found, expires_at)

    async def start_turn(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        ttl_s: int,
        key: TurnKey | None,
        budget: TurnBudget | None,
        busy: TurnBusy | None = None,
    ) -> TurnStart:
        """BeginTurn with a request_id or a window, in one transaction (see the proto): a
        remembered entry first; with a window, NotFound for a provisional session, no lease
        for an archived one, else the busy policy, the lease and the turn read under the
        session's lock."""
        policy = busy or TurnBusy()

        async def start(uow: UnitOfWork) -> TurnStart:
            # The row is locked before the remembered reply is read: a retry that
            # waited for its first attempt's commit then sees that commit's reply
            # (read first, it would miss it, find the lease free, and run twice).
            locked = await uow.turns.lock(space_id, session_id) if budget is not None else None
            if key is not None:
                found = await uow.keys.remembered(space_id, key.scope, key.request_id)
                if found is not None:
                    await leave(uow)
                    return TurnStart(remembered=found)
            if budget is None:
                return TurnStart(lease=await take(uow))
            if locked is None or not locked.visible:
                raise session_not_found(session_id)
            if locked.meta.status == "archived":
                await leave(uow)
                state = TurnState(
                    locked.meta, locked.last_seq, locked.system_prompt, locked.insight, None
                )
                return TurnStart(state=state)
            interrupted = None
            if policy.policy == "interrupt":
                lease = await take_over(uow, locked)
                interrupted = locked.turn_token if locked.lease_live else None
            elif policy.policy == "enqueue":
                queued = await wait_or_start(uow, space_id, session_id, locked, policy, ttl_s)
                if queued is not None:
                    return TurnStart(queued=queued)
                lease = await take(uow)
            else:
                if locked.lease_live:
                    raise _running(session_id)
                if locked.queued and not locked.lease_live and not policy.continuation:
                    raise Aborted(
                        f"turns are queued for session {session_id}; retry after them, or "
                        "set busy to enqueue (wait in line)",
                        reason=TURN_IN_PROGRESS,
                    )
                lease = await take(uow)
            state = await read_turn(uow, space_id, session_id, locked, budget, self._max_page_bytes)
            return TurnStart(lease=lease, state=state, interrupted=interrupted)

        async def take(uow: UnitOfWork) -> TurnLease:
            token = uuid.uuid4()
            found, expires_at = await uow.turns.begin(space_id, session_id, token, ttl_s)
            return _lease(session_id, token, found, expires_at)

        async def take_over(uow: UnitOfWork, locked: LockedTurn) -> TurnLease:
            assert locked.now is not None
            token = uuid.uuid4()
            expires_at = await uow.turns.take_over(space_id, session_id, token, ttl_s, locked.now)
            return TurnLease(token, expires_at)

        async def leave(uow: UnitOfWork) -> None:
            if policy.waiter is not None:
                await uow.waiters.remove(space_id, session_id, policy.waiter)

        return await self._db.transaction(start)

    async def leave_queue(
        self, space_id: uuid.UUID, session_id: uuid.UUID, waiter: uuid.UUID
    ) -> bool:
        """Take `waiter`'s ticket out of the session's line; whether a live one was there
        (then TURN_RELEASED is written: the next in line looks again)."""

        async def leave(uow: UnitOfWork) -> bool:
            found, left = await uow.waiters.leave(space_id, session_id, waiter)
            if not found:
                raise session_not_found(session_id)
            if left:
                uow.outbox.add(space_id, session_event("turn_released", session_id))
            return left

        return await self._db.transaction(leave)

    async def release_turn(self, space_id: uuid.UUID, session_id: uuid.UUID, token: str) -> bool:
        """End the lease if `token` holds it; whether a live lease was ended (then
        TURN_RELEASED is written: turns queued for the session look again)."""

        async def release(uow: UnitOfWork) -> bool:
            found, released = await uow.turns.release(space_id, session_id, lease_token(token))
            if not found:
                raise session_not_found(session_id)
            if released:
                uow.outbox.add(space_id, session_event("turn_released", session_id))
            return released

        return await self._db.transaction(release)

    async def renew_turn(
        self, space_id: uuid.UUID, session_id: uuid.UUID, token: str, ttl_s: int
    ) -> Renewal:
        """Extend the lease `token` holds to `ttl_s` from now: its new expiry, or None when
        the token no longer holds it (released, or taken by another turn — `interrupted`
        when an INTERRUPT took it)."""
        renewal = await self._db.statement(
            lambda uow: uow.turns.renew(space_id, session_id, lease_token(token), ttl_s)
        )
        if not renewal.found:
            raise session_not_found(session_id)
        return renewal
