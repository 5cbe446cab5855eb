"""`Client`: the same API for code without asyncio, over an `AsyncClient` on its own loop.

Every sync client of the process runs on one event loop in one daemon thread,
started with the first client; each method hands its `AsyncClient` call to that
loop and waits for the answer, so it may be called from any thread (and from
several at once). Iterators (`records`, `stream`, `watch`, ...) are ordinary
iterators fetching one item at a time, with `close()` and ``with``, which end
the call at once (a stream's turn cancelled); one dropped early ends its call
when collected, and one left at the exit never holds the exit up.
An exception in the calling thread while it waits (Ctrl-C's KeyboardInterrupt)
cancels the call on the loop, as cancelling an `AsyncClient` call's task does
(a turn cancelled before its commit stores nothing), and is raised once the
call has ended (within `CANCEL_WAIT_S`). `close()` (or the ``with`` block's
end) closes the client's channel (a later call opens it again, as
`AsyncClient`'s does).

The loop is never closed: gRPC delivers a call's last events to the loop the
call ran on, and some arrive after the channel's close has returned. Delivered to
a closed loop, they would surface in whatever other loop the process runs (an
async app's) as "Event loop is closed"; one loop for all clients keeps that
from happening without a thread per client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from types import TracebackType
from typing import Any, ClassVar, Concatenate, Generic, NoReturn, ParamSpec, Self, TypeVar

from stello.channels import ClientTls
from stello_client.aio import AsyncClient
from stello_client.base import DEFAULT_TIMEOUT_S, DEFAULT_TURN_TIMEOUT_S, NOT_PICKLED
from stello_client.calls import Retry
from stello_client.connection.target import TlsFiles
from stello_client.exceptions.base import ConfigurationError
from stello_client.methods.watching import Watch
from stello_client.types import EventKind, SpaceEvent

P = ParamSpec("P")
T = TypeVar("T")

CANCEL_WAIT_S = 2.0
"""How long an interrupted call waits for its cancellation to land on the loop (the gRPC
call cancelled, a stream's generator ended) before the interrupt is raised anyway."""


FORKED = (
    "this Client was made in another process (this one was forked from it: multiprocessing's "
    "fork start method, Gunicorn --preload, a prefork worker pool), whose loop thread does not "
    "exist here, so the call would wait forever: make the client in each process after the "
    "fork, and close() any client before forking (or use the spawn start method)"
)
"""What a sync client used in a process forked from the one that made it raises."""


class _Loop:
    """An event loop in a daemon thread, and how to run a coroutine on it from elsewhere."""

    _shared: ClassVar[_Loop | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="stello-client", daemon=True
        )
        self.thread.start()

    @classmethod
    def shared(cls) -> _Loop:
        """The loop every sync client of the process runs on (started at the first call)."""
        with cls._lock:
            if cls._shared is None or not cls._shared.thread.is_alive():
                cls._shared = cls()
            return cls._shared

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the loop and wait for it (re-raising what it raises).

        An exception while waiting (KeyboardInterrupt, a signal handler's) cancels `work`
        on the loop and waits up to `CANCEL_WAIT_S` for it to end before it is raised:
        interrupted, a call is cancelled, never left running unseen.
        """
        if threading.current_thread() is self.thread:
            work.close()
            raise RuntimeError("a stello Client cannot be called from its own loop's thread")
        if os.getpid() != self.pid:
            work.close()
        self.check()
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result()
        except BaseException:
            if not future.done():
                self._cancel(work)
            raise

    def check(self) -> None:
        """Raise before a call in a process forked from the loop's (whose thread is not here).

        Raises:
            ConfigurationError: this is such a process (setting "process").
        """
        if os.getpid() != self.pid:
            raise ConfigurationError(FORKED, setting="process")

    def end(self, work: Coroutine[Any, Any, None]) -> None:
        """Run cleanup `work` on the loop, waiting at most `CANCEL_WAIT_S` for it, and not at
        all where the loop cannot run it: at the interpreter's exit (its thread no longer
        runs, so waiting would hang the exit), in a forked child, or on the loop's thread."""
        if sys.is_finalizing() or not self.thread.is_alive() or os.getpid() != self.pid:
            work.close()
            return
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        if threading.current_thread() is not self.thread:
            with contextlib.suppress(TimeoutError):
                future.result(CANCEL_WAIT_S)

    def _cancel(self, work: Coroutine[Any, Any, Any]) -> None:
        """Cancel the task running `work` and wait (at most `CANCEL_WAIT_S`) for its end."""
        ended = threading.Event()

        def cancel() -> None:
            # Runs after the callback that made the task (the loop runs them in order),
            # so it is found unless it has ended; a task cancelled before its first step
            # never runs `work`'s body, so its end is watched on the task, not in `work`.
            for task in asyncio.all_tasks(self.loop):
                if task.get_coro() is work:
                    task.add_done_callback(lambda _: ended.set())
                    task.cancel()
                    return
            ended.set()

        self.loop.call_soon_threadsafe(cancel)
        ended.wait(CANCEL_WAIT_S)


async def _awaited(value: Awaitable[T]) -> T:
    return await value


async def _closed(items: AsyncIterator[Any]) -> None:
    """Close an async generator (a plain async iterator has nothing to close). One still
    running the step an interrupt cancelled (past `CANCEL_WAIT_S`) is left to that step,
    which ends it: closing it now would raise "asynchronous generator is already running"
    over the interrupt."""
    close = getattr(items, "aclose", None)
    if close is not None and not getattr(items, "ag_running", False):
        await close()


def blocking(
    method: Callable[Concatenate[AsyncClient, P], Awaitable[T]],
) -> Callable[Concatenate[Client, P], T]:
    """The sync form of an `AsyncClient` method (same arguments, same docstring)."""

    @functools.wraps(method)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._loop.check()
        return self._loop.run(_awaited(method(self._client, *args, **kwargs)))

    return call


def iterating(
    method: Callable[Concatenate[AsyncClient, P], AsyncIterator[T]],
) -> Callable[Concatenate[Client, P], Items[T]]:
    """The sync form of an `AsyncClient` iterator: items fetched one at a time."""

    @functools.wraps(method)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Items[T]:
        return Items(self._loop, method(self._client, *args, **kwargs))

    return call


class _Closing:
    """``with`` for what has `close()`: the block's end closes it."""

    def close(self) -> None:
        """End what this holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Items(_Closing, Iterator[T], Generic[T]):
    """A sync iterator over an `AsyncClient` iterator, one item fetched at a time.

    `close()` (or the ``with`` block's end) ends its call at once (a stream's turn is
    cancelled); one dropped unfinished is closed when collected, and one left at the
    interpreter's exit is dropped without waiting (the process's end ends its call).
    """

    def __init__(self, loop: _Loop, items: AsyncIterator[T]) -> None:
        self._loop = loop
        self._items = items
        self._done = False

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        self._loop.check()
        try:
            return self._loop.run(_awaited(anext(self._items)))
        except StopAsyncIteration:
            self._done = True
            raise StopIteration from None
        except BaseException:
            # An item interrupted in flight was cancelled first (`_Loop.run`), so the
            # iterator is closed after it, and what interrupted it is what is raised.
            self.close()
            raise

    def close(self) -> None:
        """End the call (nothing more is read; a stream's turn is cancelled)."""
        if not self._done:
            self._done = True
            self._loop.end(_closed(self._items))

    def __del__(self) -> None:
        self.close()


class SyncWatch(_Closing):
    """A `Watch` for sync code: iterate it; `cursor`, `start()` and `close()` as there.

    One dropped unclosed ends its call when collected, waiting for it on the client's loop
    as `Items` does (the `Watch` under it, collected too, would only schedule its end).
    """

    def __init__(self, loop: _Loop, watch: Watch) -> None:
        self._loop = loop
        self._watch = watch
        self._closed = False

    @property
    def cursor(self) -> str | None:
        """The cursor of the last event yielded (or the start): resume after it."""
        return self._watch.cursor

    def start(self) -> str | None:
        """The cursor the stream starts after (see `Watch.start`)."""
        return self._loop.run(self._watch.start())

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> SpaceEvent:
        try:
            return self._loop.run(_awaited(anext(self._watch)))
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        """End the call."""
        self._closed = True
        self._loop.run(self._watch.aclose())

    def __del__(self) -> None:
        if not self._closed:
            self._closed = True
            self._loop.end(self._watch.aclose())


class Client(_Closing):
    """The Stello gateway without asyncio: ``with Client() as client: ...``.

    Takes the arguments of `AsyncClient` (see `ClientBase.__init__`) and has
    its methods, each blocking until its answer.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = AsyncClient(*args, **kwargs)  # no I/O: the channel opens on the loop
        self._loop = _Loop.shared()

    def __getstate__(self) -> NoReturn:
        raise TypeError(NOT_PICKLED.format(name=type(self).__name__))

    @classmethod
    def _over(cls, client: AsyncClient) -> Self:
        made = cls.__new__(cls)
        made._client = client
        made._loop = _Loop.shared()
        return made

    @classmethod
    def keyless(
        cls,
        gateway: str,
        *,
        tls: ClientTls | TlsFiles | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        turn_timeout: float | None = DEFAULT_TURN_TIMEOUT_S,
        retry: Retry | None = None,
    ) -> Self:
        """A client with a channel and no caller of its own, for a program that calls as
        many users: each user's calls go through `using(key=..., space=...)` (see
        `AsyncClient.keyless`; same arguments)."""
        return cls._over(
            AsyncClient.keyless(
                gateway, tls=tls, timeout=timeout, turn_timeout=turn_timeout, retry=retry
            )
        )

    def using(
        self, *, key: str | None = None, space: str | None = None, retry: Retry | None = None
    ) -> Self:
        """This client's channel, calling as another key and/or space, or retrying
        otherwise; closing the new client leaves the channel open (see `AsyncClient.using`)."""
        return self._over(self._client.using(key=key, space=space, retry=retry))

    @property
    def gateway(self) -> str:
        """The gateway's address (host:port)."""
        return self._client.gateway

    def close(self) -> None:
        """Close the channel (its calls end; a later call opens it again)."""
        self._loop.run(self._client.close())

    def watch(
        self,
        *,
        after_cursor: str | None = None,
        kinds: Sequence[str | EventKind] = (),
        resume: bool = True,
    ) -> SyncWatch:
        """The space's events as they commit (see `AsyncClient.watch`; same arguments)."""
        watch = self._client.watch(after_cursor=after_cursor, kinds=kinds, resume=resume)
        return SyncWatch(self._loop, watch)

    space_id = blocking(AsyncClient.space_id)
    create_root = blocking(AsyncClient.create_root)
    fork = blocking(AsyncClient.fork)
    import_session = blocking(AsyncClient.import_session)
    get_session = blocking(AsyncClient.get_session)
    update_label = blocking(AsyncClient.update_label)
    update_session_metadata = blocking(AsyncClient.update_session_metadata)
    archive = blocking(AsyncClient.archive)
    unarchive = blocking(AsyncClient.unarchive)
    delete_session = blocking(AsyncClient.delete_session)
    delete_session_counted = blocking(AsyncClient.delete_session_counted)
    put_insight = blocking(AsyncClient.put_insight)
    put_memory = blocking(AsyncClient.put_memory)
    consolidate = blocking(AsyncClient.consolidate)
    resolve_session_prefix = blocking(AsyncClient.resolve_session_prefix)
    send = blocking(AsyncClient.send)
    stream = iterating(AsyncClient.stream)
    submit_tool_results = blocking(AsyncClient.submit_tool_results)
    submit_tool_results_stream = iterating(AsyncClient.submit_tool_results_stream)
    get_tree = blocking(AsyncClient.get_tree)
    list_records = blocking(AsyncClient.list_records)
    records = iterating(AsyncClient.records)
    search_records = blocking(AsyncClient.search_records)
    search_sessions = blocking(AsyncClient.search_sessions)
    list_session_digests = blocking(AsyncClient.list_session_digests)
    digests = iterating(AsyncClient.digests)
    get_lineage = blocking(AsyncClient.get_lineage)
    lineage = iterating(AsyncClient.lineage)
    list_profiles = blocking(AsyncClient.list_profiles)
    list_skills = blocking(AsyncClient.list_skills)
    who_am_i = blocking(AsyncClient.who_am_i)
    list_shared_memory = blocking(AsyncClient.list_shared_memory)
    shared_memory = iterating(AsyncClient.shared_memory)
    get_shared_memory_entry = blocking(AsyncClient.get_shared_memory_entry)
    upsert_shared_memory_entry = blocking(AsyncClient.upsert_shared_memory_entry)
    remove_shared_memory_entry = blocking(AsyncClient.remove_shared_memory_entry)
    get_retention = blocking(AsyncClient.get_retention)
    put_retention = blocking(AsyncClient.put_retention)
    apply_retention = blocking(AsyncClient.apply_retention)
    pin_session = blocking(AsyncClient.pin_session)
