"""WatchSpace's delivery (DESIGN §4.6): one poller per space, fanned out to its watchers.

A `SpacePoller` reads the space's new events from storage (`ReadEvents`) every
`interval_s`, or at once when `wake` is called after a local write, and keeps
the newest ones in a bounded ring. Each watcher keeps only its position: it
takes what follows it from the ring, and when it fell behind the ring (a slow
reader, or one resuming an old cursor) it reads the missed events from storage
itself, page by page at its own pace. Memory stays bounded by the ring, and
writers never wait for readers (nothing here touches a write path).

Storage hands out positions in commit order, so "every event after my
position" never skips one that commits later; a watcher delivers each event
once, in position order, and its cursor resumes exactly there.

A turn waiting in its session's line (ENQUEUE, DESIGN §4.2) joins the same
poller (`session_changes`): an event about its session wakes it to ask storage
again, so a turn that ends on any gateway starts the next one here without a
poll of its own.

A stream lives at most `max_age_s` (STELLO_GATEWAY_WATCH_MAX_AGE_S): it then ends
UNAVAILABLE, and its client watches again from the last cursor it received
(the SDK does it by itself), losing nothing. A client that forgot a stream
without cancelling it (grpc-python's aio API allows it: the call lives as long
as its connection) no longer keeps its place in the space's cap of watches
(STELLO_MAX_WATCHES_PER_SPACE) for good: an idle stream ends at its age, and
one whose client stopped reading, so that its send waits on the client's flow
control, is cancelled once that send has waited `BLOCKED_SEND_S` past its age
(explore15 F1).

A gateway that shuts down ends its streams at once, UNAVAILABLE (`close`): they
would never end by themselves, and would hold the shutdown for its whole grace
(STELLO_SHUTDOWN_GRACE_S) where calls with an end get it; their clients resume
from their last cursor on another gateway, or on this one once it is back.

A watcher fed from the ring makes no call of its own, so nothing would notice
its key being revoked while another watcher's key polls: each stream rechecks
its own key (`KeyCheck`) before it delivers events when its last check is older
than `recheck_s` (the auth cache's TTL: the lag DESIGN §7 allows a revocation),
and at that interval while idle. A revoked key ends the stream UNAUTHENTICATED,
a key that no longer reaches the space NOT_FOUND, before any further event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from uuid import UUID

from agent_gateway.clients import Caller, StorageClient
from stello import reasons
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import InvalidArgument, NotFound, StelloError, Unauthenticated, Unavailable
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

PAGE = 500
RING_EVENTS = 1024

# Told the position a watch starts after, once it is fixed (before any event).
Started = Callable[[int], Awaitable[None]]
# Raises when the caller's key no longer reaches the space (Unauthenticated: revoked or
# unknown; NotFound: the space is out of its reach); returns when it still does.
KeyCheck = Callable[[Caller, UUID], Awaitable[None]]
IDLE_RECHECK_S = 1.0
"""An idle stream rechecks its key at least this often (or every `recheck_s` when longer)."""
BLOCKED_SEND_S = 30.0
"""A stream past its age whose send has waited this long on its client is cancelled."""
SHUTTING_DOWN = (
    "this gateway is shutting down; watch again (another gateway, or this one once it is "
    "back) with after_cursor = the last cursor received (nothing is lost)"
)
AGED = (
    "this watch has been open for STELLO_GATEWAY_WATCH_MAX_AGE_S ({max_age:g} s); watch again "
    "with after_cursor = the last cursor received (nothing is lost)"
)


class Expiry:
    """Whether a stream has lived its age (`check`), and the cancel of the task that serves
    it once it is past its age and a send has waited `blocked_s` on the client."""

    def __init__(self, max_age_s: float, blocked_s: float) -> None:
        self._max_age_s = max_age_s
        self._blocked_s = blocked_s
        self._ends = time.monotonic() + max_age_s
        self._sending_since: float | None = None
        self._task = asyncio.current_task()
        self._timer: asyncio.TimerHandle | None = None
        if max_age_s > 0:
            self._timer = asyncio.get_running_loop().call_later(max_age_s + blocked_s, self._due)

    def check(self) -> None:
        """Raise Unavailable when the stream has lived its age."""
        if self._max_age_s > 0 and time.monotonic() >= self._ends:
            raise Unavailable(AGED.format(max_age=self._max_age_s))

    def sending(self, now: bool) -> None:
        """Mark the start (`now` True) or the end of a send."""
        self._sending_since = time.monotonic() if now else None

    def stop(self) -> None:
        """No more cancel."""
        if self._timer is not None:
            self._timer.cancel()

    def _due(self) -> None:
        since = self._sending_since
        loop = asyncio.get_running_loop()
        if since is None:  # not in a send: it ends at its next check, unless a send sticks first
            self._timer = loop.call_later(self._blocked_s, self._due)
            return
        waited = time.monotonic() - since
        if waited < self._blocked_s:
            self._timer = loop.call_later(self._blocked_s - waited, self._due)
            return
        log.info("ending a watch whose client has not read for %.0f s past its age", waited)
        if self._task is not None:
            self._task.cancel()


def key_check(keys: KeyStore) -> KeyCheck:
    """A `KeyCheck` against the gateway's key store (cached as every call's check is)."""

    async def check(caller: Caller, space_id: UUID) -> None:
        principal = await keys.resolve(caller.key)
        if principal is None:
            raise Unauthenticated(
                "the API key of this stream was revoked; watch again with a live key "
                "(after_cursor = the last cursor received loses nothing)"
            )
        await keys.check_space(principal, space_id)

    return check


@dataclass(frozen=True, slots=True)
class WatchInput:
    """What a WatchSpace call asks for: the space, where to start, which kinds."""

    space_id: UUID
    after: int | None
    kinds: frozenset[int]


class SpacePoller:
    """Reads one space's new events for all its watchers on this gateway."""

    def __init__(
        self, storage: StorageClient, space_id: UUID, interval_s: float, ring_events: int
    ) -> None:
        self._storage = storage
        self._space_id = space_id
        self._interval_s = interval_s
        self._ring: deque[tuple[int, common_pb2.SpaceEvent]] = deque(maxlen=ring_events)
        self._callers: dict[int, Caller] = {}
        self._changed = asyncio.Condition()
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.position: int | None = None  # the newest position read (None: not started)
        self.floor = 0  # every event after floor, up to position, is in the ring
        self.failure: StelloError | None = None
        self.closing = False  # the gateway is shutting down: its watchers end

    def join(self, watcher: int, caller: Caller) -> None:
        """Add a watcher; its key may serve the poller's reads (all reach the space)."""
        self._callers[watcher] = replace(caller, deadline=None)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"stello-watch-{self._space_id}")

    def leave(self, watcher: int) -> bool:
        """Remove a watcher; whether none is left."""
        self._callers.pop(watcher, None)
        return not self._callers

    def wake(self) -> None:
        """Poll now instead of at the next interval (after a local write)."""
        self._woken.set()

    async def stop(self) -> None:
        """End the polling task."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def after(self, position: int) -> list[tuple[int, common_pb2.SpaceEvent]] | None:
        """The ring's events after `position`, or None when the ring no longer reaches it."""
        if position < self.floor:
            return None
        return [item for item in self._ring if item[0] > position]

    async def close(self) -> None:
        """Wake the watchers, which end (the gateway is shutting down); the polling goes on
        for the turns that wait on it (`SessionChanges`)."""
        self.closing = True
        async with self._changed:
            self._changed.notify_all()

    async def wait_until(self, changed: Callable[[], bool]) -> None:
        """Return once `changed()` is true, asked after each poll."""
        async with self._changed:
            await self._changed.wait_for(changed)

    async def wait_beyond(self, position: int) -> None:
        """Return once the poller has read past `position` (or failed, or is closing)."""
        async with self._changed:
            await self._changed.wait_for(
                lambda: (
                    self.failure is not None
                    or self.closing
                    or (self.position is not None and self.position > position)
                )
            )

    async def _fail(self, error: StelloError) -> None:
        self.failure = error
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        while True:
            if not self._callers:
                await self._fail(Unauthenticated("no key of a watcher of this space is valid"))
                return
            try:
                full = await self._poll()
            except Unauthenticated:
                continue  # that watcher's key was dropped; poll with another one
            except StelloError as exc:
                if isinstance(exc, InvalidArgument):
                    await self._fail(self._gone(exc))  # cannot recover: end the watchers
                    return
                log.warning("polling the events of space %s failed: %s", self._space_id, exc)
                full = False
            if full:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self._interval_s)
            self._woken.clear()

    def _gone(self, error: InvalidArgument) -> StelloError:
        """What ends the watchers when storage refused the poller's read: a position the
        poller read itself is beyond the newest only once the space and its events were
        deleted (`stello spaces delete`), which is NOT_FOUND; storage's own field
        (after_position) is no field of WatchSpace."""
        if self.position is None:
            return error
        return NotFound(
            f"space {self._space_id} not found: it was deleted while watched",
            reason=reasons.SPACE_NOT_FOUND,
            metadata={"space_id": str(self._space_id)},
        )

    async def _poll(self) -> bool:
        """Read one page of new events into the ring; whether more may be waiting."""
        watcher, caller = next(reversed(self._callers.items()))
        try:
            reply = await self._storage.read_events(
                caller, self._space_id, self.position, PAGE if self.position is not None else 0
            )
        except Unauthenticated:
            self._callers.pop(watcher, None)  # revoked: the watcher ends at its own next read
            raise
        if self.position is None:
            self.position = self.floor = reply.last_position
        for event in reply.events:
            position = int(event.cursor)
            if len(self._ring) == self._ring.maxlen:
                self.floor = self._ring[0][0]
            self._ring.append((position, event))
            self.position = position
        async with self._changed:
            self._changed.notify_all()
        return len(reply.events) == PAGE


ENDS_A_WAIT = frozenset(
    {
        common_pb2.EVENT_KIND_RECORDS_APPENDED,  # a turn committed (once per commit)
        common_pb2.EVENT_KIND_TURN_RELEASED,  # a turn failed, or a waiter left
        common_pb2.EVENT_KIND_SESSION_ARCHIVED,
        common_pb2.EVENT_KIND_SUBTREE_DELETED,
    }
)
"""The events after which a turn waiting for the session may find it changed."""


class SessionChanges:
    """Tells a turn waiting for a session (ENQUEUE, DESIGN §4.2) that its space's poller read
    an event about it: a turn committed or released there, a ticket left its line."""

    def __init__(self, poller: SpacePoller, session_id: UUID) -> None:
        self._poller = poller
        self._session = str(session_id)
        self._seen = poller.position
        self._count = 0  # events about the session read since the last wait returned
        self._needed = 1

    async def ready(self, timeout_s: float) -> None:
        """Return once the poller knows where the space's events are (it reads from there),
        or after `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                self._poller.wait_until(lambda: self._poller.position is not None), timeout_s
            )
        if self._seen is None:
            self._seen = self._poller.position

    async def wait(self, timeout_s: float, events: int = 1) -> None:
        """Return once `events` events about the session were read (those read since the
        last return count), or after `timeout_s`."""
        self._needed = max(events, 1)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._poller.wait_until(self._changed), max(timeout_s, 0.0))
        self._count = 0

    def _changed(self) -> bool:
        poller = self._poller
        if poller.failure is not None or poller.position is None:
            return False  # a failed poller wakes nobody: the waiter's timer still does
        if self._seen is None:
            self._seen = poller.position
            return False
        if poller.position <= self._seen:
            return False
        events = poller.after(self._seen)
        self._seen = poller.position
        if events is None:
            return True  # fell behind the ring: something may have happened
        self._count += sum(
            1
            for _, event in events
            if event.kind in ENDS_A_WAIT
            and (event.session_id == self._session or self._session in event.session_ids)
        )
        return self._count >= self._needed


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
        """End every poller (the server has stopped its streams)."""
        pollers, self._pollers = list(self._pollers.values()), {}
        for poller in pollers:
            await poller.stop()

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
        poller = self._pollers.get(space_id)
        if poller is None:
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
                await asyncio.wait_for(poller.wait_beyond(position), idle)
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
