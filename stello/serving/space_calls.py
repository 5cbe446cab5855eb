"""The per-space cap on calls in progress (STELLO_MAX_CALLS_PER_SPACE, and
STELLO_MAX_WATCHES_PER_SPACE for long-lived streams) that the call chain
(`stello.serving.interceptors.CallChain`) admits each call against.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from stello.errors import ResourceExhausted
from stello.reasons import SPACE_BUSY


class SpaceCalls:
    """The calls each space has in progress in this process, and the cap on them
    (STELLO_MAX_CALLS_PER_SPACE): one tenant's burst is refused at the door, before any
    work, rather than queueing every tenant's calls behind it on the pool and the loop
    (explore11 F1). Long-lived streams (`LONG_LIVED`) have a count and a cap of their own
    (STELLO_MAX_WATCHES_PER_SPACE: a page open for hours must not hold a call's place)."""

    def __init__(
        self,
        cap: int,
        what: str = "calls in progress",
        setting: str = "STELLO_MAX_CALLS_PER_SPACE",
    ) -> None:
        self.cap = cap
        self._what = what
        self._setting = setting
        self._held: dict[uuid.UUID, int] = {}

    def take(self, space_id: uuid.UUID, shown: str) -> bool:
        """Count a call of `space_id` (named `shown`, as the request wrote it); whether it
        was counted (False: no cap). ResourceExhausted SPACE_BUSY at the cap."""
        if self.cap <= 0:
            return False
        if not self.try_take(space_id):
            raise ResourceExhausted(
                f"space {shown} has {self._held[space_id]} {self._what} on this server, as "
                f"many as one space may ({self._setting}): retry later",
                reason=SPACE_BUSY,
                metadata={"space_id": shown, "limit": str(self.cap)},
            )
        return True

    def try_take(self, space_id: uuid.UUID) -> bool:
        """Count a call of `space_id` unless the cap is reached; whether it was counted."""
        if self.cap > 0 and self._held.get(space_id, 0) >= self.cap:
            return False
        self.force(space_id)
        return True

    def force(self, space_id: uuid.UUID) -> None:
        """Count a call of `space_id` again, whatever the cap (one that waited aside)."""
        self._held[space_id] = self._held.get(space_id, 0) + 1

    def give(self, space_id: uuid.UUID) -> None:
        """A counted call of `space_id` ended."""
        held = self._held.pop(space_id, 0) - 1
        if held > 0:
            self._held[space_id] = held


LONG_LIVED = frozenset({"WatchSpace"})
"""Methods (by name) whose calls are counted apart from the others: streams that live as
long as a page does (`SpaceCalls`)."""


class Slot:
    """The place a call holds in its space's count, given back once (at its end, or while
    it waits aside, in `aside`'s count: as many calls of a space may wait as run)."""

    __slots__ = ("_aside", "_calls", "_held", "_space_id")

    def __init__(
        self, calls: SpaceCalls, space_id: uuid.UUID, aside: SpaceCalls | None = None
    ) -> None:
        self._calls = calls
        self._aside = aside
        self._space_id = space_id
        self._held = True

    def step_aside(self) -> bool:
        """Move the place to the count of waiting calls; False (it stays) when that is full."""
        if not self._held or self._aside is None or not self._aside.try_take(self._space_id):
            return False
        self.give()
        return True

    def step_back(self) -> None:
        """Take the place back from the count of waiting calls (after `step_aside`)."""
        assert self._aside is not None
        self._aside.give(self._space_id)
        self.retake()

    def give(self) -> None:
        """Give the place back (no-op when it is not held)."""
        if self._held:
            self._held = False
            self._calls.give(self._space_id)

    def retake(self) -> None:
        """Hold the place again, whatever the cap (the call was admitted already)."""
        if not self._held:
            self._held = True
            self._calls.force(self._space_id)


current_slot: ContextVar[Slot | None] = ContextVar("stello_space_slot", default=None)
"""The running call's place in its space's count (None: not counted), set at admission."""


@contextmanager
def waiting_aside() -> Iterator[None]:
    """While inside, the running call holds no place in its space's count: it only waits
    (a turn in its session's line), and must not keep the space's other calls out (the
    call it waits for among them). It counts among the space's waiting calls instead (as
    many as the cap; past them it keeps its place), and takes its place again on the way
    out."""
    slot = current_slot.get()
    if slot is None or not slot.step_aside():
        yield
        return
    try:
        yield
    finally:
        slot.step_back()
