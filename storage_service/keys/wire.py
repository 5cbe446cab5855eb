"""Request keys on the wire: a write's request_id, a remembered result's scope and id.

A key whose scope starts with storage's own prefix is refused, so a caller can
neither write nor read under the scopes of AppendRecords, Transact and the shared
memory writes (DESIGN §2).
"""

from __future__ import annotations

from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS, fingerprint
from storage_service.models import Idempotency

MAX_SCOPE_CHARS = 100
RESERVED_SCOPE_PREFIX = "storage."
"""Storage's own idempotency scopes; callers may not write or read under them."""


def idempotency(
    request: storage_pb2.AppendRecordsRequest
    | storage_pb2.TransactRequest
    | storage_pb2.UpsertSharedMemoryEntryRequest
    | storage_pb2.RemoveSharedMemoryEntryRequest,
    v: Violations,
) -> Idempotency | None:
    """The request's idempotency key and fingerprint (request_id cleared), or None."""
    if not request.request_id:
        return None
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        v.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return Idempotency(request.request_id, fingerprint(request))


def remembered_key(scope: str, request_id: str, path: str, v: Violations) -> None:
    """Check the key of a remembered result: a caller's scope and a request id."""
    prefix = f"{path}." if path else ""
    if not scope:
        v.add(f"{prefix}scope", "is required")
    elif len(scope) > MAX_SCOPE_CHARS:
        v.add(f"{prefix}scope", f"must be at most {MAX_SCOPE_CHARS} characters")
    elif scope.startswith(RESERVED_SCOPE_PREFIX):
        v.add(f"{prefix}scope", f"must not start with {RESERVED_SCOPE_PREFIX!r} (storage's own)")
    if not request_id:
        v.add(f"{prefix}request_id", "is required")
    elif len(request_id) > MAX_REQUEST_ID_CHARS:
        v.add(f"{prefix}request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
