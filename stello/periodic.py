"""A background task that repeats one round of work on a fixed interval (sweeps, purges).

A service app lists it among its background tasks: the kernel's server factory
starts it once the server is bound and stops it after the graceful shutdown.
A failed round (the database down) is logged and retried at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)


class Periodic:
    """Runs `run_once` every `interval_s` seconds in a task until stopped."""

    task_name = "stello-periodic"
    what = "periodic work"

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()

    @property
    def running(self) -> bool:
        """Whether the background task is alive."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Begin in the background (idempotent); needs a running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def wake(self) -> None:
        """Run the next round now instead of at the end of the interval."""
        self._woken.set()

    async def run_once(self) -> object:
        """One round of the work (subclasses say what)."""
        raise NotImplementedError

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:  # keep going: a failed round (database down) is retried
                log.exception("%s failed; retrying in %.1fs", self.what, self._interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self._interval_s)
            self._woken.clear()
