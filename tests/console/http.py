"""A raw HTTP/1.1 client for the console tests: any Host, Origin or cookie, as no browser sends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole HTTP answer."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    @property
    def text(self) -> str:
        """The body as text."""
        return self.body.decode()

    def events(self) -> list[tuple[str, Any]]:
        """The body as server-sent events: (name, JSON data) pairs."""
        found = []
        for block in self.text.split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in lines:
                found.append((lines["event"], json.loads(lines["data"])))
        return found


async def fetch(
    port: int,
    path: str,
    *,
    method: str = "GET",
    host: str | None = None,
    headers: dict[str, str] | None = None,
    body: Any = None,
    raw: bytes | None = None,
) -> Reply:
    """One request to 127.0.0.1:`port` (Host defaults to that address); the whole reply.
    The body is `body` as JSON, or the bytes `raw` as they stand."""
    data = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {f'127.0.0.1:{port}' if host is None else host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines += [f"Content-Length: {len(data)}", "Connection: close", "", ""]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write("\r\n".join(lines).encode() + data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    pairs = [tuple(line.split(": ", 1)) for line in header_lines]
    reply_headers = [(name, value) for name, value in pairs]
    chunked = any(k.lower() == "transfer-encoding" and v == "chunked" for k, v in reply_headers)
    return Reply(int(status_line.split()[1]), reply_headers, _dechunk(rest) if chunked else rest)


async def exchange(port: int, head: list[str], data: bytes, within_s: float = 30) -> Reply:
    """Send request line and headers `head` (Host, and nothing else, added) and then `data`
    as they are, however they disagree with each other; the reply the server gives within
    `within_s` (it may answer before the body it was promised has all come)."""
    lines = [*head[:1], f"Host: 127.0.0.1:{port}", *head[1:], "Connection: close", "", ""]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write("\r\n".join(lines).encode() + data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), within_s)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head_bytes, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
    pairs = [(k, v) for k, _, v in (line.partition(": ") for line in header_lines)]
    chunked = any(k.lower() == "transfer-encoding" and v == "chunked" for k, v in pairs)
    return Reply(int(status_line.split()[1]), pairs, _dechunk(rest) if chunked else rest)


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return out


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its name, JSON data and id (None when it has none)."""

    name: str
    data: Any
    id: str | None


class EventStream:
    """An event-stream response read as it comes: event by event, comments counted apart."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._text = ""
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.comments: list[str] = []
        self.ended = False  # the response's last chunk arrived

    @classmethod
    async def open(cls, port: int, path: str, headers: dict[str, str] | None = None) -> EventStream:
        """GET `path` on 127.0.0.1:`port`; the stream once its status line and headers are in."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        writer.write("\r\n".join([*lines, "", ""]).encode())
        await writer.drain()
        stream = cls(reader, writer)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        status_line, *header_lines = head.decode("latin-1").strip().split("\r\n")
        stream.status = int(status_line.split()[1])
        stream.headers = [(k, v) for k, _, v in (h.partition(": ") for h in header_lines)]
        return stream

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    async def next(self, within_s: float = 10.0) -> Event:
        """The next event (fails when none comes within `within_s` or the stream ends)."""
        return await asyncio.wait_for(self._next_event(), within_s)

    async def take(self, count: int, within_s: float = 10.0) -> list[Event]:
        """The next `count` events."""
        return [await self.next(within_s) for _ in range(count)]

    async def rest(self, within_s: float = 10.0) -> list[Event]:
        """Every event until the response ends."""
        found: list[Event] = []
        while True:
            try:
                found.append(await self.next(within_s))
            except EOFError:
                return found

    async def close(self) -> None:
        """Close the connection (the page going away)."""
        self._writer.close()
        await self._writer.wait_closed()

    async def _next_event(self) -> Event:
        while True:
            cut = self._text.find("\n\n")
            if cut >= 0:
                block, self._text = self._text[:cut], self._text[cut + 2 :]
                event = self._parse(block)
                if event is not None:
                    return event
                continue
            if self.ended:
                raise EOFError("the event stream ended")
            await self._read_chunk()

    def _parse(self, block: str) -> Event | None:
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
            else:
                name, _, value = line.partition(": ")
                fields[name] = value
        if "event" not in fields:
            return None
        return Event(fields["event"], json.loads(fields["data"]), fields.get("id"))

    async def _read_chunk(self) -> None:
        size_line = await self._reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        data = await self._reader.readexactly(size + 2)
        if size == 0:
            self.ended = True
        self._text += data[:size].decode()


def signed_headers(sign_in: Reply) -> dict[str, str]:
    """What the page signed in by `sign_in` (the ?token= exchange) sends with an API call:
    the cookie it set and the page key its page carries (a meta tag)."""
    cookie = (sign_in.header("set-cookie") or "").split(";", 1)[0]
    key = re.search(r'<meta name="stello-page-key" content="([^"]*)">', sign_in.text)
    return {"Cookie": cookie, "X-Stello-Page": key.group(1) if key else ""}
