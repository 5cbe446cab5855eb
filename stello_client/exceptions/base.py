"""The roots of what the SDK raises: `StelloClientError`, `ConfigurationError`, `RpcError`
(a failed call: its code, reason, details, request id) and `FieldError` (one naming the
request's fields).

Every class below them adds only its status code or its reason, so a program catches a
family by its root; `StelloClientError.__reduce__` pickles any of them by message and
attributes, whatever its `__init__` takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request (google.rpc.BadRequest): its name and what is wrong."""

    field: str
    description: str


class StelloClientError(Exception):
    """Base of everything the SDK raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the message and the attributes, whatever the class's `__init__` takes
        (multiprocessing, a process pool, a task queue's results pass errors so)."""
        return _rebuilt, (type(self), self.args), self.__dict__


def _rebuilt(cls: type[StelloClientError], args: tuple[Any, ...]) -> StelloClientError:
    """An error of `cls` with `args`, its `__init__` not called (pickle then sets its
    attributes)."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class ConfigurationError(StelloClientError):
    """Raised when the client cannot be set up: no gateway address or key, unreadable TLS
    files, a space the key does not reach, or a client used on an event loop other than
    the one its channel is open on, or a sync client used in a process forked from the one
    that made it (`setting` names which: gateway, key, space, tls, loop, process)."""

    def __init__(self, message: str, *, setting: str) -> None:
        super().__init__(message)
        self.message = message
        self.setting = setting


class RpcError(StelloClientError):
    """Raised when a gateway call failed.

    Attributes:
        code: the gRPC status code.
        details: the gateway's message, for people.
        reason: the google.rpc.ErrorInfo reason (`stello.reasons`), or None.
        info: the ErrorInfo's metadata: what the reason is about (a SessionNotFound's
            ``session_id``), or {}.
        retry_after_s: how long to wait before a retry (google.rpc.RetryInfo: an LLM
            provider's Retry-After), or None.
        request_id: the id the call carried (``x-request-id``, and the request's
            own `request_id` for a write): the gateway's log lines name it.
        method: the RPC's name (``Send``).
        violations: the field violations of an INVALID_ARGUMENT, or of an OUT_OF_RANGE
            naming its field.
        cause: the grpc error itself (its trailers, for what this class does not read).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        details: str,
        *,
        code: grpc.StatusCode | None = None,
        reason: str | None = None,
        info: Mapping[str, str] | None = None,
        retry_after_s: float | None = None,
        request_id: str = "",
        method: str = "",
        violations: Sequence[FieldViolation] = (),
        cause: grpc.aio.AioRpcError | None = None,
    ) -> None:
        self.code = code or type(self).code
        self.details = details
        self.reason = reason
        self.info = dict(info or {})
        self.retry_after_s = retry_after_s
        self.request_id = request_id
        self.method = method
        self.violations = tuple(violations)
        self.cause = cause
        super().__init__(f"{self.code.name}: {details}" if details else self.code.name)

    def _retell(self, details: str) -> None:
        """Replace the details, and the message that shows them (a hint added on the way)."""
        self.details = details
        self.args = (f"{self.code.name}: {details}" if details else self.code.name,)


class FieldError(RpcError):
    """Base of the failures that name the request's field at fault: `field`, the first."""

    @property
    def field(self) -> str | None:
        """The first bad field (the keyword argument of the same name), or None."""
        return self.violations[0].field if self.violations else None
