"""A raw HTTP/1.1 client for the console tests: any Host, Origin or cookie, as no browser sends."""

from __future__ import annotations

import asyncio
import json
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
) -> Reply:
    """One request to 127.0.0.1:`port` (Host defaults to that address); the whole reply."""
    data = b"" if body is None else json.dumps(body).encode()
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
