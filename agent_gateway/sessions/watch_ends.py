"""What ends a watch stream of itself: its age, a client that stopped reading, a revoked key.

`Expiry` ends a stream at its age (STELLO_GATEWAY_WATCH_MAX_AGE_S, UNAVAILABLE: its
client watches again from the last cursor it received, losing nothing), and cancels
one whose send has waited `BLOCKED_SEND_S` past it on the client's flow control, so
a forgotten stream no longer keeps its place in the space's cap of watches
(explore15 F1). `key_check` is the `KeyCheck` each stream runs against the gateway's
key store, so a watcher fed from another's reads still notices its key revoked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from uuid import UUID

from agent_gateway.clients import Caller
from stello.auth import KeyStore
from stello.errors import Unauthenticated, Unavailable

log = logging.getLogger(__name__)

# Raises when the caller's key no longer reaches the space (Unauthenticated: revoked or
# unknown; NotFound: the space is out of its reach); returns when it still does.
KeyCheck = Callable[[Caller, UUID], Awaitable[None]]
BLOCKED_SEND_S = 30.0
"""A stream past its age whose send has waited this long on its client is cancelled."""
REVOKED = (
    "the API key of this stream was revoked; watch again with a live key "
    "(after_cursor = the last cursor received loses nothing)"
)
"""What ends a stream whose key was revoked: said by its own check, or by its space's poller
when every watcher's key, its own among them, was refused."""
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
            raise Unauthenticated(REVOKED)
        await keys.check_space(principal, space_id)

    return check
