"""watch(): the space's changes as they commit (WatchSpace, DESIGN §4.6), resumed by cursor.

A `Watch` keeps the cursor of the last event it yielded (at first, the one
the gateway said the stream starts after: the ``stello-watch-cursor`` initial
metadata). When the stream breaks (UNAVAILABLE, CANCELLED or ABORTED: a
gateway restarted; or the stream closing as OK, which a healthy watch never
does) it calls again after that cursor, with the client's backoff, so no
event is lost or repeated. A reconnect that answers resets the count of
attempts; `Retry.attempts` failures in a row raise, except that an
UNAVAILABLE naming no reason (a gateway restarting) is tried on, as a call's is,
until `Retry.unavailable_for_s` after the first failure in a row. CURSOR_EXPIRED
and the other statuses raise at once (`resume=False`: every failure raises).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Any, Self, cast

import grpc

from stello.agent.v1 import agent_pb2
from stello.channels import WATCH_CURSOR_METADATA
from stello_client.base import ClientBase
from stello_client.calls import still_waiting
from stello_client.exceptions.base import RpcError
from stello_client.exceptions.translate import from_rpc_error
from stello_client.exceptions.transport import Unavailable
from stello_client.requests import request_of, set_optional
from stello_client.types import EventKind, SpaceEvent, event_kind, several

RESUMED = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED}
)


class Watch:
    """An async iterator of the space's events; `cursor` is the last one's (see the module).

    Use it as ``async for event in client.watch(): ...`` or in ``async with``
    (which closes it); `start()` answers where the stream starts.
    """

    def __init__(
        self,
        client: WatchCalls,
        after_cursor: str | None,
        kinds: Sequence[str | EventKind],
        *,
        resume: bool,
    ) -> None:
        # Checked now, as a request's fields are (its first event would raise protobuf's
        # "bad argument type for built-in operation", naming nothing).
        set_optional(agent_pb2.WatchSpaceRequest(), after_cursor=after_cursor)
        self.cursor = after_cursor
        """The cursor of the last event yielded (or the start): resume after it."""
        self._client = client
        self._kinds = [
            event_kind(kind, f"kinds[{i}]") for i, kind in enumerate(several("kinds", kinds))
        ]
        self._resume = resume
        self._started: asyncio.Future[str | None] | None = None
        self._events: AsyncGenerator[SpaceEvent, None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: asyncio.Future[SpaceEvent] | None = None
        self._closed = False
        self._readers: set[asyncio.Task[Any]] = set()
        self._stopped: set[asyncio.Task[Any]] = set()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SpaceEvent:
        if self._closed:
            raise StopAsyncIteration
        reader = asyncio.current_task()
        assert reader is not None
        self._readers.add(reader)
        try:
            if self._pending is not None:
                pending, self._pending = self._pending, None
                return await pending
            return await anext(self._generator())
        except asyncio.CancelledError:
            if reader in self._stopped:
                self._stopped.discard(reader)
                if reader.uncancel() == 0:  # cancelled by `aclose` alone
                    raise StopAsyncIteration from None
            raise
        finally:
            self._readers.discard(reader)

    async def start(self) -> str | None:
        """The cursor the stream starts after, once the gateway fixed it (before any event;
        None if the gateway did not say). Reading the state after it misses no change."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
        if self._started.done():
            return self._started.result()
        if self._pending is None:
            self._pending = asyncio.ensure_future(anext(self._generator()))
            self._pending.add_done_callback(_seen)
        waited: set[asyncio.Future[Any]] = {self._pending, self._started}
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if self._started.done():
            return self._started.result()
        pending, self._pending = self._pending, None
        pending.result()  # the watch failed before it started: raise that
        return None

    async def aclose(self) -> None:
        """End the call (nothing more is read). A task (or a sync watch's thread) waiting
        for the next event meanwhile sees the iteration end (StopAsyncIteration, its
        ``async for`` simply ends)."""
        self._closed = True
        others = self._readers - {asyncio.current_task()}
        for reader in others:
            # Its step holds the generator: cancelling it ends the call (the generator's
            # `finally`), and `__anext__` turns that cancel into the iteration's end.
            self._stopped.add(reader)
            reader.cancel()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, RpcError):
                await pending
        if self._events is not None and not others:  # else the readers' cancel ends it
            await self._events.aclose()

    def _generator(self) -> AsyncGenerator[SpaceEvent, None]:
        if self._events is None:
            # The generator refers to the watch weakly: a watch dropped unclosed is
            # collected even while the event `start()` began reading is pending, and
            # `__del__` ends its call.
            self._loop = asyncio.get_running_loop()
            self._events = Watch._run(cast(Watch, weakref.proxy(self)))
        return self._events

    def __del__(self) -> None:
        events = getattr(self, "_events", None)  # None: never read, or __init__ raised
        if events is None or self._closed or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # its loop closed: the call ended with it
            self._loop.call_soon_threadsafe(_end, self._pending, events)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[SpaceEvent, None]:
        failures = 0
        began = time.monotonic()  # of the failures in a row
        channel = self._client._channel
        closes = channel.closes
        while True:
            request = request_of(
                agent_pb2.WatchSpaceRequest,
                space_id=await self._client.space_id(),
                kinds=self._kinds,
            )
            if self.cursor is not None:
                request.after_cursor = self.cursor
            opts = self._client._options("WatchSpace", None, safe=True)
            with channel.ended_by_close(closes, "WatchSpace", opts.request_id):
                call = self._client._stream_call("WatchSpace", request, opts)
                try:
                    start = dict(await call.initial_metadata() or ()).get(WATCH_CURSOR_METADATA)
                    if start is not None:
                        failures = 0
                        self.cursor = self.cursor or str(start)
                        self._mark_started(str(start))
                    async for message in call:
                        self.cursor = message.event.cursor
                        yield message.event
                    error: RpcError = Unavailable(
                        "the gateway ended the watch", method="WatchSpace"
                    )
                except grpc.aio.AioRpcError as exc:
                    error = from_rpc_error(exc, method="WatchSpace", request_id=opts.request_id)
                    self._client._said(error)
                finally:
                    call.cancel()
            failures += 1
            if failures == 1:
                began = time.monotonic()
            if not self._resume or error.code not in RESUMED or error.reason is not None:
                raise error
            retry = self._client._retry
            pause = retry.pause(failures)
            if failures >= retry.attempts and not still_waiting(error, pause, retry, began):
                raise error
            await asyncio.sleep(pause)

    def _mark_started(self, cursor: str) -> None:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
        if not self._started.done():
            self._started.set_result(cursor)


def _seen(reading: asyncio.Future[Any]) -> None:
    """Mark the outcome of the event `start()` began reading as retrieved: the watch's
    next `__anext__` raises it, but a watch never read again (its client closed, so it
    ended Cancelled) would have it logged as "Task exception was never retrieved"."""
    if not reading.cancelled():
        reading.exception()


def _end(pending: asyncio.Future[SpaceEvent] | None, events: AsyncGenerator[Any, None]) -> None:
    """End the call of a watch dropped unclosed: cancel the event it is reading (the cancel
    ends its generator), else close its generator."""
    if pending is not None and not pending.done():
        pending.cancel()
    else:
        asyncio.ensure_future(events.aclose()).add_done_callback(_seen)


class WatchCalls(ClientBase):
    """WatchSpace."""

    def watch(
        self,
        *,
        after_cursor: str | None = None,
        kinds: Sequence[str | EventKind] = (),
        resume: bool = True,
    ) -> Watch:
        """The space's events as they commit, after `after_cursor` (None: from now), only
        `kinds` ("records_appended", ...; empty: all), resumed after a disconnect from the
        last cursor (`resume=False`: a disconnect raises). No deadline.

        Raises:
            TypeError, ValueError: `after_cursor` is not a str, or `kinds` is not a list
                of kinds' names (or numbers), naming it.

        Raises (from the iteration):
            CursorExpired: events after `after_cursor` were purged: re-read, watch anew.
            InvalidArgument: `after_cursor` is not a cursor of this space.
            Unavailable: the gateway stayed unreachable through the retries (one out of
                reach: until `Retry.unavailable_for_s` after the first failure in a row).
        """
        return Watch(self, after_cursor, kinds, resume=resume)
