"""Domain errors and their one mapping to gRPC status.

The tree (its classes in `stello.error_tree`, re-exported here: import them
from this module)::

    StelloError
    ├── FieldError             (its fields named in a google.rpc.BadRequest)
    │   ├── InvalidArgument    (INVALID_ARGUMENT)
    │   └── OutOfRange         (OUT_OF_RANGE, when it names a field)
    ├── NotFound               (NOT_FOUND)
    ├── AlreadyExists          (ALREADY_EXISTS)
    ├── FailedPrecondition     (FAILED_PRECONDITION, PreconditionFailure)
    ├── Aborted                (ABORTED, PreconditionFailure when given)
    ├── Unauthenticated        (UNAUTHENTICATED)
    ├── PermissionDenied       (PERMISSION_DENIED)
    ├── ResourceExhausted      (RESOURCE_EXHAUSTED)
    ├── DeadlineExceeded       (DEADLINE_EXCEEDED)
    ├── Cancelled              (CANCELLED)
    ├── Unavailable            (UNAVAILABLE)
    └── Internal               (INTERNAL: a bug; the client sees only an error id)

Every error may carry a stable ``reason`` (sent as google.rpc.ErrorInfo).
Servers translate with `to_rpc_status`; clients translate back with
`from_rpc_error` (a status no class maps, UNKNOWN included, becomes
`Internal`). Exceptions that are no StelloError reach the kernel's error
boundary (`stello.serving.interceptors`), which answers INTERNAL with an error id and
logs them: nothing a client sees carries an exception class or driver text.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from stello.error_tree import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    FieldError,
    FieldViolation,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    PreconditionViolation,
    ResourceExhausted,
    StelloError,
    Unauthenticated,
    Unavailable,
    Violations,
    listed,
    session_archived,
    session_not_found,
    space_not_found,
)

__all__ = [
    "DESCRIPTIONS_BYTES",
    "DOMAIN",
    "MAX_DETAIL_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_VIOLATIONS",
    "REQUEST_ID_KEY",
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldError",
    "FieldViolation",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "PreconditionViolation",
    "ResourceExhausted",
    "StelloError",
    "Unauthenticated",
    "Unavailable",
    "Violations",
    "abort_with",
    "cut",
    "error_info",
    "error_info_metadata",
    "error_info_reason",
    "field_violations",
    "from_rpc_error",
    "has_status_details",
    "listed",
    "metadata_too_large",
    "new_error_id",
    "precondition_violations",
    "reply_too_large",
    "retry_delay",
    "session_archived",
    "session_not_found",
    "space_not_found",
    "to_rpc_status",
]

DOMAIN = "stello.dev"


_BY_CODE: dict[grpc.StatusCode, type[StelloError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        OutOfRange,
        AlreadyExists,
        FailedPrecondition,
        Aborted,
        Unauthenticated,
        PermissionDenied,
        ResourceExhausted,
        DeadlineExceeded,
        Cancelled,
        Unavailable,
    )
}


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


MAX_MESSAGE_BYTES = 800
"""The longest message an error carries (UTF-8 bytes; cut with "…" past it)."""
MAX_VIOLATIONS = 10
"""The most field violations an error's details list (the message says how many more)."""
MAX_DETAIL_BYTES = 200
"""The longest field path, description, subject or metadata value a detail carries (but
see DESCRIPTIONS_BYTES)."""
DESCRIPTIONS_BYTES = MAX_VIOLATIONS * MAX_DETAIL_BYTES
"""The bytes the listed field violations' descriptions share: what short ones leave goes
to long ones (each up to MAX_MESSAGE_BYTES), so a refusal listing what its field may hold
(WatchSpace's twenty event kinds, 362 bytes) arrives whole, "got 99" included, and no
status is larger than ten violations of MAX_DETAIL_BYTES made it."""
# A status travels in the trailers twice (grpc-message, and grpc-status-details-bin),
# and gRPC clients refuse trailers past 8-16 KiB (decoded sizes) with a
# RESOURCE_EXHAUSTED of their own ("received metadata size exceeds ..."), losing the
# status: an echoed value of a few KB (an unknown profile name, 100 bad tool call ids)
# did that. These bounds keep a status under 7 KiB whatever a request held.


def cut(text: str, most: int = MAX_DETAIL_BYTES) -> str:
    """`text` within `most` UTF-8 bytes: cut at a character boundary, ending in "…"."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= most:
        return text
    return encoded[: most - 3].decode("utf-8", "ignore") + "…"


def _shares(sizes: Sequence[int]) -> list[int]:
    """The bytes each of descriptions of `sizes` bytes may keep: DESCRIPTIONS_BYTES shared
    out shortest first, each kept whole when it fits an equal share of what is left, the
    longer ones cut to that share (at most MAX_MESSAGE_BYTES)."""
    left, kept = DESCRIPTIONS_BYTES, [0] * len(sizes)
    for place, index in enumerate(sorted(range(len(sizes)), key=sizes.__getitem__)):
        kept[index] = min(sizes[index], MAX_MESSAGE_BYTES, left // (len(sizes) - place))
        left -= kept[index]
    return kept


def _violations(items: Sequence[FieldViolation]) -> list[FieldViolation]:
    listed = items[:MAX_VIOLATIONS]
    kept = _shares([len(v.description.encode("utf-8", "surrogatepass")) for v in listed])
    shown = [
        FieldViolation(cut(v.field), cut(v.description, most))
        for v, most in zip(listed, kept, strict=True)
    ]
    if len(items) > MAX_VIOLATIONS:
        more = len(items) - MAX_VIOLATIONS
        shown.append(FieldViolation("", f"and {more} more violations not listed"))
    return shown


def to_rpc_status(error: StelloError) -> status_pb2.Status:
    """Build the google.rpc.Status (with details) that carries `error` on the wire, each
    text within its bound (MAX_MESSAGE_BYTES, MAX_VIOLATIONS, MAX_DETAIL_BYTES and the
    field violations' DESCRIPTIONS_BYTES)."""
    message = cut(error.message, MAX_MESSAGE_BYTES)
    details = []
    if isinstance(error, FieldError) and error.violations:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description
                )
                for v in _violations(error.violations)
            ]
        )
        details.append(_pack(bad_request))
    if isinstance(error, FailedPrecondition) and error.reason:
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=error.reason,
                    subject=cut(error.metadata.get("subject", "")),
                    description=message,
                )
            ]
        )
        details.append(_pack(failure))
    if isinstance(error, Aborted) and error.violations:
        failure = error_details_pb2.PreconditionFailure(
            violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=v.type, subject=cut(v.subject), description=cut(v.description)
                )
                for v in error.violations[:MAX_VIOLATIONS]
            ]
        )
        details.append(_pack(failure))
    if error.retry_after_s is not None and error.retry_after_s > 0:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(round(error.retry_after_s * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    if error.reason:
        info = error_details_pb2.ErrorInfo(
            reason=error.reason,
            domain=DOMAIN,
            metadata={key: cut(value) for key, value in error.metadata.items()},
        )
        details.append(_pack(info))
    return status_pb2.Status(code=error.code.value[0], message=message, details=details)


def new_error_id() -> str:
    """A new error id: what a failure's log line and the message its client gets both
    name, so that an operator finds one from the other (16 hex digits)."""
    return uuid.uuid4().hex[:16]


REQUEST_ID_KEY = "x-request-id"
"""The metadata key of a call's request id: the caller's (STELLO's clients set one on
every call), else the server's own, which a failed call's trailers carry back."""


@dataclass(frozen=True, slots=True)
class _Status(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


async def abort_with(
    context: grpc.aio.ServicerContext[Any, Any], error: StelloError, request_id: str = ""
) -> None:
    """Abort the current RPC with `error`'s status and rich details, and `request_id` (when
    given) in its trailers as ``x-request-id``: a client that set none can quote the id the
    servers' log lines of the call name."""
    status = rpc_status.to_status(to_rpc_status(error))
    trailers = tuple(status.trailing_metadata)
    if request_id:
        trailers += ((REQUEST_ID_KEY, request_id),)
    await context.abort_with_status(_Status(status.code, status.details, trailers))


def has_status_details(error: grpc.aio.AioRpcError) -> bool:
    """Whether a service answered the error itself (a Stello status, its details in the
    `grpc-status-details-bin` trailer), not the transport on either side."""
    return any(key == "grpc-status-details-bin" for key, _ in error.trailing_metadata() or ())


def reply_too_large(error: grpc.aio.AioRpcError) -> bool:
    """A RESOURCE_EXHAUSTED of the transport: a reply past a side's message limit. gRPC's
    text ("Received message larger than max (4562 vs. 4096)") names no field nor what to
    do; every Stello limit's refusal carries its status details."""
    return _transport_exhausted(error) and not metadata_too_large(error)


def metadata_too_large(error: grpc.aio.AioRpcError) -> bool:
    """A RESOURCE_EXHAUSTED of the transport for headers, not a message: a call's metadata
    (a pasted key of 20 KB, say) or a reply's trailers past gRPC's metadata limit (8 KB
    soft, 16 KB hard: "received metadata size exceeds hard limit ..."), which
    STELLO_MAX_MESSAGE_BYTES does not govern."""
    return _transport_exhausted(error) and "metadata size exceeds" in (error.details() or "")


def _transport_exhausted(error: grpc.aio.AioRpcError) -> bool:
    return error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and not has_status_details(error)


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo detail carried by an RPC error, if any."""
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def retry_delay(error: grpc.RpcError) -> float | None:
    """The seconds the RetryInfo detail of an RPC error asks a client to wait, if any."""
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToNanoseconds()) / 1e9
    return None


def error_info_reason(error: grpc.RpcError) -> str | None:
    """The ErrorInfo reason carried by an RPC error, if any."""
    info = error_info(error)
    return None if info is None else str(info.reason)


def error_info_metadata(error: grpc.RpcError) -> dict[str, str]:
    """The ErrorInfo metadata carried by an RPC error (`subject`, ...), or {}."""
    info = error_info(error)
    return {} if info is None else dict(info.metadata)


def field_violations(error: grpc.RpcError) -> list[FieldViolation]:
    """The BadRequest field violations carried by an RPC error."""
    status = rpc_status.from_call(error)
    found: list[FieldViolation] = []
    if status is None:
        return found
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return found


def precondition_violations(error: grpc.RpcError) -> list[PreconditionViolation]:
    """The PreconditionFailure violations carried by an RPC error."""
    status = rpc_status.from_call(error)
    found: list[PreconditionViolation] = []
    if status is None:
        return found
    for detail in status.details:
        if detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            detail.Unpack(failure)
            found.extend(
                PreconditionViolation(v.type, v.subject, v.description) for v in failure.violations
            )
    return found


def from_rpc_error(error: grpc.aio.AioRpcError) -> StelloError:
    """Turn a client-side RPC error back into the domain error it carries (`Internal` for a
    status no domain error maps: UNKNOWN, INTERNAL, UNIMPLEMENTED, DATA_LOSS, ...)."""
    cls = _BY_CODE.get(error.code())
    if cls is None:
        return Internal(f"{error.code().name}: {error.details()}")
    message = error.details() or error.code().name
    info = error_info(error)
    reason = None if info is None else str(info.reason)
    if issubclass(cls, FieldError):
        return cls(message, field_violations(error), reason=reason)
    # The metadata (`subject`) travels on, so a client of the gateway gets what the
    # service behind it said.
    return cls(message, reason=reason, metadata={} if info is None else dict(info.metadata))
