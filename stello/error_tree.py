"""The domain error classes: `StelloError` and its subclasses, one per gRPC status code,
with the helpers that build the common ones and collect a request's field violations.

Their mapping to gRPC status and back is `stello.errors`, which re-exports every name
here: code imports them from there.

The tree, and what each class answers, is drawn in `stello.errors`' docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Self

import grpc

from stello import reasons


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request: its path and what is wrong with it."""

    field: str
    description: str


class StelloError(Exception):
    """Base of every error Stello maps to a gRPC status."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    maybe_applied: bool = False
    """Set by a client of another service: an attempt of the failed call got no answer
    (UNAVAILABLE, DEADLINE_EXCEEDED), so it may have been applied all the same."""
    retry_after_s: float | None = None
    """How long the client should wait before a retry (google.rpc.RetryInfo), when known:
    an LLM provider's Retry-After."""

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata or {})


class FieldError(StelloError):
    """An error that may name the request's fields it is about (google.rpc.BadRequest)."""

    def __init__(
        self,
        message: str,
        violations: Sequence[FieldViolation] = (),
        *,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, reason=reason)
        self.violations = tuple(violations)

    @classmethod
    def field(cls, name: str, description: str) -> Self:
        """An error about one field, with its message saying which."""
        return cls(f"{name}: {description}", [FieldViolation(name, description)])

    @classmethod
    def fields(cls, problems: Iterable[tuple[str, str]]) -> Self:
        """An error about several fields (name, description), its message listing each."""
        return cls.of([FieldViolation(name, description) for name, description in problems])

    @classmethod
    def of(cls, violations: Sequence[FieldViolation]) -> Self:
        """An error about `violations`, its message listing each as `field: description`
        (one form for every refusal of a request's fields, one or many)."""
        return cls(listed(violations), violations)


def listed(violations: Sequence[FieldViolation]) -> str:
    """`violations` as one message, `field: description` each, joined by "; " (the one form
    of every refusal of fields: a request's, or a command line's)."""
    return "; ".join(f"{v.field}: {v.description}" for v in violations)


class InvalidArgument(FieldError):
    """Raised when a request is malformed; lists the bad fields."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(StelloError):
    """Raised when a session, space or key does not exist for the caller."""

    code = grpc.StatusCode.NOT_FOUND


def session_not_found(session_id: object, what: str = "session") -> NotFound:
    """The one NOT_FOUND of a session the caller cannot see (reason SESSION_NOT_FOUND,
    metadata `session_id`); `what` names its role in the request ("parent session")."""
    return NotFound(
        f"{what} {session_id} not found",
        reason=reasons.SESSION_NOT_FOUND,
        metadata={"session_id": str(session_id)},
    )


def space_not_found(shown: object) -> NotFound:
    """The one NOT_FOUND of a space the key does not reach (reason SPACE_NOT_FOUND):
    another tenant's space looks exactly like one never made. The message says where the
    spaces a key reaches are listed: a key and a space id taken from two spaces is the
    usual cause, and the space itself is not gone."""
    return NotFound(
        f"space {shown} not found: name a space this key reaches "
        "(WhoAmI lists them; `stello whoami`)",
        reason=reasons.SPACE_NOT_FOUND,
        metadata={"space_id": str(shown)},
    )


class OutOfRange(FieldError):
    """Raised when a value is well formed but past what exists (a seq beyond a session's last)."""

    code = grpc.StatusCode.OUT_OF_RANGE


class AlreadyExists(StelloError):
    """Raised when a request_id is reused with a different request, or a name is taken."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(StelloError):
    """Raised when the system is not in a state that allows the operation."""

    code = grpc.StatusCode.FAILED_PRECONDITION


def session_archived(session_id: object, then: str) -> FailedPrecondition:
    """The one FAILED_PRECONDITION of an archived session (reason SESSION_ARCHIVED, metadata
    `subject` "session/<id>"): "session <id> <then>", `then` saying what happened and what
    to do ("is archived; unarchive it to rename it")."""
    return FailedPrecondition(
        f"session {session_id} {then}",
        reason=reasons.SESSION_ARCHIVED,
        metadata={"subject": f"session/{session_id}"},
    )


@dataclass(frozen=True, slots=True)
class PreconditionViolation:
    """One failed precondition of a conditional write: its kind, what it is about, and why."""

    type: str
    subject: str
    description: str


class Aborted(StelloError):
    """Raised on a concurrency conflict (turn lease taken, precondition failed)."""

    code = grpc.StatusCode.ABORTED

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
        violations: Sequence[PreconditionViolation] = (),
    ) -> None:
        super().__init__(message, reason=reason, metadata=metadata)
        self.violations = tuple(violations)


class Unauthenticated(StelloError):
    """Raised when the API key is missing, unknown or revoked."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(StelloError):
    """Raised when a valid key lacks the scope an RPC needs."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(StelloError):
    """Raised when a limit is hit (message size, rate limit upstream)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceeded(StelloError):
    """Raised when an upstream call ran past its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(StelloError):
    """Raised when the caller went away."""

    code = grpc.StatusCode.CANCELLED


class Unavailable(StelloError):
    """Raised when a dependency (database, service, LLM endpoint) cannot be reached."""

    code = grpc.StatusCode.UNAVAILABLE


class Internal(StelloError):
    """Raised when a service called answered INTERNAL or an unmapped status (a bug there).

    The message is for the log; the error boundary answers the client with an error id.
    """

    code = grpc.StatusCode.INTERNAL


@dataclass(slots=True)
class Violations:
    """Collects field violations while validating a request, then raises once."""

    items: list[FieldViolation] = field(default_factory=list)

    def add(self, name: str, description: str) -> None:
        """Record that field `name` is wrong, and why."""
        self.items.append(FieldViolation(name, description))

    def raise_if_any(self) -> None:
        """Raise InvalidArgument naming every recorded violation."""
        if self.items:
            raise InvalidArgument.of(self.items)
