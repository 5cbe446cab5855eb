"""The error boundary (DESIGN §7): what a client is told when a request or a handler fails.

A request that does not parse, or holds what no text or JSON can (U+0000, a
Struct nested past 16 levels), is INVALID_ARGUMENT naming the field, after
the key is checked and before the handler; domain errors keep their status; a lost database, or one
that refuses work for a while (read-only, disk full, out of memory: `stello.db.failures.REFUSALS`),
is UNAVAILABLE naming the condition (a pooler that loses prepared statements naming
STELLO_DB_STATEMENT_CACHE_SIZE), and so is a statement the database cancelled with no
bound of ours behind it (an operator's pg_cancel_backend, a server's statement_timeout, on
Citus a worker's: the call may be retried); anything else is INTERNAL "internal error (id
...)", the id, method and traceback in the log. Nothing answers UNKNOWN. The call chain
(`stello.serving.interceptors`) applies these to every call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from google.protobuf.descriptor import Descriptor

from stello.db.failures import (
    CONNECTION_ERRORS,
    UNAVAILABLE_MESSAGE,
    refusal,
    statements_lost,
    transient,
    unavailable,
)
from stello.db.pool import lost_statements
from stello.errors import (
    FieldViolation,
    Internal,
    InvalidArgument,
    StelloError,
    Unavailable,
    new_error_id,
)
from stello.serving.wire import locate_parse_failure
from stello.validation import request_violations

log = logging.getLogger("stello.rpc")

CANCELLED_MESSAGE = (
    "the database cancelled the call's statement (an operator's cancel or a server "
    "timeout); nothing was applied: retry the call"
)


class Unparsed:
    """A request whose bytes did not parse, carried to the boundary that refuses it."""

    __slots__ = ("violation",)

    def __init__(self, violation: FieldViolation) -> None:
        self.violation = violation


def request_descriptor(deserialize: Callable[[bytes], Any] | None) -> Descriptor | None:
    """The message type a method's deserializer (``Message.FromString``) builds, if known."""
    owner = getattr(deserialize, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return descriptor if isinstance(descriptor, Descriptor) else None


def tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserialize`, answering an `Unparsed` instead of raising (grpc would say UNKNOWN)."""
    if deserialize is None:
        return None
    descriptor = request_descriptor(deserialize)

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, RecursionError: bytes we cannot read
            if descriptor is None:
                return Unparsed(FieldViolation("request", f"does not parse: {exc}"))
            return Unparsed(locate_parse_failure(descriptor, data))

    return parse


def check_request(request: Any) -> None:
    """Refuse a request that did not parse or holds what cannot be stored (InvalidArgument)."""
    if isinstance(request, Unparsed):
        raise InvalidArgument.of([request.violation])
    if hasattr(request, "ListFields"):
        found = request_violations(request)
        if found:
            raise InvalidArgument.of(found)


def client_error(exc: Exception, method: str) -> StelloError:
    """What the client is told of `exc`; internals go to the log only, under an error id."""
    if isinstance(exc, StelloError) and not isinstance(exc, Internal):
        return exc
    if isinstance(exc, CONNECTION_ERRORS) or transient(exc):
        log.warning("%s: database unavailable: %s: %s", method, exc.__class__.__name__, exc)
        return Unavailable(UNAVAILABLE_MESSAGE)
    if statements_lost(exc):  # a statement run outside a unit of work: same answer
        return lost_statements(exc)
    condition = refusal(exc)
    if condition is not None:
        log.warning("%s: %s: %s: %s", method, condition, exc.__class__.__name__, exc)
        return unavailable(exc)
    if isinstance(exc, asyncpg.QueryCanceledError):  # no bound of ours: a cancel, a timeout
        log.warning("%s: the database cancelled a statement: %s", method, exc)
        return Unavailable(CANCELLED_MESSAGE)
    error_id = new_error_id()
    log.error("internal error (id %s) in %s", error_id, method, exc_info=exc)
    return Internal(f"internal error (id {error_id})")
