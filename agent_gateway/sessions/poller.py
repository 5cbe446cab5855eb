"""One space's poller (DESIGN §4.6): its new events read once for all its watchers here.

A `SpacePoller` reads the space's new events from storage (`ReadEvents`) every
`interval_s`, or at once when `wake` is called after a local write, and keeps
the newest ones in a bounded ring (`after`), which `watch.Watchers` fans out.
Memory stays bounded by the ring, and writers never wait for readers (nothing
here touches a write path).

A turn waiting in its session's line (ENQUEUE, DESIGN §4.2) joins the same
poller (`SessionChanges`): an event about its session wakes it to ask storage
again, so a turn that ends on any gateway starts the next one here without a
poll of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from uuid import UUID

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.sessions.watch_ends import REVOKED
from stello import reasons
from stello.common.v1 import common_pb2
from stello.db.tasks import cancel_and_wait
from stello.errors import (
    Internal,
    InvalidArgument,
    NotFound,
    StelloError,
    Unauthenticated,
    new_error_id,
)

log = logging.getLogger(__name__)


PAGE = 500
RING_EVENTS = 1024


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
            await cancel_and_wait(task)

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
        """Poll until stopped; a bug ends the watchers with INTERNAL (its error id in the log
        and the message), where the task died alone and they waited for nothing."""
        try:
            await self._polling()
        except Exception as exc:
            error_id = new_error_id()
            log.error(
                "polling the events of space %s failed (error id %s); its watchers end",
                self._space_id,
                error_id,
                exc_info=exc,
            )
            await self._fail(Internal(f"internal error (id {error_id})"))

    async def _polling(self) -> None:
        while True:
            if not self._callers:
                await self._fail(Unauthenticated(REVOKED))  # each watcher's key was refused
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
                async with asyncio.timeout(self._interval_s):
                    await self._woken.wait()
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
            async with asyncio.timeout(timeout_s):
                await self._poller.wait_until(lambda: self._poller.position is not None)
        if self._seen is None:
            self._seen = self._poller.position

    async def wait(self, timeout_s: float, events: int = 1) -> None:
        """Return once `events` events about the session were read (those read since the
        last return count), or after `timeout_s`."""
        self._needed = max(events, 1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(timeout_s, 0.0)):
                await self._poller.wait_until(self._changed)
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
