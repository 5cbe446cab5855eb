"""How a turn gets its session when another turn holds it (DESIGN §4.2): the busy policies.

Every policy is decided by storage's BeginTurn, under the session's row lock, so
it holds across gateways:

- REJECT (the default): ABORTED TURN_IN_PROGRESS while a turn runs or turns
  wait in line.
- INTERRUPT / ROLLBACK: storage takes the lease over and answers the token it
  stopped; a turn holding it on this gateway is stopped at once
  (`LeaseKeeper.interrupt`), one elsewhere at its next renewal.
- ENQUEUE: the call holds a ticket in the session's line (a random `waiter` id
  per call) and asks BeginTurn again — which renews the ticket — once the
  space's poller has read as many events about the session (a turn committed
  or released, a ticket left) as there are calls ahead of it (each of them
  must end a turn first: so a handover wakes about one waiter, not the whole
  line), and at least every third of the lease TTL, until it gets the lease.
  It waits within the caller's deadline (with none, at most
  STELLO_GATEWAY_TURN_MAX_S, which the error names): past it DEADLINE_EXCEEDED (sent
  ANSWER_MARGIN_S before the caller's deadline, so that gRPC's bare one does not come
  first). A call that ends while it waits (cancelled, past its deadline, failed)
  takes its ticket out of line before it answers (LeaveTurnQueue, shielded; before it
  leaves the space's poller, whose stop may wait for a read to end) — also one that
  ends while its first BeginTurn is under way, once that BeginTurn's answer says it is
  queued; if storage cannot be reached the ticket expires within one TTL. A call that
  got the lease and ends while it leaves the poller gives the lease back.
  While it waits the call holds no place in its space's STELLO_MAX_CALLS_PER_SPACE
  (`waiting_aside`): waiters would otherwise keep out the very call they wait for
  (the SubmitToolResults of a pending group, the running turn's retry).

A queued call's retry with the same request_id takes a new ticket: BeginTurn
answers the remembered turn first, so whichever call reaches the front after
the first committed answers that turn and nothing runs twice.

BeginTurn itself is never bound by the caller's deadline and never cancelled
midway: a reply lost to either would leave a lease nobody knows the token of.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Protocol

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.turns.lease_keeper import LeaseKeeper, session_deleted
from agent_gateway.turns.state import Plan
from stello.common.v1 import common_pb2
from stello.db.tasks import settled
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    NotFound,
    ResourceExhausted,
    StelloError,
    session_archived,
)
from stello.reasons import TURN_QUEUE_FULL
from stello.serving.space_calls import waiting_aside
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

ENQUEUE = common_pb2.BUSY_POLICY_ENQUEUE
IN_LINE = "while the turn waited in line (busy policy enqueue)"
"""When a session deleted while its turn waited was deleted (`session_deleted`)."""
ANSWER_MARGIN_S = 0.5
"""How long before the caller's deadline a waiting call gives up (and leaves the line): its
own DEADLINE_EXCEEDED, which says what happened, is then sent before gRPC ends the call
at the deadline with its bare "Deadline Exceeded". 0.2 s was too little for a `stello send`
whose gateway shared two busy cores with its storage and the running turn (the CLI's
EARLY_S counts this margin)."""


class Changes(Protocol):
    """Tells a waiting turn that its session changed (the space's event poller)."""

    async def ready(self, timeout_s: float) -> None:
        """Return once changes from now on will be told (or after `timeout_s`)."""
        ...

    async def wait(self, timeout_s: float, events: int = 1) -> None:
        """Return once `events` changes of the session were told, or after `timeout_s`."""
        ...


ChangesOf = Callable[[Caller, uuid.UUID, uuid.UUID], AbstractAsyncContextManager[Changes]]
"""Opens `Changes` for (caller, space, session) while inside."""


class TurnLine:
    """BeginTurn under the plan's busy policy (see the module docstring)."""

    def __init__(
        self,
        storage: StorageClient,
        leases: LeaseKeeper,
        changes: ChangesOf,
        *,
        max_waiters: int,
        max_wait_s: float,
    ) -> None:
        self._storage = storage
        self._leases = leases
        self._changes = changes
        self._max_waiters = max_waiters
        self._max_wait_s = max_wait_s

    async def begin(
        self, caller: Caller, plan: Plan, request: storage_pb2.BeginTurnRequest
    ) -> storage_pb2.BeginTurnResponse:
        """The lease and the turn (or a remembered reply, or an archived session's state),
        once the policy lets this call have the session."""
        if plan.busy != ENQUEUE:
            reply = await self._begin(caller, plan, request)
            if reply.interrupted_token:
                self._leases.interrupt(reply.interrupted_token)
            return reply
        request.waiter = str(uuid.uuid4())
        request.max_waiters = self._max_waiters
        try:
            reply = await self._begin(caller, plan, request)
        except ResourceExhausted as exc:
            if exc.reason != TURN_QUEUE_FULL:
                raise
            raise self._full(plan, exc) from None
        if not reply.HasField("queued"):
            return reply
        with waiting_aside():  # it only waits: the space's other calls may have its place
            return await self._wait(caller, plan, request, time.monotonic())

    async def _wait(
        self,
        caller: Caller,
        plan: Plan,
        request: storage_pb2.BeginTurnRequest,
        since: float,
    ) -> storage_pb2.BeginTurnResponse:
        """Ask again at every change of the session (and every third of the TTL) until the
        lease is this call's; the ticket leaves the line if the call ends otherwise."""
        every = self._leases.times.renew_every_s
        left_line = False
        granted: storage_pb2.BeginTurnResponse | None = None
        try:
            async with self._changes(caller, plan.space_id, plan.session_id) as changes:
                try:
                    await changes.ready(every)
                    while True:
                        try:
                            reply = await self._begin(caller, plan, request)
                        except NotFound as exc:
                            raise session_deleted(plan.session_id, exc, IN_LINE) from None
                        if not reply.HasField("queued"):
                            left_line = True  # storage took the ticket out with its answer
                            if not reply.token and not reply.HasField("remembered"):
                                raise _archived(plan)
                            granted = reply
                            break
                        # Each call ahead must end its turn (an event) before this one
                        # starts: waking sooner would only ask storage in vain.
                        ahead = reply.queued.ahead
                        await changes.wait(min(every, self._left(caller, plan, since)), ahead)
                        self._left(caller, plan, since)
                finally:
                    # Out of line first: leaving the poller may wait for its read to end.
                    if not left_line:
                        left_line = True
                        await self._settled_leave(caller, plan, request.waiter)
        except BaseException:
            # Ended while leaving the poller (whose stop may wait for a read): a lease it
            # got is given back, or it stays held until its TTL with nobody to release it.
            if granted is not None:
                await self._give_back(caller, plan, granted)
            raise
        finally:
            if not left_line:  # the changes could not be opened
                await self._settled_leave(caller, plan, request.waiter)
        assert granted is not None  # the loop ends with a grant or an error
        return granted

    async def _give_back(
        self, caller: Caller, plan: Plan, reply: storage_pb2.BeginTurnResponse
    ) -> None:
        """Give back the lease `reply` holds, if any (to its end, even if cancelled again)."""
        if reply.token:
            given = self._leases.give_back(caller, plan.space_id, plan.session_id, reply.token)
            await settled(given)

    async def _settled_leave(self, caller: Caller, plan: Plan, waiter: str) -> None:
        """`_leave`, to its end even if the call is cancelled meanwhile."""
        await settled(self._leave(caller, plan, waiter))

    def _full(self, plan: Plan, exc: ResourceExhausted) -> ResourceExhausted:
        """Storage's TURN_QUEUE_FULL in the gateway's words: storage knows how many wait
        (metadata `waiting`), the gateway which of its settings set the cap."""
        count = exc.metadata.get("waiting") or str(self._max_waiters)
        waiting = "1 turn already waits" if count == "1" else f"{count} turns already wait"
        return ResourceExhausted(
            f"{waiting} in line for session {plan.session_id} (busy policy enqueue), the most "
            f"this gateway lets wait (STELLO_GATEWAY_TURN_QUEUE_MAX={self._max_waiters}); "
            "nothing was written: retry later, or set busy to interrupt (stop the "
            "running turn and run this one)",
            reason=TURN_QUEUE_FULL,
            metadata=exc.metadata,
        )

    def _left(self, caller: Caller, plan: Plan, since: float) -> float:
        """Seconds the call may still wait.

        Raises:
            DeadlineExceeded: none are left.
        """
        remaining = caller.remaining()
        until, then = "until its deadline", "retry, with a later deadline to wait longer"
        if remaining is not None:
            remaining -= ANSWER_MARGIN_S
        else:
            remaining = self._max_wait_s - (time.monotonic() - since)
            until = (
                f"{self._max_wait_s:g} s, the most a call with no deadline waits "
                "(STELLO_GATEWAY_TURN_MAX_S)"
            )
            then = "retry, or give the call a deadline to wait longer"
        if remaining <= 0:
            raise DeadlineExceeded(
                f"the turn waited in line for session {plan.session_id} {until} (busy policy "
                f"enqueue); it left the line and nothing was written: {then}"
            )
        return remaining

    async def _leave(self, caller: Caller, plan: Plan, waiter: str) -> None:
        """Take the call's ticket out of line (its end is told to the next waiter)."""
        try:
            await self._storage.leave_turn_queue(
                _unbounded(caller).within(self._leases.times.renew_every_s),
                plan.space_id,
                plan.session_id,
                waiter,
            )
        except NotFound as exc:
            log.info("no line of %s to leave: %s (deleted meanwhile)", plan.session_id, exc)
        except StelloError as exc:
            log.warning(
                "could not take a waiting turn of %s out of line (%s); its ticket expires "
                "by itself",
                plan.session_id,
                exc,
            )

    async def _begin(
        self, caller: Caller, plan: Plan, request: storage_pb2.BeginTurnRequest
    ) -> storage_pb2.BeginTurnResponse:
        """One BeginTurn, unbounded and shielded; a lease it took for a call cancelled
        meanwhile is given back."""
        begin = asyncio.ensure_future(self._leases.start_turn(_unbounded(caller), request))
        try:
            return await asyncio.shield(begin)
        except BaseException:
            await self._abandon(begin, caller, plan, request.waiter)
            raise

    async def _abandon(
        self,
        begin: asyncio.Future[storage_pb2.BeginTurnResponse],
        caller: Caller,
        plan: Plan,
        waiter: str,
    ) -> None:
        """Undo what BeginTurn did for a call that ended meanwhile, once its answer is in (even
        if cancelled again): give back the lease it took, or take its ticket out of line."""
        undone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def undo(task: asyncio.Future[storage_pb2.BeginTurnResponse]) -> None:
            reply = None if task.cancelled() or task.exception() is not None else task.result()
            if reply is not None and reply.token:
                undoing = self._leases.give_back(
                    caller, plan.space_id, plan.session_id, reply.token
                )
            elif reply is not None and reply.HasField("queued") and waiter:
                undoing = asyncio.ensure_future(self._leave(caller, plan, waiter))
            else:
                undone.set_result(None)  # it took nothing
                return
            undoing.add_done_callback(lambda _: undone.set_result(None))

        begin.add_done_callback(undo)
        await settled(undone)


def _archived(plan: Plan) -> FailedPrecondition:
    """The SESSION_ARCHIVED of a session archived while the turn waited in line (storage
    answered its state and no lease)."""
    return session_archived(
        plan.session_id,
        "was archived while the turn waited in line (busy policy enqueue); nothing of the "
        "turn was written: unarchive it to go on",
    )


def _unbounded(caller: Caller) -> Caller:
    """The caller without their deadline (each call keeps the policy's own timeout)."""
    return replace(caller, deadline=None)
