"""The per-space cap on calls in progress (STELLO_MAX_CALLS_PER_SPACE, and
STELLO_MAX_WATCHES_PER_SPACE for long-lived streams) that the call chain
(`stello.serving.interceptors.CallChain`) admits each call against.
"""

from __future__ import annotations

import uuid

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
        held = self._held.get(space_id, 0)
        if held >= self.cap:
            raise ResourceExhausted(
                f"space {shown} has {held} {self._what} on this server, as many as one "
                f"space may ({self._setting}): retry later",
                reason=SPACE_BUSY,
                metadata={"space_id": shown, "limit": str(self.cap)},
            )
        self._held[space_id] = held + 1
        return True

    def give(self, space_id: uuid.UUID) -> None:
        """A counted call of `space_id` ended."""
        held = self._held.pop(space_id, 0) - 1
        if held > 0:
            self._held[space_id] = held


LONG_LIVED = frozenset({"WatchSpace"})
"""Methods (by name) whose calls are counted apart from the others: streams that live as
long as a page does (`SpaceCalls`)."""
