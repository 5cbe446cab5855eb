"""Stopping a watch that another task (or thread) is reading: the call ends, and the reader's
loop ends with it (explore12 F4: "aclose(): asynchronous generator is already running")."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

import pytest

from stello_client import AsyncClient, Client
from stello_client.methods.watching import Watch
from stello_client.sync import SyncWatch
from tests.gateway.conftest import Stack
from tests.sdk.conftest import client_of

pytestmark = pytest.mark.sql


async def read_in_task(watch: Watch) -> tuple[asyncio.Task[int], asyncio.Event]:
    """A task counting the watch's events to its end, and an event set at its first."""
    first = asyncio.Event()

    async def read() -> int:
        seen = 0
        async for _ in watch:
            seen += 1
            first.set()
        return seen

    return asyncio.create_task(read()), first


async def test_aclose_ends_a_watch_another_task_reads(client: AsyncClient) -> None:
    """`aclose()` while another task waits for the next event ends that task's ``async
    for`` (no error), and the watch yields nothing more."""
    watch = client.watch(kinds=["session_committed"])
    await watch.start()
    reader, first = await read_in_task(watch)
    await client.create_root(label="seen")
    await asyncio.wait_for(first.wait(), 10)
    await watch.aclose()
    assert await asyncio.wait_for(reader, 5) == 1
    assert [event async for event in watch] == []


async def test_leaving_async_with_ends_a_watch_another_task_reads(client: AsyncClient) -> None:
    """Leaving ``async with client.watch()`` while a task reads it ends that task's loop."""
    async with client.watch(kinds=["session_committed"]) as watch:
        await watch.start()
        reader, first = await read_in_task(watch)
        await client.create_root(label="seen")
        await asyncio.wait_for(first.wait(), 10)
    assert await asyncio.wait_for(reader, 5) == 1


def close_while_read(stack: Stack) -> tuple[str, list[str]]:
    """A thread reads a sync watch; this one closes it: the session made meanwhile, and
    what the reader saw, then "ended" when its loop ended."""
    seen: list[str] = []
    first = threading.Event()

    def read(watch: SyncWatch) -> None:
        for event in watch:
            seen.append(event.session_id)
            first.set()
        seen.append("ended")

    with Client(stack.gateway.address, stack.space.key, stack.space.sid, plaintext=True) as sync:
        watch = sync.watch(kinds=["session_committed"])
        watch.start()
        reader = threading.Thread(target=read, args=(watch,))
        reader.start()
        root = sync.create_root(label="seen").id
        assert first.wait(10)
        watch.close()
        reader.join(5)
        assert not reader.is_alive()
    return root, seen


async def test_close_ends_a_sync_watch_another_thread_reads(stack: Stack) -> None:
    """`SyncWatch.close()` while another thread waits for the next event ends that thread's
    ``for`` loop."""
    root, seen = await asyncio.to_thread(close_while_read, stack)
    assert seen == [root, "ended"]


async def test_a_started_watch_ended_by_the_clients_close_logs_nothing(stack: Stack) -> None:
    """`start()` then the client's close (the ``async with AsyncClient()`` block's end) with
    the watch left open: the event `start()` began reading ends Cancelled, quietly; it was
    logged as asyncio's "Task exception was never retrieved" with a traceback (sdk8)."""
    loop = asyncio.get_running_loop()
    logged: list[dict[str, Any]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: logged.append(context))
    try:
        async with client_of(stack) as client:
            watch = client.watch()
            assert await watch.start() is not None
            reading = watch._pending
            assert reading is not None
        await asyncio.wait([reading])
        del watch, reading
        gc.collect()
    finally:
        loop.set_exception_handler(before)
    assert [context["message"] for context in logged] == []


def drop_a_started_watch(stack: Stack) -> tuple[bool, bool]:
    """A sync watch started, then dropped unclosed while its client stays open: whether
    its call was ended (the watch closed, the event start() began reading done)."""
    with Client(stack.gateway.address, stack.space.key, stack.space.sid, plaintext=True) as sync:
        watch = sync.watch()
        assert watch.start() is not None
        inner = watch._watch
        reading = inner._pending
        assert reading is not None
        del watch
        gc.collect()
        return inner._closed, reading.done()


async def test_a_dropped_sync_watch_ends_its_call(stack: Stack) -> None:
    """A `SyncWatch` started and dropped without close() ends its call when collected, as a
    dropped `records()` iterator does: its stream stayed open on the gateway until the
    client closed, the reading start() began holding it (sdk8)."""
    assert await asyncio.to_thread(drop_a_started_watch, stack) == (True, True)


async def test_a_dropped_async_watch_ends_its_call(client: AsyncClient) -> None:
    """A `Watch` started and dropped without aclose() ends its call when collected, as a
    dropped `SyncWatch` does: the reading start() began held the watch (its generator
    referred to it), so its stream stayed open on the gateway until the client closed."""
    watch = client.watch()
    assert await watch.start() is not None
    reading = watch._pending
    assert reading is not None
    del watch
    gc.collect()
    await asyncio.wait([reading], timeout=10)
    assert reading.cancelled()


async def test_a_dropped_async_watch_read_once_ends_its_call(client: AsyncClient) -> None:
    """A `Watch` read once and dropped ends its call when collected (its generator's
    ``finally`` cancels the call): the generator is closed, and no longer referred to."""
    watch = client.watch(kinds=["session_committed"])
    await watch.start()
    await client.create_root(label="seen")
    assert (await anext(watch)).session_id
    events = watch._events
    assert events is not None
    ended = asyncio.get_running_loop().create_future()
    finalizer = weakref.finalize(events, ended.set_result, None)
    del watch, events
    gc.collect()
    await asyncio.wait_for(ended, 10)
    assert not finalizer.alive
