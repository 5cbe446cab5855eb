"""A space's poller that dies of a bug ends its watchers with INTERNAL (an error id in the
log and the message); before, its task ended alone and every WatchSpace stream of the space
on that gateway stayed open, waiting for events no one read (life9's report, stop 69)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, cast

import pytest

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.sessions.poller import SpacePoller
from stello.errors import Internal


class BrokenStorage:
    """A storage client whose ReadEvents meets a bug of the gateway's own."""

    async def read_events(self, *_: Any) -> Any:
        raise KeyError("a bug")


async def test_a_poller_that_dies_of_a_bug_ends_its_watchers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    poller = SpacePoller(cast(StorageClient, BrokenStorage()), uuid.uuid4(), 60.0, 16)
    poller.join(1, Caller(key="k"))
    try:
        async with asyncio.timeout(10):  # a watcher's wait, which hung forever before
            await poller.wait_beyond(0)
    finally:
        await poller.stop()
    assert isinstance(poller.failure, Internal)
    message = poller.failure.message
    assert message.startswith("internal error (id ") and "a bug" not in message
    error_id = message.removeprefix("internal error (id ").removesuffix(")")
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error_id in record.getMessage() and record.exc_info is not None
