"""A small scripted HTTP/1.1 server on loopback, the base of the fake LLM servers.

It answers each request with the next scripted reply (FIFO), or with
`FakeHTTPServer.default` when nothing is scripted, and records every request
it received. Replies are either a whole body (with Content-Length) or a
stream of chunks (chunked transfer encoding, as server-sent events are sent),
optionally after a delay. Connections are kept alive as HTTP/1.1 allows.

    async with FakeHTTPServer() as server:
        server.push(Reply.json({"ok": True}))
        ...  # point a client at server.url
        assert server.requests[0].json() == {...}
        assert await server.written_whole(0)  # False: the client closed it before its end

`tests/support/fake_openai.py` and `tests/support/fake_anthropic.py` build on
it: they render a `FakeAnswer` in their provider's protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

from tests.support.fake_answers import FakeAnswer, FakeToolCall, JsonValue, split_in_two

__all__ = ["FakeAnswer", "FakeToolCall", "JsonValue", "split_in_two"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> JsonValue:
        """The body decoded as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer.

    `chunks` None: `body` is sent with a Content-Length. Otherwise each chunk
    is sent as it comes (chunked transfer encoding), `chunk_delay_s` apart.
    `delay_s` is waited before the status line (a slow server; a client that closes the
    connection meanwhile ends the reply unwritten, `FakeHTTPServer.written`). `reset`: after the
    chunks, the connection is reset (TCP RST) instead of the body ending, as a crashed
    server or a proxy drops a stream mid-answer. `hang_after`: after that many chunks
    the server sends nothing more (a server hung mid-answer) until it is closed.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    chunks: tuple[bytes, ...] | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    reset: bool = False
    hang_after: int | None = None

    def dropped_after(self, chunks: int) -> Reply:
        """This reply with only its first `chunks` chunks, its connection then reset."""
        return replace(self, chunks=(self.chunks or ())[:chunks], reset=True)

    def hung_after(self, chunks: int) -> Reply:
        """This reply sending its first `chunks` chunks, then nothing until the server closes."""
        return replace(self, hang_after=chunks)

    @classmethod
    def json(
        cls,
        payload: JsonValue,
        *,
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
        delay_s: float = 0.0,
    ) -> Reply:
        """A JSON answer."""
        return cls(
            status=status,
            headers=(("content-type", "application/json"), *headers),
            body=json.dumps(payload).encode(),
            delay_s=delay_s,
        )

    @classmethod
    def text(cls, body: str, *, content_type: str = "text/html", status: int = 200) -> Reply:
        """A body that is not what the protocol says (e.g. a proxy's HTML page, broken JSON)."""
        return cls(status=status, headers=(("content-type", content_type),), body=body.encode())

    @classmethod
    def sse(
        cls,
        events: Iterable[tuple[str | None, JsonValue | str]],
        *,
        delay_s: float = 0.0,
        chunk_delay_s: float = 0.0,
    ) -> Reply:
        """A server-sent-events answer: one chunk per `(event name or None, data)`.

        A `str` data is sent verbatim (e.g. ``[DONE]``); anything else as JSON.
        """
        return cls(
            headers=(("content-type", "text/event-stream"), ("cache-control", "no-cache")),
            chunks=tuple(sse_event(name, data) for name, data in events),
            delay_s=delay_s,
            chunk_delay_s=chunk_delay_s,
        )


def sse_event(name: str | None, data: JsonValue | str) -> bytes:
    """One server-sent event, blank line included."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()


Responder = Callable[[RecordedRequest], Reply]
"""Computes the reply to one request (e.g. JSON or SSE, as the request asks)."""


def _unscripted(request: RecordedRequest) -> Reply:
    message = f"fake server: no scripted reply for {request.method} {request.path}"
    return Reply.json(
        {"error": {"message": message}},
        status=501,
        headers=(("x-should-retry", "false"),),
    )


def _unreadable(request: RecordedRequest, exc: ValueError) -> Reply:
    """What a real provider answers a body it cannot parse: 400, not a dropped connection."""
    message = (
        f"fake server: could not read the body of {request.method} {request.path} "
        f"({len(request.body)} bytes, content-length {request.headers.get('content-length')!r}, "
        f"transfer-encoding {request.headers.get('transfer-encoding')!r}): {exc}"
    )
    return Reply.json(
        {"error": {"message": message, "type": "invalid_request_error"}},
        status=400,
        headers=(("x-should-retry", "false"),),
    )


class FakeHTTPServer:
    """A loopback HTTP/1.1 server that plays scripted replies and records requests.

    A responder that cannot read a request's body (not JSON) answers 400, as a real
    provider does, and the request is kept in `rejected` too.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.rejected: list[RecordedRequest] = []
        self.default: Responder = _unscripted
        self._script: deque[Reply | Responder] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.written: list[bool] = []
        """Per reply, in the order written: True when it was written to its end, False when
        the connection broke before (the client closed it, or a `Reply.reset`)."""
        self._wrote = asyncio.Event()
        self.port = 0
        self.connections = 0
        """Connections accepted so far (a client that keeps one alive makes one)."""

    @property
    def url(self) -> str:
        """The server's root URL, e.g. ``http://127.0.0.1:43210``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    def push(self, *replies: Reply | Responder) -> None:
        """Queue replies, each answering one request, in order."""
        self._script.extend(replies)

    def clear(self) -> None:
        """Forget the script and the recorded requests."""
        self._script.clear()
        self.requests.clear()

    async def start(self) -> Self:
        """Listen on 127.0.0.1, on a free port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        """Stop listening and drop every connection (a sleeping reply included)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def written_whole(self, index: int) -> bool:
        """Whether reply `index` (0-based, in the order written) was written to its end, once
        its writing ended (see `written`); a reply that hangs never ends."""
        while len(self.written) <= index:
            self._wrote.clear()
            await self._wrote.wait()
        return self.written[index]

    def _ended(self, whole: bool) -> None:
        self.written.append(whole)
        self._wrote.set()

    def _reply_to(self, request: RecordedRequest) -> Reply:
        scripted = self._script.popleft() if self._script else self.default
        if isinstance(scripted, Reply):
            return scripted
        try:
            return scripted(request)
        except ValueError as exc:  # a body that is not the JSON the responder reads
            self.rejected.append(request)
            return _unreadable(request, exc)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The connection runs in a task of our own, so `close` can cancel it (a
        # sleeping reply) without asyncio logging the cancelled callback task.
        self.connections += 1
        task = asyncio.ensure_future(self._converse(reader, writer))
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader, lambda: _ack_at_once(writer))
                if request is None:
                    return
                self.requests.append(request)
                reply = self._reply_to(request)
                try:
                    await _write_reply(reader, writer, reply)
                except ConnectionError:
                    self._ended(False)
                    raise
                self._ended(True)
                if request.headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return


HANG_UP_POLL_S = 0.01
"""How often a slow reply looks whether its client hung up (`_waited`)."""


async def _waited(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait `seconds`, as a slow server does; False, at once, when the client closes the
    connection meanwhile (looked at every `HANG_UP_POLL_S`, nothing of it read)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        if reader.at_eof() or reader.exception() is not None:
            return False
        await asyncio.sleep(min(left, HANG_UP_POLL_S))
    return True


def _ack_at_once(writer: asyncio.StreamWriter) -> None:
    """Acknowledge what arrives at once: a client that writes its headers and its body
    apart (Nagle) would otherwise wait for the delayed ACK, ~40 ms a request."""
    sock = writer.get_extra_info("socket")
    quickack = getattr(socket, "TCP_QUICKACK", None)
    if sock is not None and quickack is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)


async def _read_request(
    reader: asyncio.StreamReader, ack: Callable[[], None] = lambda: None
) -> RecordedRequest | None:
    ack()
    line = await reader.readline()
    if not line.strip():
        return None
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        # Not an HTTP/1.x client: e.g. a gRPC channel of an earlier test reconnecting to the
        # port this server now holds (the HTTP/2 preface, "PRI * HTTP/2.0"). Hung up on, as
        # an HTTP/1.1 server does, and not recorded.
        return None
    method, target, _version = parts
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    ack()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    path, _, query = target.partition("?")
    return RecordedRequest(method, path, query, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readline()


async def _write_reply(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Reply
) -> None:
    if reply.delay_s > 0 and not await _waited(reader, reply.delay_s):
        raise ConnectionResetError("the client closed the connection before the answer")
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:  # e.g. Anthropic's 529
        reason = "Status"
    head = [f"HTTP/1.1 {reply.status} {reason}", *(f"{k}: {v}" for k, v in reply.headers)]
    if reply.chunks is None:
        head.append(f"content-length: {len(reply.body)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)
        await writer.drain()
        return
    head.append("transfer-encoding: chunked")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    for sent, chunk in enumerate(reply.chunks):
        if sent == reply.hang_after:
            await asyncio.Event().wait()  # until `close` cancels the connection's task
        if reply.chunk_delay_s > 0:
            await asyncio.sleep(reply.chunk_delay_s)
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        await writer.drain()
    if reply.reset:
        sock = writer.get_extra_info("socket")
        if sock is not None:  # linger 0: close sends RST, not FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        raise ConnectionResetError("the fake server reset the connection mid-answer")
    writer.write(b"0\r\n\r\n")
    await writer.drain()
