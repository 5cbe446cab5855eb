"""A turn waiting in its session's line (ENQUEUE) hears of changes through its space's poller
(`SessionChanges`); a caller cancelled at the moment a change wakes it must still end.

On Python 3.11, ``asyncio.wait_for`` answers its inner result when the cancellation arrives
once that result is in, and the cancellation is lost: the waiting turn of a client that had
gone asked storage again, renewed its ticket and stayed in line (CI, stop 67:
test_busy.py::TestEnqueue::test_a_caller_that_cancels_leaves_the_line).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import cast

import pytest

from agent_gateway.clients import StorageClient
from agent_gateway.sessions.poller import SessionChanges, SpacePoller
from stello.common.v1 import common_pb2

SESSION = uuid.UUID("00000000-0000-4000-8000-000000000001")
STEPS = range(8)
"""Loop steps between the change and the cancellation: each moment the waiter may be at."""


def idle_poller() -> SpacePoller:
    """A poller that reads nothing by itself (no task: the test tells it what it read)."""
    return SpacePoller(cast(StorageClient, None), uuid.uuid4(), 60.0, 16)


async def told(poller: SpacePoller, position: int) -> None:
    """The poller read an event about SESSION at `position` and tells its waiters."""
    event = common_pb2.SpaceEvent(
        cursor=str(position), kind=common_pb2.EVENT_KIND_TURN_RELEASED, session_id=str(SESSION)
    )
    poller._ring.append((position, event))
    poller.position = position
    async with poller._changed:
        poller._changed.notify_all()


async def cancelled_after(
    steps: int, waiting: Callable[[SessionChanges], Awaitable[None]], started: int | None
) -> bool:
    """Whether a waiter cancelled `steps` loop steps after a change ends cancelled (True
    also when it had returned before the cancellation: nothing was lost then)."""
    poller = idle_poller()
    poller.position = started
    changes = SessionChanges(poller, SESSION)
    task = asyncio.ensure_future(waiting(changes))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not task.done()
    await told(poller, (started or 0) + 1)
    for _ in range(steps):
        await asyncio.sleep(0)
    if not task.cancel():
        return True
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return task.cancelled()


@pytest.mark.parametrize("steps", STEPS)
async def test_a_wait_cancelled_as_a_change_wakes_it_ends(steps: int) -> None:
    """SessionChanges.wait cancelled at any step after a change about the session raises
    CancelledError (it never returns as if woken)."""
    assert await cancelled_after(steps, lambda changes: changes.wait(30.0), started=1)


@pytest.mark.parametrize("steps", STEPS)
async def test_a_ready_cancelled_as_the_poller_starts_ends(steps: int) -> None:
    """SessionChanges.ready cancelled at any step after the poller's first read raises
    CancelledError."""
    assert await cancelled_after(steps, lambda changes: changes.ready(30.0), started=None)
