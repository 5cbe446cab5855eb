"""How output looks: colour only on a terminal, relative times, short ids, one-line cuts.

Colour follows the NO_COLOR convention (https://no-color.org): none when the
variable is set to anything, none when the stream is not a terminal (a pipe,
a file), else ANSI colours. Nothing here does I/O but `write`, which also makes
a closed pipe (``stello digests | head``) end the command quietly, `confirm` and
`read_stdin` (the terminal's reads, which the first Ctrl-C ends).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:  # protobuf loads with the first reply, not to parse a command line
    from google.protobuf.timestamp_pb2 import Timestamp

SHORT_ID = 8
T = TypeVar("T")
_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
ROLE_COLOURS = {"user": "cyan", "assistant": "green", "tool": "yellow", "system": "magenta"}


@dataclass(frozen=True, slots=True)
class Style:
    """ANSI colours when `colour` is on, plain text otherwise."""

    colour: bool = False

    @classmethod
    def of(cls, stream: TextIO) -> Style:
        """Colour when `stream` is a terminal and NO_COLOR is not set."""
        if os.environ.get("NO_COLOR"):
            return cls(False)
        isatty = getattr(stream, "isatty", None)
        return cls(bool(isatty and isatty()))

    def paint(self, text: str, *names: str) -> str:
        """`text` in the named colours/weights (e.g. "bold", "green")."""
        if not self.colour or not text or not names:
            return text
        codes = ";".join(_CODES[name] for name in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def dim(self, text: str) -> str:
        """Secondary text (ids, times)."""
        return self.paint(text, "dim")

    def bold(self, text: str) -> str:
        """Names (labels)."""
        return self.paint(text, "bold")

    def role(self, role: str) -> str:
        """A record role in its colour."""
        return self.paint(role, ROLE_COLOURS.get(role, "bold"))


PLAIN = Style(False)


def write(text: str = "", *, end: str = "\n", stream: TextIO | None = None) -> None:
    """Write `text` and flush (streamed deltas show as they arrive)."""
    out = stream or sys.stdout
    out.write(text + end)
    out.flush()


async def confirm(question: str, stream: TextIO | None = None) -> bool:
    """Ask `question` on stdout (or `stream`: stderr where stdout carries JSON) and read
    the answer from stdin: yes only for `y` or `yes` (Ctrl-C at the question ends the
    command at once, exit 130: `read_stdin`)."""

    def ask() -> str:
        write(f"{question} [y/N] ", end="", stream=stream)
        return sys.stdin.readline()

    return read_stdin(ask).strip().lower() in ("y", "yes")


def read_stdin(read: Callable[[], T]) -> T:
    """`read()` (a blocking read of stdin) where Ctrl-C stops it at once: KeyboardInterrupt
    (exit 130). The event loop's own Ctrl-C handler only cancels the command's task, which
    a read blocked in the kernel never notices (Python retries it after the handler), so
    the first Ctrl-C at `stello send S -`, `insight S -` or a `delete` question did
    nothing; a read in a worker thread would not end either, and the loop's close waits
    for it."""
    if threading.current_thread() is not threading.main_thread():
        return read()  # signal handlers are the main thread's
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return read()
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def short_id(session_id: str) -> str:
    """The first digits of an id: what `stello tree` shows and any command accepts."""
    return session_id[:SHORT_ID]


def one_line(text: str, width: int = 0) -> str:
    """`text` with its whitespace runs collapsed and any other control character shown as
    an escape (`\\x1b`: a label or a value written before labels were one line, or by
    another client, never moves or recolours the terminal); cut to `width` terminal
    columns when given (`cut`)."""
    flat = CONTROL.sub(_escaped, " ".join(text.split()))
    return cut(flat, width) if width else flat


def shown(text: str) -> str:
    """Stored text (a record, a prompt, a memory) as lines to print: its control characters
    shown as escapes as `one_line` shows them, but for the tab and the line breaks (a lone
    carriage return is escaped: it would draw the rest of its line over the record's head),
    so text a model or another client wrote never recolours, moves or clears the terminal."""
    return SHOWN_CONTROL.sub(_escaped, text)


SHOWN_CONTROL = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
"""The control characters `shown` escapes: `CONTROL` but for the tab, the line feed and
the carriage return of a CRLF."""


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal, for aligning columns: East Asian wide and
    full-width characters (CJK, most emoji) take two, combining marks and other
    zero-width characters none, an emoji's zero-width-joined parts none past the first
    (a family is one glyph), and a variation selector 16 widens the symbol before it to
    emoji width; colour codes are not text (strip them first).

    A text of printable ASCII and box drawing only (a tree's lines, most labels) takes a
    column per character, counted at once: the rules character by character took 50 s for
    a chain 5,000 deep (its lines' indents grow with the depth)."""
    if _NARROW.fullmatch(text):
        return len(text)
    return sum(_widths(text))


def _widths(text: str) -> Iterator[int]:
    """The columns each character of `text` adds (`display_width`'s rules), one per
    character, in order."""
    previous = 0
    joined = False
    for char in text:
        if joined:
            joined = False
            yield 0
        elif char == _ZWJ:
            joined = True
            yield 0
        elif char == _EMOJI_PRESENTATION:
            wider = previous == 1  # a narrow symbol drawn as an emoji (⚠️)
            previous = 2 if wider else previous
            yield 1 if wider else 0
        elif unicodedata.combining(char) or unicodedata.category(char) in _ZERO_WIDTH:
            yield 0
        else:
            previous = 2 if unicodedata.east_asian_width(char) in _WIDE else 1
            yield previous


def cut(text: str, width: int) -> str:
    """`text` cut to `width` terminal columns (`display_width`), its end an `…` when cut:
    a CJK preview cut by characters took twice the columns of a Latin one. It reads no
    further than the cut (a preview of a long record)."""
    room = width - 1  # the ellipsis's column, when cut
    kept = used = 0
    for count, columns in enumerate(_widths(text), 1):
        used += columns
        if used <= room:
            kept = count
        elif used > width:
            return text[:kept] + "…"
    return text


def pad(text: str, width: int) -> str:
    """`text` with spaces after it up to `width` terminal columns (`display_width`)."""
    return text + " " * max(width - display_width(text), 0)


_ZWJ = "\u200d"
_EMOJI_PRESENTATION = "\ufe0f"
_ZERO_WIDTH = ("Mn", "Me", "Cf")
_WIDE = ("W", "F")
_NARROW = re.compile("[\x20-\x7e\u2500-\u257f]*")
"""Characters of one column each whatever comes around them (`display_width`'s rules):
printable ASCII and box drawing (East Asian width narrow or ambiguous; no mark, joiner or
variation selector among them)."""


CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""What a terminal would act on rather than show (C0, DEL, C1, line and paragraph
separators)."""


def _escaped(found: re.Match[str]) -> str:
    return found.group().encode("unicode_escape").decode("ascii")


def ago(stamp: Timestamp, now: datetime | None = None) -> str:
    """How long ago `stamp` was, for people: "just now", "5 min ago", "3 days ago", a date."""
    from stello_client.dicts import when

    then = when(stamp)
    if then is None:
        return "never"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 10:
        return "just now"
    for size, unit in ((86_400, "day"), (3600, "h"), (60, "min")):
        if seconds >= size:
            count = seconds // size
            if unit == "day" and count > 30:
                return then.date().isoformat()
            plural = "s" if unit == "day" and count != 1 else ""
            return f"{count} {unit}{plural} ago"
    return f"{seconds} s ago"


def plural(count: int, word: str) -> str:
    """`1 turn`, `2 turns`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
