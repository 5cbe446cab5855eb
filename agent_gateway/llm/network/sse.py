"""The reading of a stream of server-sent events (the SSE standard's event stream), of its
bytes as they come: what the network providers read a streamed answer with, in place of the
SDKs' decoders (private to them: a release may rename them).

Lines end with CRLF, LF or CR (a CRLF split between two pieces is one line end). A line
starting with ``:`` is a comment. Any other line is a field, its name before the first
``:`` and its value after it (one leading space dropped): ``data`` lines are joined by a
line feed, ``event`` names the event; other fields (``id``, ``retry``) are not used here. A
blank line dispatches the event, when its data is not empty (an event with no data, or only
an empty ``data:`` keep-alive, carries nothing and is not dispatched), and starts the next.
An event cut off by the stream's end is not dispatched. A line is decoded as UTF-8, a byte
that is not read as U+FFFD.

The parser keeps what it has not dispatched yet; `Parser.pending` says how many bytes
that is (the event being read, its unended line included), for the reader to bound it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_LINE_END = re.compile(rb"\r\n?|\n")


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event: its data (never empty), and its name (None: no ``event:``)."""

    data: str
    name: str | None = None


class Parser:
    """The events of a stream's bytes, fed in pieces (see the module docstring)."""

    def __init__(self) -> None:
        self._line = bytearray()
        self._skip_lf = False
        self._data: list[str] = []
        self._name: str | None = None
        self._read = 0
        """Bytes of the event being read, in lines already ended."""

    @property
    def pending(self) -> int:
        """Bytes read since the last blank line: the event being read, its unended line too."""
        return self._read + len(self._line)

    def feed(self, piece: bytes) -> list[Event]:
        """The events `piece` ends (with what came before it)."""
        events = []
        for line in self._lines(piece):
            event = self._take(line)
            if event is not None:
                events.append(event)
        return events

    def _lines(self, piece: bytes) -> Iterator[bytes]:
        """The lines `piece` ends."""
        if not piece:
            return
        start = 1 if self._skip_lf and piece.startswith(b"\n") else 0
        for end in _LINE_END.finditer(piece, start):
            self._line += piece[start : end.start()]
            line = bytes(self._line)
            self._line.clear()
            start = end.end()
            yield line
        self._line += piece[start:]
        self._skip_lf = piece.endswith(b"\r")

    def _take(self, line: bytes) -> Event | None:
        """Read one line; the event it dispatches, if any."""
        if not line:
            data, name = "\n".join(self._data), self._name
            self._data, self._name, self._read = [], None, 0
            return Event(data, name) if data else None
        self._read += len(line) + 1
        text = line.decode("utf-8", "replace")
        if text.startswith(":"):
            return None
        field, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._name = value or None
        return None
