"""An enum's values in the words clients write, and the one refusal of a value not among them.

The services (`stello.validation.not_one_of`) and the SDK (`stello_client.types`) word it
alike: "must be one of active, archived, got 9". This module imports nothing but the
standard library: the SDK imports it, and `stello --help` must not load grpc with it
(tests/cli/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def enum_words(names: Sequence[str]) -> list[str]:
    """The value names of an enum whose first is its UNSPECIFIED (every Stello enum's) as
    clients write them: lowercase, without the enum's prefix, UNSPECIFIED left out."""
    prefix = names[0].removesuffix("UNSPECIFIED")
    return [name.removeprefix(prefix).lower() for name in names[1:]]


def one_of(words: Iterable[str], got: object) -> str:
    """Why a value is refused: the `words` it may be, and what was given (`got`, as shown)."""
    return f"must be one of {', '.join(words)}, got {got}"


def given(value: int) -> int | str:
    """An enum number as a refusal shows it: 0, the field left out, as "none (unset)"."""
    return "none (unset)" if value == 0 else value
