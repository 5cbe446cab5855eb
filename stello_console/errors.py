"""Failures as the page sees them: JSON ``{"error": {code, message, reason}}`` with an HTTP status.

A gateway error keeps its gRPC code name and its message (the details the
gateway wrote for people); the reason comes from its ``google.rpc.ErrorInfo``
when it has one. Bad input to the console itself is INVALID_ARGUMENT naming
the field of the form.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from stello_client.errors import rpc_error_line

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 412,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
DETAILS_KEY = "grpc-status-details-bin"


class ConsoleInputError(Exception):
    """Raised when a console request is malformed (a form field of the wrong type, say)."""

    def __init__(self, message: str, status: int = 400, code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"error": {"code": self.code, "message": self.message, "reason": None}}


def rpc_error_body(error: grpc.aio.AioRpcError, gateway: str = "") -> dict[str, Any]:
    """A failed gateway call as the page's JSON error."""
    code = error.code()
    message = rpc_error_line(error, gateway, as_flags=False).partition(": ")[2] or code.name
    return {"error": {"code": code.name, "message": message, "reason": _reason(error)}}


def rpc_error_status(error: grpc.aio.AioRpcError) -> int:
    """The HTTP status of a failed gateway call."""
    return HTTP_STATUS.get(error.code(), 500)


def _reason(error: grpc.aio.AioRpcError) -> str | None:
    for key, value in error.trailing_metadata() or ():
        if key == DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return None
