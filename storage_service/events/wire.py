"""ReadEvents' request: the position to read after and the page size (at most 1000)."""

from __future__ import annotations

from stello.errors import Violations
from stello.storage.v1 import storage_pb2

MAX_EVENTS_PAGE = 1000
DEFAULT_EVENTS_PAGE = 500


def read_events(request: storage_pb2.ReadEventsRequest, v: Violations) -> tuple[int | None, int]:
    """ReadEvents' position (None: unset) and page size (default 500, at most 1000)."""
    after = request.after_position if request.HasField("after_position") else None
    if after is not None and after < 0:
        v.add("after_position", "must not be negative")
    limit = request.limit if request.HasField("limit") else DEFAULT_EVENTS_PAGE
    if not 0 <= limit <= MAX_EVENTS_PAGE:
        v.add("limit", f"must be between 0 and {MAX_EVENTS_PAGE}")
    return after, limit
