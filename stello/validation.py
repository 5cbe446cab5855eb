"""Request validation helpers shared by the servicers (proto -> domain input)."""

from __future__ import annotations

import uuid

from stello.errors import InvalidArgument, Violations

MAX_LABEL_CHARS = 200
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def parse_uuid(value: str, name: str, violations: Violations | None = None) -> uuid.UUID:
    """Parse a UUID field; record (or raise) a violation naming the field when malformed."""
    try:
        if not value:
            raise ValueError
        return uuid.UUID(value)
    except ValueError:
        description = "is required" if not value else f"must be a UUID, got {value[:64]!r}"
        if violations is None:
            raise InvalidArgument.field(name, description) from None
        violations.add(name, description)
        return uuid.UUID(int=0)


def page_size(value: int, violations: Violations, name: str = "page_size") -> int:
    """Resolve a page size: 0 = the default, negative or above the maximum = a violation."""
    if value < 0:
        violations.add(name, "must not be negative")
    elif value > MAX_PAGE_SIZE:
        violations.add(name, f"must be at most {MAX_PAGE_SIZE}, got {value}")
    return value or DEFAULT_PAGE_SIZE


def label(value: str, violations: Violations, name: str = "label") -> str:
    """Check a label: 1..200 characters."""
    if not value.strip():
        violations.add(name, "must not be empty")
    elif len(value) > MAX_LABEL_CHARS:
        violations.add(name, f"must be at most {MAX_LABEL_CHARS} characters, got {len(value)}")
    return value
