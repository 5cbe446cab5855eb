"""The periodic sweep of expired provisional sessions (DESIGN §4.1).

Every `interval_s` the sweeper deletes provisional sessions past their
``provisional_until``, with everything that belongs to them, under a
transaction-scoped advisory lock that only one replica gets at a time (the
others skip that round). It is the tree app's background task: the kernel's
server factory starts it once the server is bound and stops it after the
graceful shutdown (tests may also drive one directly), never lazily from a
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tree_service.models import SweptSession
from tree_service.service import TreeService

log = logging.getLogger(__name__)


class Sweeper:
    """A background task that sweeps on a fixed interval until stopped."""

    def __init__(self, service: TreeService, interval_s: float) -> None:
        self._service = service
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the background task is alive."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Begin sweeping in the background (idempotent); needs a running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="stello-tree-sweeper")

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_once(self) -> list[SweptSession] | None:
        """Sweep now; the removed sessions, or None when another replica holds the lock."""
        return await self._service.sweep_expired()

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:  # keep sweeping: a failed round (database down) is retried
                log.exception("provisional sweep failed; retrying in %.1fs", self._interval_s)
            await asyncio.sleep(self._interval_s)
