"""WatchSpace's delivery (DESIGN §4.6): one poller per space (`poller`), fanned out to its
watchers.

Each watcher keeps only its position: it takes what follows it from its space's
poller's ring, and when it fell behind the ring (a slow reader, or one resuming
an old cursor) it reads the missed events from storage itself, page by page at
its own pace.

Storage hands out positions in commit order, so "every event after my
position" never skips one that commits later; a watcher delivers each event
once, in position order, and its cursor resumes exactly there.

A stream lives at most `max_age_s` (STELLO_GATEWAY_WATCH_MAX_AGE_S): it then ends
UNAVAILABLE, and its client watches again from the last cursor it received
(the SDK does it by itself), losing nothing. A client that forgot a stream
without cancelling it (grpc-python's aio API allows it: the call lives as long
as its connection) no longer keeps its place in the space's cap of watches
(STELLO_MAX_WATCHES_PER_SPACE) for good: an idle stream ends at its age, and
one whose client stopped reading, so that its send waits on the client's flow
control, is cancelled once that send has waited `BLOCKED_SEND_S` past its age
(explore15 F1; `watch_ends.Expiry`).

A gateway that shuts down ends its streams at once, UNAVAILABLE (`close`): they
would never end by themselves, and would hold the shutdown for its whole grace
(STELLO_SHUTDOWN_GRACE_S) where calls with an end get it; their clients resume
from their last cursor on another gateway, or on this one once it is back.

A watcher fed from the ring makes no call of its own, so nothing would notice
its key being revoked while another watcher's key polls: each stream rechecks
its own key (`KeyCheck`, `watch_ends.key_check`) before it delivers events when
its last check is older than `recheck_s` (the auth cache's TTL: the lag DESIGN §7
allows a revocation), and at that interval while idle. A revoked key ends the
stream UNAUTHENTICATED, a key that no longer reaches the space NOT_FOUND, before
any further event.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from uuid import UUID

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.sessions.poller import PAGE, RING_EVENTS, SessionChanges, SpacePoller
from agent_gateway.sessions.watch_ends import BLOCKED_SEND_S, Expiry, KeyCheck
from stello.common.v1 import common_pb2
from stello.db.tasks import Steps
from stello.errors import InvalidArgument, Unavailable
from stello.storage.v1 import storage_pb2

# Told the position a watch starts after, once it is fixed (before any event).
Started = Callable[[int], Awaitable[None]]
IDLE_RECHECK_S = 1.0
"""An idle stream rechecks its key at least this often (or every `recheck_s` when longer)."""
SHUTTING_DOWN = (
    "this gateway is shutting down; watch again (another gateway, or this one once it is "
    "back) with after_cursor = the last cursor received (nothing is lost)"
)


@dataclass(frozen=True, slots=True)
class WatchInput:
    """What a WatchSpace call asks for: the space, where to start, which kinds."""

    space_id: UUID
    after: int | None
    kinds: frozenset[int]


class Watchers:
    """The gateway's pollers by space; streams the events each watcher asks for."""

    def __init__(
        self,
        storage: StorageClient,
        interval_s: float,
        ring_events: int = RING_EVENTS,
        *,
        key_check: KeyCheck | None = None,
        recheck_s: float = 5.0,
        max_age_s: float = 0.0,
        blocked_s: float | None = None,
    ) -> None:
        """Deliver events read from `storage` every `interval_s`; `key_check` (None = none)
        is called with a stream's caller before it delivers events `recheck_s` or more after
        its last check (0 = before every delivery); a stream ends after `max_age_s` (0 =
        never; see the module docstring), cancelled when a send waits `blocked_s` (None =
        `BLOCKED_SEND_S`) past it."""
        self._max_age_s = max_age_s
        self._blocked_s = BLOCKED_SEND_S if blocked_s is None else blocked_s
        self._storage = storage
        self._interval_s = interval_s
        self._ring_events = ring_events
        self._key_check = key_check
        self._recheck_s = recheck_s
        self._pollers: dict[UUID, SpacePoller] = {}
        self._next_id = 0
        self._closing = False

    def start(self) -> None:
        """Nothing to start: pollers start with their first watcher."""

    async def close(self) -> None:
        """End every stream UNAVAILABLE now, and refuse new ones (the gateway is shutting
        down: see the module docstring)."""
        self._closing = True
        for poller in list(self._pollers.values()):
            await poller.close()

    async def stop(self) -> None:
        """End every poller (the server has stopped its streams); one whose task ended with
        an unexpected error raises it after the others were stopped."""
        pollers, self._pollers = list(self._pollers.values()), {}
        steps = Steps()
        for poller in pollers:
            await steps.take("stopping a poller", poller.stop())
        steps.raise_first()

    def wake(self, space_id: str) -> None:
        """Let the space's poller read now (after a write through this gateway)."""
        with contextlib.suppress(ValueError):
            poller = self._pollers.get(UUID(space_id))
            if poller is not None:
                poller.wake()

    @contextlib.asynccontextmanager
    async def session_changes(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> AsyncIterator[SessionChanges]:
        """Hear of the session's events through its space's poller while inside (the caller
        joins the poller as a watcher does, and leaves it after)."""
        self._next_id += 1
        member = self._next_id
        poller = self._poller(space_id)
        poller.join(member, caller)
        try:
            yield SessionChanges(poller, session_id)
        finally:
            await self._leave(space_id, poller, member)

    def _poller(self, space_id: UUID) -> SpacePoller:
        """The space's poller; a new one in place of one that failed (its failure is its
        members' to hear: a turn waiting in line stays in it until its own timer, and a
        watcher coming meanwhile, its key live, was told of the others' revoked keys)."""
        poller = self._pollers.get(space_id)
        if poller is None or poller.failure is not None:
            poller = self._pollers[space_id] = SpacePoller(
                self._storage, space_id, self._interval_s, self._ring_events
            )
        return poller

    async def _leave(self, space_id: UUID, poller: SpacePoller, member: int) -> None:
        if poller.leave(member) and self._pollers.get(space_id) is poller:
            del self._pollers[space_id]
            await poller.stop()

    async def watch(
        self, caller: Caller, ask: WatchInput, started: Started | None = None
    ) -> AsyncIterator[common_pb2.SpaceEvent]:
        """The space's events after `ask.after` (None: from now), live, until cancelled.

        `started` is awaited with the position the watch starts after (for an
        unset cursor: the present), once the first read fixed it, before any event.
        """
        self._check_open()
        caller = replace(caller, deadline=None)  # each read gets the call timeout
        # The first read is the watcher's own: its key, its tenancy, its cursor checked.
        first = await self._read(caller, ask, ask.after)
        position = first.last_position if ask.after is None else ask.after
        if started is not None:
            await started(position)
        self._next_id += 1
        watcher = self._next_id
        poller = self._poller(ask.space_id)
        poller.join(watcher, caller)
        checked = time.monotonic()  # the first read checked the key
        expiry = Expiry(self._max_age_s, self._blocked_s)
        try:
            pending = list(first.events) if ask.after is not None else []
            while True:
                self._check_open()
                expiry.check()
                checked = await self._recheck(caller, ask.space_id, checked, bool(pending))
                for event in pending:
                    position = int(event.cursor)
                    if not ask.kinds or event.kind in ask.kinds:
                        expiry.sending(True)
                        yield event
                        expiry.sending(False)
                pending = await self._next(caller, ask, poller, position)
        finally:
            expiry.stop()
            await self._leave(ask.space_id, poller, watcher)

    def _check_open(self) -> None:
        """Raise Unavailable when the gateway is shutting down."""
        if self._closing:
            raise Unavailable(SHUTTING_DOWN)

    async def _recheck(
        self, caller: Caller, space_id: UUID, checked: float, delivering: bool
    ) -> float:
        """Check the stream's key when due (before a delivery, or idle for long); when checked."""
        if self._key_check is None:
            return checked
        elapsed = time.monotonic() - checked
        due = self._recheck_s if delivering else max(self._recheck_s, IDLE_RECHECK_S)
        if elapsed < due:
            return checked
        await self._key_check(caller, space_id)
        return time.monotonic()

    async def _next(
        self, caller: Caller, ask: WatchInput, poller: SpacePoller, position: int
    ) -> list[common_pb2.SpaceEvent]:
        """The events after `position`: from the ring, else (fallen behind) from storage;
        none when the stream has been idle long enough to recheck its key."""
        while True:
            self._check_open()
            if poller.failure is not None:
                raise poller.failure
            if poller.position is not None and poller.position > position:
                ring = poller.after(position)
                if not ring:  # behind the ring (or a gap, which positions never have)
                    return list((await self._read(caller, ask, position)).events)
                return [event for _, event in ring]
            if self._key_check is None:
                await poller.wait_beyond(position)
                continue
            idle = max(self._recheck_s, IDLE_RECHECK_S)
            try:
                async with asyncio.timeout(idle):
                    await poller.wait_beyond(position)
            except TimeoutError:
                return []

    async def _read(
        self, caller: Caller, ask: WatchInput, after: int | None
    ) -> storage_pb2.ReadEventsResponse:
        try:
            return await self._storage.read_events(caller, ask.space_id, after, PAGE)
        except InvalidArgument as exc:
            raise InvalidArgument.field(
                "after_cursor", "is beyond this space's newest event (a cursor of another space?)"
            ) from exc
