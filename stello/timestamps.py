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
    """Write an aware datetime into a Timestamp field in place."""
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
