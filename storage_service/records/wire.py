"""The records room's request fields: a record's role, ListRecords' query, a trim's count.

ListRecords' bounds are exclusive and its limit unset means the largest page; a trim
must say how many records it keeps, so an unset field never empties a session.
"""

from __future__ import annotations

from stello.common.v1 import common_pb2
from stello.enum_words import given
from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import MAX_PAGE_SIZE, not_one_of, seq_bound
from storage_service.convert import ROLE_FROM_PROTO
from storage_service.models import RecordQuery, Role


def role(value: int, name: str, v: Violations, *, allow_unspecified: bool = False) -> Role | None:
    """A role enum value; UNSPECIFIED only where it means "no filter"."""
    if value == common_pb2.RECORD_ROLE_UNSPECIFIED and allow_unspecified:
        return None
    found = ROLE_FROM_PROTO.get(value)
    if found is None:
        v.add(name, not_one_of(common_pb2.RecordRole, given(value)))
    return found


def record_query(request: storage_pb2.ListRecordsRequest, v: Violations) -> RecordQuery:
    """ListRecords options: limit unset = the maximum page, 0 = none, bounds exclusive."""
    limit = request.limit if request.HasField("limit") else MAX_PAGE_SIZE
    if limit < 0:
        v.add("limit", "must not be negative")
    elif limit > MAX_PAGE_SIZE:
        v.add("limit", f"must be at most {MAX_PAGE_SIZE}, got {limit}")
    if request.offset < 0:
        v.add("offset", "must not be negative")
    return RecordQuery(
        limit=limit,
        offset=request.offset,
        role=role(request.role, "role", v, allow_unspecified=True),
        after_seq=seq_bound(request, "after_seq", v),
        before_seq=seq_bound(request, "before_seq", v),
        newest_first=request.newest_first,
        page_token=request.page_token,
    )


def keep_recent(present: bool, value: int, name: str, v: Violations) -> int:
    """A trim's keep_recent: required and non-negative."""
    if not present:
        v.add(name, "is required (how many of the newest records to keep)")
    elif value < 0:
        v.add(name, "must not be negative")
    return value
