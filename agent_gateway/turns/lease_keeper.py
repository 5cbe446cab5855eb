"""Turn leases that cannot outlive a hiccup (DESIGN §4.2; issue #13, finding 1).

Storage grants a turn's lease for a short TTL (``STELLO_GATEWAY_TURN_LEASE_TTL_S``,
seconds), and the keeper renews it every third of that TTL while the turn runs
(RenewTurn), so a live turn keeps its lease however long its LLM and tool
calls take (up to ``STELLO_GATEWAY_TURN_MAX_S``), while a gateway that dies
frees its sessions within one TTL. A renewal storage cannot answer is tried
again at the next tick; a late one still renews a lease no other turn took
meanwhile.

A turn that can no longer commit stops paying for its model: when a renewal
finds the lease taken by another turn (it lapsed while storage could not be
reached), or the turn runs past its maximum, the keeper marks the lease lost,
and the model call in flight, awaited through `KeptLease.guard`, is cut short
(its task cancelled, the way `asyncio.timeout` does it) and answers the lease's
error: ABORTED CONCURRENT_MODIFICATION, or DEADLINE_EXCEEDED past the maximum.
Only model calls are cut: a commit is never interrupted (one already sent may
have been stored), and the turn checks the lease before it commits.

An INTERRUPT turn (DESIGN §4.2) takes the lease over in storage, which records
the token it stopped: a turn kept on this gateway is told at once
(`interrupt`, by the token BeginTurn answered), one on another gateway by its
next renewal (storage answers `interrupted`), and either way it is lost with
ABORTED TURN_INTERRUPTED. A commit that fails its lease check asks once more
(`explain`), so a turn interrupted just before its commit says so too.

A turn that ends without its commit gives the lease back (ReleaseTurn). The
turn waits for the first attempt only, so a failed call answers with its
session free in the usual case; while storage stays unreachable the release
is retried with backoff, off the client's path, as a job of the gateway's
background runner (`agent_gateway.background`, kind ``release``: not claimed,
the lease being its own claim, and not held back by the model jobs' cap; the
runner counts it and stops it on shutdown), and given up once the lease has
ended by itself (one TTL after the last expiry storage confirmed): releasing
it then is moot.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from agent_gateway.background.jobs import DONE, JobKind, Outcome, Run
from agent_gateway.background.runner import BackgroundRunner
from agent_gateway.clients import Caller, StorageClient
from stello.errors import Aborted, DeadlineExceeded, NotFound, StelloError, Unavailable
from stello.reasons import CONCURRENT_MODIFICATION, SESSION_NOT_FOUND, TURN_INTERRUPTED
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

T = TypeVar("T")
RELEASE = JobKind("release", capped=False)


@dataclass(frozen=True, slots=True)
class LeaseTimes:
    """The lease's timing: its TTL, how long a turn keeps renewing, the release backoff."""

    ttl_s: int
    max_turn_s: float
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0

    @property
    def renew_every_s(self) -> float:
        """A third of the TTL: two renewals may fail before the lease lapses."""
        return self.ttl_s / 3


@dataclass(slots=True)
class KeptLease:
    """A lease the keeper renews until `stop`."""

    token: str
    expires_by: float
    """Monotonic time by which the lease has surely ended unless renewed again."""
    renewal: asyncio.Task[None] | None = field(default=None, repr=False)
    lost: StelloError | None = None
    """Why the turn may no longer commit (set once, by the renewal); None while held."""
    committing: bool = False
    """Set once the turn's commit is sent: the commit releases the lease, so a renewal
    answered "not renewed" then is the commit's doing, not another turn's (the commit's own
    lease check says whether another turn took it)."""
    _guarded: asyncio.Task[Any] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop renewing (a renewal in flight is abandoned: it cannot revive a released lease)."""
        if self.renewal is not None:
            self.renewal.cancel()

    def lose(self, error: StelloError) -> None:
        """Mark the lease lost: a guarded call in progress is cut short with `error`."""
        if self.lost is not None:
            return
        self.lost = error
        if self._guarded is not None:
            self._guarded.cancel()

    def check(self) -> None:
        """Raise the lease's error once it is lost."""
        if self.lost is not None:
            raise self.lost

    async def guard(self, work: Awaitable[T]) -> T:
        """Await `work` (a model call) in this task while the lease holds; once it is lost,
        `work` is cancelled and the lease's error raised instead."""
        self.check()
        task = asyncio.current_task()
        assert task is not None
        self._guarded = task
        try:
            result = await work
        except asyncio.CancelledError:
            if self.lost is not None and task.uncancel() == 0:
                raise self.lost from None
            raise
        finally:
            self._guarded = None
        if self.lost is not None and task.cancelling():
            task.uncancel()  # `work` swallowed the cut: the turn still ends here
            raise self.lost
        return result

    async def guarded(self, events: AsyncIterator[T]) -> AsyncIterator[T]:
        """`events` (a model's stream), each step guarded; what it yields is not."""
        while True:
            try:
                event = await self.guard(anext(events))
            except StopAsyncIteration:
                return
            yield event


@dataclass(frozen=True, slots=True)
class LeaseRelease:
    """A turn lease given back, retried while storage cannot be reached (a runner job)."""

    keeper: LeaseKeeper
    space_id: uuid.UUID
    session_id: uuid.UUID
    caller: Caller
    token: str
    expires_by: float
    first: asyncio.Future[None]
    kind: JobKind = RELEASE

    @property
    def key(self) -> Hashable:
        """One release per lease."""
        return (self.space_id, self.session_id, self.token)

    @property
    def wait_until(self) -> float | None:
        """Not claimed: never waits."""
        return None

    async def run(self, run: Run) -> Outcome:
        """Release the lease (retried until it has ended by itself)."""
        await self.keeper.release(self)
        return run.outcome(DONE)


DURING_THE_TURN = "during the turn"
"""When a session deleted while its turn ran was deleted (`session_deleted`)."""


def turn_interrupted(session_id: uuid.UUID) -> Aborted:
    """The error of a turn an INTERRUPT (or ROLLBACK) turn took the session from."""
    return Aborted(
        f"another turn took session {session_id} over (busy policy interrupt or rollback); "
        "nothing of this turn was stored",
        reason=TURN_INTERRUPTED,
    )


def session_deleted(session_id: uuid.UUID, exc: NotFound, when: str) -> NotFound:
    """The NOT_FOUND of a turn whose session was deleted `when` ("during the turn", while it
    waited in line: the session was there before, so "not found" alone reads as a wrong id);
    another NOT_FOUND (the space's) as it is."""
    if exc.reason != SESSION_NOT_FOUND:
        return exc
    return NotFound(
        f"session {session_id} was deleted {when}; nothing of the turn was written",
        reason=SESSION_NOT_FOUND,
        metadata=exc.metadata,
    )


class LeaseKeeper:
    """Takes, renews and gives back turn leases through storage."""

    def __init__(self, storage: StorageClient, times: LeaseTimes, runner: BackgroundRunner) -> None:
        self._storage = storage
        self._times = times
        self._runner = runner
        self._kept: dict[str, tuple[uuid.UUID, KeptLease]] = {}
        """The leases kept on this gateway, by token (an INTERRUPT here stops them at once)."""

    @property
    def times(self) -> LeaseTimes:
        """The leases' timing."""
        return self._times

    def interrupt(self, token: str) -> None:
        """Stop the turn holding `token` when it runs on this gateway (an INTERRUPT took
        its lease over); a turn elsewhere learns it from its next renewal."""
        kept = self._kept.get(token)
        if kept is not None:
            session_id, lease = kept
            lease.lose(turn_interrupted(session_id))

    async def explain(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, lease: KeptLease
    ) -> None:
        """After a commit failed its lease check: raise TURN_INTERRUPTED when an INTERRUPT
        took the lease (known here, or by asking storage once); else return."""
        lease.check()
        try:
            renewal = await self._storage.renew_turn(
                _unbounded(caller).within(self._times.renew_every_s),
                space_id,
                session_id,
                lease.token,
                self._times.ttl_s,
            )
        except StelloError:
            return
        if renewal.interrupted:
            raise turn_interrupted(session_id)

    async def begin(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> str:
        """Take the session's lease for one TTL; its token (ABORTED TURN_IN_PROGRESS while
        another lease lives)."""
        return await self._storage.begin_turn(caller, space_id, session_id, self._times.ttl_s)

    async def start_turn(
        self, caller: Caller, request: storage_pb2.BeginTurnRequest
    ) -> storage_pb2.BeginTurnResponse:
        """BeginTurn with a window (DESIGN §4.3), the lease for one TTL: the remembered reply,
        or the lease's token (empty for an archived session) and the turn."""
        request.ttl_s = self._times.ttl_s
        return await self._storage.start_turn(caller, request)

    def keep(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, token: str
    ) -> KeptLease:
        """Renew the lease `token` (just taken) until the returned lease is stopped."""
        lease = KeptLease(token, time.monotonic() + self._times.ttl_s)
        self._kept[token] = (session_id, lease)
        lease.renewal = asyncio.create_task(
            self._renew(_unbounded(caller), space_id, session_id, lease),
            name=f"stello-lease-{session_id}",
        )
        lease.renewal.add_done_callback(lambda _: self._kept.pop(token, None))
        return lease

    def give_back(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        token: str,
        expires_by: float | None = None,
    ) -> asyncio.Future[None]:
        """Release the lease in a task of its own (a cancelled turn still gives it back).

        Answers a future done after the first attempt; later attempts, while storage
        is unreachable, go on without it until `expires_by` (default: one TTL from now).
        """
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ends = expires_by if expires_by is not None else time.monotonic() + self._times.ttl_s
        job = LeaseRelease(self, space_id, session_id, _unbounded(caller), token, ends, first)
        task = self._runner.submit(job)
        if task is None:  # stopping: the lease ends with its TTL
            _settle(first)
        else:
            task.add_done_callback(lambda _: _settle(first))
        return first

    def _end_overrun(self, session_id: uuid.UUID, lease: KeptLease) -> None:
        """End a turn that reached STELLO_GATEWAY_TURN_MAX_S: its model call is cut short."""
        log.warning(
            "turn on %s ran past %s s (STELLO_GATEWAY_TURN_MAX_S): it is ended",
            session_id,
            self._times.max_turn_s,
        )
        lease.lose(
            DeadlineExceeded(
                f"the turn ran past {self._times.max_turn_s:g} s "
                "(STELLO_GATEWAY_TURN_MAX_S); nothing of it was stored"
            )
        )

    async def _renew(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, lease: KeptLease
    ) -> None:
        every = self._times.renew_every_s
        stop_at = time.monotonic() + self._times.max_turn_s
        tick = time.monotonic()
        while True:
            tick += every
            # Wake at the next renewal or at the turn's maximum, whichever comes first.
            await asyncio.sleep(max(0.0, min(tick, stop_at) - time.monotonic()))
            if time.monotonic() >= stop_at:
                self._end_overrun(session_id, lease)
                return
            try:
                renewal = await self._storage.renew_turn(
                    caller.within(every), space_id, session_id, lease.token, self._times.ttl_s
                )
            except NotFound as exc:
                # The user deleted the session (or its space) during the turn: an outcome,
                # not a fault. Nothing of the turn can be stored: it ends now, its model
                # call cut short.
                log.info(
                    "no turn lease of %s to renew: %s (deleted during the turn)", session_id, exc
                )
                lease.lose(session_deleted(session_id, exc, DURING_THE_TURN))
                return
            except StelloError as exc:
                # Tried again at the next tick: a late renewal still keeps a lease
                # no other turn took meanwhile.
                log.warning("could not renew the turn lease of %s: %s", session_id, exc)
                continue
            if renewal.interrupted:
                log.info("the turn on %s was interrupted by another turn", session_id)
                lease.lose(turn_interrupted(session_id))
                return
            if not renewal.renewed and lease.committing:
                log.debug("the turn lease of %s ended with its turn's commit", session_id)
                return
            if not renewal.renewed:
                log.warning("the turn lease of %s was taken by another turn", session_id)
                lease.lose(
                    Aborted(
                        f"the turn lease of session {session_id} lapsed while it could not be "
                        "renewed and another turn took it; nothing of this turn was stored",
                        reason=CONCURRENT_MODIFICATION,
                    )
                )
                return
            lease.expires_by = time.monotonic() + self._times.ttl_s

    async def release(self, job: LeaseRelease) -> None:
        """Give the lease back, retrying while storage cannot be reached (see the module
        docstring); `job.first` is settled after the first attempt."""
        caller, space_id, session_id, token = job.caller, job.space_id, job.session_id, job.token
        expires_by, first = job.expires_by, job.first
        delay = self._times.backoff_s
        try:
            while True:
                try:
                    await self._storage.release_turn(
                        caller.within(self._times.renew_every_s), space_id, session_id, token
                    )
                    return
                except (Unavailable, DeadlineExceeded) as exc:
                    retry_at = time.monotonic() + delay
                    if retry_at >= expires_by:
                        log.warning(
                            "could not release the turn lease of %s (%s); it ends by itself "
                            "within %.1f s",
                            session_id,
                            exc,
                            max(0.0, expires_by - time.monotonic()),
                        )
                        return
                except NotFound as exc:
                    # The user deleted the session (or its space) during the turn: the
                    # lease went with it, an expected outcome rather than a fault.
                    log.info(
                        "no turn lease of %s to release: %s (it was deleted during the turn)",
                        session_id,
                        exc,
                    )
                    return
                except StelloError as exc:
                    # Not a hiccup (the key revoked, a bug): the lease, if any, ends with
                    # its TTL.
                    log.warning("could not release the turn lease of %s: %s", session_id, exc)
                    return
                _settle(first)
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self._times.max_backoff_s)
        finally:
            _settle(first)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _unbounded(caller: Caller) -> Caller:
    """The caller without their deadline (each call gets a bound of its own)."""
    return replace(caller, deadline=None)
