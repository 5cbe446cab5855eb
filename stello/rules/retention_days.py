"""The days a step of a retention policy takes (PutRetention; `stello retention set`).

One bound, and one sentence for a value past it, for the gateway, the tree service and
the command line: the command line checks a number no int32 field could carry before any
call, in the gateway's words.
"""

from __future__ import annotations

MAX_DAYS = 36_500
"""The most days a step waits (100 years); the least is 1."""


def days_problem(days: int) -> str | None:
    """Why a step's number of days is refused (None: fine)."""
    if 1 <= days <= MAX_DAYS:
        return None
    return f"must be within 1..{MAX_DAYS} days, got {days}"
