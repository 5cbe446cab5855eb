"""A background task that repeats one round of work on a fixed interval (sweeps, purges).

A service app lists it among its background tasks: the kernel's server factory
starts it once the server is bound and stops it after the graceful shutdown.
A failed round (the database down) is logged and retried at the next interval.
Stopping lets a round under way finish (up to `STOP_GRACE_S`) rather than cancel it
in the middle of a transaction, whose connection would go back to its pool with the
transaction still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
"""How long `stop` waits for a round under way before cancelling it."""


class Periodic:
    """Runs `run_once` every `interval_s` seconds in a task until stopped."""

    task_name = "stello-periodic"
    what = "periodic work"

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()
        self._in_round = False
        self._stopping = False

    @property
    def running(self) -> bool:
        """Whether the background task is alive."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Begin in the background (idempotent); needs a running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End the task and wait for it (idempotent): a round under way may finish first
        (up to `grace_s`); a task waiting for its next round is cancelled at once."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        if self._in_round:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), grace_s)
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
        while not self._stopping:
            self._in_round = True
            try:
                await self.run_once()
            except Exception:  # keep going: a failed round (database down) is retried
                log.exception("%s failed; retrying in %.1fs", self.what, self._interval_s)
            finally:
                self._in_round = False
            if self._stopping:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self._interval_s)
            self._woken.clear()
