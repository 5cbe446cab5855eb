"""What a shared memory entry may hold (DESIGN §4.5), checked by storage and the gateway alike.

The index of a space's entries is rendered into every turn's context one line
per entry (``- <slug>: <summary>``), so a slug and a summary are one line each:
no control characters, no line breaks. A slug is a key, compared exactly, so
it carries no white space at its ends either (the memory tools trim what the
model sends before checking it). The gateway checks the same rules before it
calls storage, so a refused request never reaches a write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from stello.errors import Violations
from stello.rules.tokens import estimate_tokens
from stello.validation import has_control

MAX_SLUG_CHARS = 128
MAX_SUMMARY_CHARS = 1000


def slug_problem(slug: str) -> str | None:
    """Why `slug` is not a valid slug, or None."""
    if not slug:
        return "is required"
    if len(slug) > MAX_SLUG_CHARS:
        return f"must be at most {MAX_SLUG_CHARS} characters, got {len(slug)}"
    if slug != slug.strip():
        return "must not start or end with white space"
    if has_control(slug):
        return "must not contain control characters or line breaks"
    return None


def summary_problem(summary: str) -> str | None:
    """Why `summary` is not a valid summary, or None."""
    if not summary.strip():
        return "must not be empty"
    if len(summary) > MAX_SUMMARY_CHARS:
        return f"must be at most {MAX_SUMMARY_CHARS} characters, got {len(summary)}"
    if has_control(summary):
        return "must be one line (no control characters or line breaks)"
    return None


def body_problem(body: str, max_bytes: int) -> str | None:
    """Why `body` is not a valid body (1 byte up to `max_bytes`), or None."""
    if not body:
        return "must not be empty"
    size = len(body.encode())
    if size > max_bytes:
        return f"is {size} bytes, over the limit of {max_bytes}"
    return None


def check_slug(slug: str, violations: Violations, name: str = "slug") -> str:
    """Add a violation under `name` when `slug` breaks the slug rules."""
    problem = slug_problem(slug)
    if problem:
        violations.add(name, problem)
    return slug


def check_entry(
    slug: str, summary: str, body: str, max_body_bytes: int, violations: Violations
) -> None:
    """Add a violation per field of an upsert that breaks the rules."""
    check_slug(slug, violations)
    for name, problem in (
        ("summary", summary_problem(summary)),
        ("body", body_problem(body, max_body_bytes)),
    ):
        if problem:
            violations.add(name, problem)


def index_line(slug: str, summary: str) -> str:
    """An entry's line in the index of spec §4.9 item 7 (without its line break)."""
    return f"- {slug}: {summary}"


class _Indexed(Protocol):
    @property
    def slug(self) -> str: ...

    @property
    def summary(self) -> str: ...


def index_cut(entries: Sequence[_Indexed], max_tokens: int) -> int:
    """How many of `entries` (in order) the index shows within `max_tokens`: their lines,
    each with its line break, estimated by `stello.rules.tokens` (storage budgets with it, the
    gateway renders with it)."""
    used = 0
    for count, entry in enumerate(entries):
        used += estimate_tokens(index_line(entry.slug, entry.summary) + "\n")
        if used > max_tokens:
            return count
    return len(entries)
