"""Session id prefixes: what a person types instead of a whole UUID.

A prefix is 1..32 hex digits (hyphens ignored, any case). The sessions it names
are those whose id lies between the prefix padded with 0s and padded with fs:
one range of the (space_id, id) primary key, so resolving reads only the
matching rows (STYLE §17). PostgreSQL orders uuids by their bytes, which is the
order of their hex digits.
"""

from __future__ import annotations

import string
import uuid

from stello.errors import Violations

MAX_PREFIX_DIGITS = 32
DEFAULT_MATCHES = 10
MAX_MATCHES = 100
_HEX = frozenset(string.hexdigits)


def parse_prefix(value: str, violations: Violations, name: str = "prefix") -> str:
    """The prefix's hex digits, lower case; a violation naming `name` when malformed."""
    digits = value.replace("-", "").lower()
    if not digits:
        violations.add(name, "is required (the first hex digits of a session id)")
    elif len(digits) > MAX_PREFIX_DIGITS:
        violations.add(name, f"must be at most {MAX_PREFIX_DIGITS} hex digits, got {len(digits)}")
    elif not _HEX.issuperset(digits):
        violations.add(name, f"must be hex digits (0-9, a-f), got {value[:64]!r}")
    return digits


def prefix_range(digits: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest id starting with `digits` (valid hex, at most 32)."""
    low = digits.ljust(MAX_PREFIX_DIGITS, "0")
    high = digits.ljust(MAX_PREFIX_DIGITS, "f")
    return uuid.UUID(low), uuid.UUID(high)


def match_limit(value: int, violations: Violations, name: str = "limit") -> int:
    """How many matches to answer: 0 = DEFAULT_MATCHES, at most MAX_MATCHES."""
    if value < 0:
        violations.add(name, "must not be negative")
    elif value > MAX_MATCHES:
        violations.add(name, f"must be at most {MAX_MATCHES}, got {value}")
    return value or DEFAULT_MATCHES
