"""protobuf Timestamps <-> aware datetimes, at the microsecond precision PostgreSQL keeps.

Filling a Timestamp field in place, with the arithmetic done here, costs a
third of building a Timestamp and copying it in, and ``FromDatetime`` (pure
Python in protobuf) costs more still: it shows on replies that carry a
thousand summaries or records.
"""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import timestamp_pb2

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def set_timestamp(target: timestamp_pb2.Timestamp, value: datetime) -> None:
    """Write an aware datetime into a Timestamp field in place. A naive one is what asyncpg
    reads of PostgreSQL's infinity and -infinity (`datetime.max`, `datetime.min`): written as
    those edges in UTC, so a row stored so before `stored_time` refused them still reads."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    target.seconds = delta.days * 86_400 + delta.seconds
    target.nanos = delta.microseconds * 1000


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp of an aware datetime."""
    stamp = timestamp_pb2.Timestamp()
    set_timestamp(stamp, value)
    return stamp


def from_timestamp(stamp: timestamp_pb2.Timestamp) -> datetime:
    """The aware UTC datetime of a Timestamp (microsecond precision, as PostgreSQL keeps)."""
    return stamp.ToDatetime(tzinfo=UTC)


CALENDAR_EDGES = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
"""The first and the last microsecond Python's datetime holds: asyncpg sends them as
PostgreSQL's -infinity and infinity, which read back as no time a reply can carry."""


def stored_time(stamp: timestamp_pb2.Timestamp) -> datetime:
    """The datetime of a Timestamp that a row will hold: as `from_timestamp`, the two edges
    of the calendar (0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z) refused too: stored,
    they became infinity, and every later read of the row failed.

    Raises:
        ValueError, OverflowError: not a time a row can hold (outside years 1..9999, or
            one of the edges).
    """
    value = from_timestamp(stamp)
    if value in CALENDAR_EDGES:
        raise ValueError(f"{value.isoformat()} is an edge of the calendar (stored as infinity)")
    return value
