"""Reading JSON text from outside the process (a client's, a model's): strict JSON, or a
ValueError.

Python's `json` reads more than JSON, and fails otherwise than its callers expect: it
takes ``NaN``, ``Infinity`` and ``-Infinity``, turns ``1e999`` into an infinite float
(none of which JSON, jsonb or another reader holds), and text nested deeper than the
interpreter's stack raises RecursionError, which no ``except ValueError`` catches. Every
reader of such text goes through `loads` or `raw_decode`, so it gets a JSON value or the
ValueError it already handles. Only `json` and `math` are imported: a client loads this.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

__all__ = ["loads", "raw_decode"]


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
            number, or nested deeper than the stack reads.
    """
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value that starts at `pos` in `text`, and the index just past it.

    Raises:
        ValueError: as `loads`.
    """
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
