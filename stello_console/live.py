"""The live relay: the space's WatchSpace stream as server-sent events (DESIGN §4.6, §8.1).

One event-stream response per watching page, one WatchSpace call behind it,
made with the page's caller, so the gateway's tenancy is the relay's: a page
gets its own space's events and nothing else. The stream says:

- ``ready`` (``id:`` the cursor) once the gateway fixed where the stream starts:
  a page that reads its state after it misses no change;
- ``change`` (``id:`` its cursor) for each event: ids, kinds and seqs only;
- ``error`` as the last event when the watch failed, with what the page should
  do next: ``resume`` (reconnect with its last cursor: the gateway restarted or
  storage is unreachable), ``restart`` (reload its state and watch from now: the
  cursor expired) or ``stop`` (the key or space is refused: UNAUTHENTICATED, or SIGN_IN
  as a call's refusal says it, and the page asks to sign in again as for a refused call).

A page resumes by cursor with the SSE ``Last-Event-ID`` header (or ``?after=``)
and loses or repeats nothing. The relay never retries by itself, so every
retry is visible to, and paced by, the page. The call ends when the page goes
away (the response is cancelled), when the console stops, and when a browser
signs out of the local console (every stream open then ends: a page still
signed in resumes by cursor, a signed-out one is refused); an idle stream
carries a comment every `heartbeat_s`, so proxies keep it and a vanished peer
is noticed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from stello_client.exceptions import ConfigurationError, RpcError
from stello_console.errors import configuration_error, page_error
from stello_console.gateway import Caller, ConsoleGateway

log = logging.getLogger("stello_console")

HEARTBEAT_S = 15.0
HEARTBEAT = ": keep-alive\n\n"
QUEUE_EVENTS = 256  # a slow page holds the gateway's stream back rather than this process
RESUMABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)


def sse(name: str, data: dict[str, Any], event_id: str | None = None) -> str:
    """One server-sent event (JSON escapes newlines, so the data is one line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def next_step(error: RpcError, reason: str | None, resumed: bool) -> str:
    """What a page does after the watch failed with `error`: resume, restart or stop."""
    code = error.code
    if code in RESUMABLE:
        return "resume"
    if reason == "CURSOR_EXPIRED" or (resumed and code == grpc.StatusCode.INVALID_ARGUMENT):
        return "restart"  # its cursor is no longer (or not) one of this space
    return "stop"


class LiveRelay:
    """Relays WatchSpace streams to pages until `stop`."""

    def __init__(
        self,
        gateway: ConsoleGateway,
        address: str,
        heartbeat_s: float = HEARTBEAT_S,
        *,
        local: bool = False,
    ) -> None:
        self._gateway = gateway
        self._address = address
        self._local = local
        self._heartbeat_s = heartbeat_s
        self._stopping = asyncio.Event()
        self._signed_out = asyncio.Event()  # the streams opened before the latest sign-out

    def stop(self) -> None:
        """End every stream now (the console is stopping); pages resume elsewhere or later."""
        self._stopping.set()

    def sign_out(self) -> None:
        """End every stream open now (a browser signed out of the local console, whose one
        sign-in is every stream's): a page still signed in resumes with its cursor, one
        signed out is refused, so no stream outlives the sign-out it was made under."""
        ended, self._signed_out = self._signed_out, asyncio.Event()
        ended.set()

    async def stream(self, caller: Caller, after: str | None) -> AsyncIterator[str]:
        """The event stream of `caller`'s space after cursor `after` (None: from now)."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=QUEUE_EVENTS)
        signed_out = self._signed_out
        pump = asyncio.create_task(self._pump(caller, after, queue), name="stello-console-live")
        try:
            while (item := await self._next(queue, signed_out)) is not None:
                yield item
        finally:
            pump.cancel()  # cancels the WatchSpace call (no await: the response may be cancelled)

    async def _next(
        self, queue: asyncio.Queue[str | None], signed_out: asyncio.Event
    ) -> str | None:
        """The next item; a heartbeat after `heartbeat_s` of quiet; None at the end, on stop or
        once `signed_out` is set."""
        if self._stopping.is_set() or signed_out.is_set():
            return None
        get = asyncio.ensure_future(queue.get())
        stop = asyncio.ensure_future(self._stopping.wait())
        out = asyncio.ensure_future(signed_out.wait())
        try:
            done, _ = await asyncio.wait(
                (get, stop, out), timeout=self._heartbeat_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            get.cancel()
            stop.cancel()
            out.cancel()
        if stop in done or out in done:
            return None
        return get.result() if get in done else HEARTBEAT

    async def _pump(
        self, caller: Caller, after: str | None, queue: asyncio.Queue[str | None]
    ) -> None:
        """Read the watch into `queue` (waiting while it is full), then its end: an error, None."""
        try:
            async for name, data in self._gateway.watch(caller, after):
                await queue.put(sse(name, data, data["cursor"]))
        except RpcError as err:  # a watch ends only so (the SDK raises for a closed one too)
            space = "" if self._local else caller.space_id
            body = page_error(err, self._address, space, local=self._local)[0]["error"]
            body["then"] = next_step(err, body["reason"], after is not None)
            await queue.put(sse("error", body))
        except ConfigurationError as exc:
            await queue.put(
                sse("error", {**configuration_error(exc).body()["error"], "then": "stop"})
            )
        except Exception:
            log.exception("the live relay failed")  # a bug: the page resumes with its cursor
        await queue.put(None)
