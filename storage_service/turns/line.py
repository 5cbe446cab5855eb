"""Who may start a turn on a busy session (DESIGN §4.2): the line of ENQUEUE turns.

Decided in BeginTurn's transaction, under the session's row lock, so the line
is one across every gateway. A waiting call holds a ticket it renews by asking
BeginTurn again (every third of the TTL, or when the space's events say its
session changed); a ticket not renewed expires, and expired tickets are
dropped whenever the line is read, so a dead gateway's callers stop holding
their places within one TTL.

The first in line — continuations (SubmitToolResults) first, then by ticket —
starts when no live lease exists and, for a Send, the session waits for no
client tool results: a Send that ran then would drop the group the client is
answering, so the line waits for SubmitToolResults, which goes ahead of the
queued Sends. Everyone else keeps (or takes, at the back) a ticket; a new one
past the cap is refused.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from stello.errors import ResourceExhausted
from stello.reasons import TURN_QUEUE_FULL
from storage_service.models import TurnBusy, TurnQueued
from storage_service.turns.repository import LockedTurn
from storage_service.turns.waiters import Ticket
from storage_service.unit import UnitOfWork


async def wait_or_start(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    locked: LockedTurn,
    busy: TurnBusy,
    ttl_s: int,
) -> TurnQueued | None:
    """None when `busy.waiter` may take the lease now (its ticket removed); else its place
    (its ticket made or renewed for `ttl_s`).

    Raises:
        ResourceExhausted: reason TURN_QUEUE_FULL, metadata `waiting` (the live tickets);
            a new ticket would pass the cap.
    """
    assert busy.waiter is not None and locked.now is not None
    now = locked.now
    tickets = await uow.waiters.line(space_id, session_id)
    if any(t.expires_at <= now for t in tickets):
        await uow.waiters.drop_expired(space_id, session_id, now)
    line = sorted((t for t in tickets if t.expires_at > now), key=lambda t: t.order)
    mine = next((i for i, t in enumerate(line) if t.waiter == busy.waiter), None)
    # A new caller's place: behind every Send if it is one, else behind the continuations.
    ahead = (
        mine
        if mine is not None
        else sum(1 for t in line if t.continuation or not busy.continuation)
    )
    if ahead == 0 and not locked.lease_live and await _ready(uow, space_id, session_id, busy):
        if mine is not None:
            await uow.waiters.remove(space_id, session_id, busy.waiter)
        return None
    expires_at = now + timedelta(seconds=ttl_s)
    if mine is not None:
        await uow.waiters.renew(space_id, session_id, busy.waiter, expires_at)
        return TurnQueued(ahead, expires_at)
    if len(line) >= busy.max_waiters:
        waiting = "1 turn already waits" if len(line) == 1 else f"{len(line)} turns already wait"
        raise ResourceExhausted(
            f"{waiting} for session {session_id}, the most allowed "
            f"({busy.max_waiters}); nothing was written: retry later",
            reason=TURN_QUEUE_FULL,
            metadata={"session_id": str(session_id), "waiting": str(len(line))},
        )
    number = max((t.ticket for t in tickets), default=0) + 1
    await uow.waiters.add(
        space_id, session_id, Ticket(number, busy.waiter, busy.continuation, expires_at)
    )
    return TurnQueued(ahead, expires_at)


async def _ready(
    uow: UnitOfWork, space_id: uuid.UUID, session_id: uuid.UUID, busy: TurnBusy
) -> bool:
    """Whether the turn may run on a free session: a continuation always; a Send only when
    no client tool results are awaited."""
    if busy.continuation:
        return True
    return not await uow.turns.open_tool_calls(space_id, session_id)
