"""Reading JSON text from outside the process (a client's, a model's): strict JSON, or a
ValueError.

Python's `json` reads more than JSON, and fails otherwise than its callers expect: it
takes ``NaN``, ``Infinity`` and ``-Infinity``, turns ``1e999`` into an infinite float
(none of which JSON, jsonb or another reader holds), and text nested deeper than the
interpreter's stack raises RecursionError, which no ``except ValueError`` catches — at a
depth that depends on how deep the caller's own stack is. Every reader of such text goes
through `loads` or `raw_decode`, so it gets a JSON value or the ValueError it already
handles, and the same nesting limit wherever it reads (`MAX_DEPTH`). Only `json`, `math`
and `re` are imported: a client loads this.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

__all__ = ["MAX_DEPTH", "loads", "raw_decode"]

MAX_DEPTH = 512
"""The deepest nesting of arrays and objects read: the same for every caller, within what
Python's json reads (the interpreter's recursion limit, 1,000 frames, less its caller's
stack: a request handler's is far below the other 488) and PostgreSQL's jsonb."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:32]} is larger than a double holds")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def loads(text: str | bytes | bytearray) -> Any:
    """The JSON value `text` holds (bytes: UTF-8, -16 or -32, as `json.loads` reads them).

    Raises:
        ValueError: not JSON (json.JSONDecodeError, UnicodeDecodeError), a NaN or infinite
            number, or arrays and objects nested deeper than `MAX_DEPTH`.
    """
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    _check_depth(text, 0)
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value that starts at `pos` in `text`, and the index just past it.

    Raises:
        ValueError: as `loads`.
    """
    _check_depth(text, pos)
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


_TOO_DEEP = f"nested too deeply to read (at most {MAX_DEPTH} levels of arrays and objects)"


def _check_depth(text: str, pos: int) -> None:
    """Raise ValueError when the value at `pos` nests arrays and objects deeper than
    `MAX_DEPTH` (brackets inside strings do not count; a text with fewer brackets than
    that in all is not scanned)."""
    if text.count("[", pos) + text.count("{", pos) <= MAX_DEPTH:
        return
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text[pos:])):
        if bracket.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(_TOO_DEEP)
        else:
            depth -= 1
            if depth <= 0:
                return  # the end of the value (what follows is not its)
