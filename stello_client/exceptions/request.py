"""The request refused for what it holds or names: INVALID_ARGUMENT and OUT_OF_RANGE (its
fields), NOT_FOUND (what it names is not there), ALREADY_EXISTS (a request_id reused).

Nothing was done; the class says what to change (a field, an id, a request_id).
"""

from __future__ import annotations

import grpc

from stello_client.exceptions.base import FieldError, RpcError


class InvalidArgument(FieldError):
    """Raised when the gateway refused the request's fields; `field` names the first."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RpcError):
    """Raised when a session (or entry, profile root...) is not in the space."""

    code = grpc.StatusCode.NOT_FOUND


class RequestErased(NotFound):
    """Raised when a request_id answered earlier for a session deleted since: nothing was
    done; a new request_id does the request again."""


class SessionNotFound(NotFound):
    """Raised when no session of that id is visible to the key (never made, deleted, still
    provisional, or another space's); `info["session_id"]` names it."""


class SpaceNotFound(NotFound):
    """Raised when the key reaches no space of that id (never made, deleted, or another
    tenant's); `info["space_id"]` names it."""


class SharedMemoryEntryNotFound(NotFound):
    """Raised when the space holds no shared memory entry of that slug; `info["slug"]` names
    it."""


class AlreadyExists(RpcError):
    """Raised when something of that identity exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class RequestIdReused(AlreadyExists):
    """Raised when a request_id came earlier with a different request."""


class OutOfRange(FieldError):
    """Raised when a value is past the end of what exists (fork's `inherit_until_seq`
    beyond the source's last seq); `field` names it."""

    code = grpc.StatusCode.OUT_OF_RANGE
