"""Work that must not be cut half-way by its caller's cancellation.

A write whose commit has been sent ends as the database decides, whatever the
caller does meanwhile: cancelled in the middle, the caller (and the log) could
never tell whether it was stored, and an asyncpg transaction cut mid-statement
is reset with an ERROR in the log. `to_the_end` lets such work finish, says
how it ended, then raises the cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def to_the_end(work: Awaitable[T], said: Callable[[asyncio.Future[T]], None]) -> T:
    """`work`'s result. Cancelled meanwhile, `work` goes on to its end, `said` is given it
    (done: its result, error or cancellation) and the cancellation is raised; a second
    cancellation while it finishes leaves it running and is raised at once (`said` is then
    given it when it ends: its error is never left unretrieved)."""
    running = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        try:
            await asyncio.wait({running})
        except asyncio.CancelledError:
            running.add_done_callback(said)  # its end still said (its error consumed)
            raise
        said(running)
        raise


async def settled(work: Awaitable[Any]) -> None:
    """Wait for `work`; a cancellation meanwhile does not stop it: it goes on to its end (a
    failure then marked seen: `retrieved`) and the cancellation is raised at once (a lease or
    a claim given back, a ticket taken out of line, by a call that is going away)."""
    running = asyncio.ensure_future(work)
    running.add_done_callback(retrieved)
    await asyncio.shield(running)


class Steps:
    """Steps each taken whatever failed before it (a stop that raised skips no later stop):
    each failure is kept and told to `failed` (what the step was, the error); `raise_first`
    raises the first once the last step was taken.

    A step that raises CancelledError of its own (it awaited a task someone else cancelled)
    failed like any other: told, kept (raised by `raise_first` if it came first), the later
    steps taken. A cancellation of the task taking the steps, new since the step began
    (`cancelled_since`: one it was cleaning up after when it began is no new one), is raised
    at once and no later step is taken: the shutdown itself was cancelled."""

    def __init__(
        self, failed: Callable[[str, BaseException], None] = lambda what, exc: None
    ) -> None:
        self._failed = failed
        self._errors: list[BaseException] = []

    async def take(self, what: str, work: Awaitable[object]) -> None:
        """Await `work` (named `what`); an error (its own CancelledError too) is kept, not
        raised; the taker's own cancellation is raised."""
        cancelled = cancelled_since()
        try:
            await work
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and cancelled():
                raise
            self._errors.append(exc)
            self._failed(what, exc)

    def raise_first(self) -> None:
        """Raise the first step's error, if a step failed."""
        if self._errors:
            raise self._errors[0]


def retrieved(done: asyncio.Future[Any]) -> None:
    """Mark a dropped future's failure as seen (asyncio logs one nobody retrieved): a done
    callback."""
    if not done.cancelled():
        done.exception()


def ended_well(done: asyncio.Future[Any]) -> bool:
    """Whether a finished future ended with a result (not an error, not cancelled)."""
    return not done.cancelled() and done.exception() is None


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for its end (its cancellation swallowed, any other error
    raised); a cancellation of the caller meanwhile is raised, never taken for the task's.
    Only one that arrives during the wait: a caller cleaning up after its own cancellation
    (stopping its tasks in a `finally`) gets the task's end and goes on with its cleanup."""
    cancelled = cancelled_since()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if cancelled():
            raise


def cancelled_since() -> Callable[[], bool]:
    """A test of whether the current task has been cancelled since this call: a new
    cancellation, not the one a task cleaning up after its own cancellation already had
    (compared as `asyncio.timeout` does, by `Task.cancelling()`)."""
    current = asyncio.current_task()
    before = 0 if current is None else current.cancelling()
    return lambda: current is not None and current.cancelling() > before
