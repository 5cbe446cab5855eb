"""Where each table and key of a TOML document is, for errors that name a line.

`tomllib` gives a parsed document no positions, so an error found by
validating it (a wrong type, an unknown key) could only say ``profiles.0.x``.
`key_places` scans the text once more, after `tomllib` has accepted it, and
maps each key path (``("profiles", 0, "name")``, the same path pydantic's
``loc`` gives) to its 1-based line and column: the scan only has to tell keys
and table headers from strings, comments and values spread over lines, since
the syntax is known to be valid.

Tables written inline (``profiles = [{name = "a"}]``) are not scanned inside:
their keys are placed at the key holding them, and `TomlPlaces.line` answers
the nearest place it knows.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

KeyPath = tuple[str | int, ...]
"""A key's path from the document's root: table and key names, array-of-tables indexes."""

_TOKEN = re.compile(
    r'(?P<text>"""(?:[^\\]|\\.)*?"""(?!")'  # multi-line strings, up to two quotes at the end
    r"|'''.*?'''(?!')"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*')"
    r"|(?P<comment>\#[^\n]*)"
    r"|(?P<newline>\n)"
    r"|(?P<space>[ \t\r]+)"
    r"|(?P<punct>[\[\]{}=,.])"
    r"|(?P<bare>[^\s\[\]{}=,.\#\"']+)",
    re.DOTALL,
)

_Token = tuple[str, str, int]
"""(kind, text, offset in the document)."""


def key_places(text: str) -> dict[KeyPath, tuple[int, int]]:
    """The 1-based (line, column) of each table header and key of `text`, valid TOML.

    An array of tables' entry is placed at its ``[[header]]``, under the path
    with its index; a key at its first character.
    """
    tokens = [
        (str(m.lastgroup), m.group(), m.start())
        for m in _TOKEN.finditer(text)
        if m.lastgroup not in ("space", "comment")
    ]
    places: dict[KeyPath, tuple[int, int]] = {}
    counts: dict[KeyPath, int] = {}
    table: KeyPath = ()
    i = 0
    while i < len(tokens):
        kind, value, start = tokens[i]
        if kind == "newline":
            i += 1
        elif value == "[" and kind == "punct":
            table, i = _header(tokens, i, counts)
            places.setdefault(table, _position(text, start))
        else:
            keys, i = _keys(tokens, i)
            places.setdefault(table + keys, _position(text, start))
            i = _past_value(tokens, i + 1)
    return places


def _header(tokens: Sequence[_Token], i: int, counts: dict[KeyPath, int]) -> tuple[KeyPath, int]:
    """The path of the ``[table]`` or ``[[array]]`` header at `i`, and the index past it."""
    start = tokens[i][2]
    many = i + 1 < len(tokens) and tokens[i + 1][1] == "[" and tokens[i + 1][2] == start + 1
    keys, i = _keys(tokens, i + (2 if many else 1))
    path: list[str | int] = []
    for place, key in enumerate(keys):
        path.append(key)
        if many and place == len(keys) - 1:
            count = counts.get(tuple(path), 0)
            counts[tuple(path)] = count + 1
            path.append(count)
        elif tuple(path) in counts:
            path.append(counts[tuple(path)] - 1)  # the latest entry of that array of tables
    return tuple(path), i + (2 if many else 1)


def _keys(tokens: Sequence[_Token], i: int) -> tuple[tuple[str, ...], int]:
    """The (dotted) key starting at `i`, and the index of the ``=`` or ``]`` after it."""
    keys: list[str] = []
    while i < len(tokens) and tokens[i][1] not in ("=", "]"):
        kind, value, _ = tokens[i]
        if kind in ("bare", "text"):
            keys.append(_unquoted(value) if kind == "text" else value)
        i += 1
    return tuple(keys), i


def _unquoted(key: str) -> str:
    """A quoted key's name (TOML's own escapes, read by `tomllib`)."""
    name = tomllib.loads(f"k = {key}")["k"]
    return name if isinstance(name, str) else key


def _past_value(tokens: Sequence[_Token], i: int) -> int:
    """The index of the line end after the value starting at `i` (arrays may span lines)."""
    depth = 0
    while i < len(tokens):
        kind, value, _ = tokens[i]
        if kind == "newline" and depth == 0:
            return i
        if kind == "punct" and value in "[{":
            depth += 1
        elif kind == "punct" and value in "]}":
            depth -= 1
        i += 1
    return i


def _position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of `offset` in `text`."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


class TomlPlaces:
    """The places of one file's keys, and where a key path is in words."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        """The file's name as errors give it."""
        self._places = key_places(text)

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, else of its nearest enclosing key or entry that has one
        (a missing key is placed at its entry); None when not even the first is known."""
        for end in range(len(path), 0, -1):
            place = self._places.get(path[:end])
            if place is not None:
                return place[0]
        return None

    def at(self, path: KeyPath) -> str:
        """``FILE line N`` for `path` (``FILE`` alone when no line is known)."""
        line = self.line(path)
        return self.source if line is None else f"{self.source} line {line}"
