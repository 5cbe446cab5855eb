"""Failures as the page sees them: JSON ``{"error": {code, message, reason}}`` with an HTTP status.

A gateway error (the SDK's `RpcError`) keeps its gRPC code name and its
message, rendered by `stello_client.errors` (the one place errors become
sentences); the reason is its ``google.rpc.ErrorInfo`` reason when it has one.
A space the key does not reach is INVALID_ARGUMENT with reason SIGN_IN, naming
the sign-in form's fields (a name the SDK cannot resolve, or an id the gateway
answers NOT_FOUND SPACE_NOT_FOUND for: as for a space that does not exist),
so the page asks to sign in again. Bad input to the console itself is
INVALID_ARGUMENT naming the field of the form. A gateway that does not answer is one
plain sentence for the page: grpc core's words (addresses, "connections to all backends
failing") and command-line advice go to the console's log, not to a browser user.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from stello.reasons import SPACE_NOT_FOUND
from stello_client.errors import rpc_error_line, unanswered
from stello_client.exceptions import ConfigurationError, RpcError

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


class ConsoleInputError(Exception):
    """Raised when a console request is malformed (a form field of the wrong type, say)."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        code: str = "INVALID_ARGUMENT",
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.reason = reason

    def body(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"error": {"code": self.code, "message": self.message, "reason": self.reason}}


log = logging.getLogger("stello_console")

# What the page says when the gateway does not answer: the local console's user ran
# `stello up` themself; a deployed console's user can only wait.
UNANSWERED = {
    True: "the gateway is not answering: is `stello up` still running?",
    False: "the gateway is not answering; try again shortly",
}


def rpc_error_body(error: RpcError, gateway: str = "", *, local: bool = False) -> dict[str, Any]:
    """A failed gateway call as the page's JSON error (`local`: the console of `stello up`)."""
    code = error.code
    line = rpc_error_line(error, gateway, as_flags=False)
    if unanswered(error):
        log.warning("the gateway at %s did not answer: %s", gateway, line)
        return {"error": {"code": code.name, "message": UNANSWERED[local], "reason": None}}
    message = line.partition(": ")[2] or code.name
    return {"error": {"code": code.name, "message": message, "reason": error.reason}}


def rpc_error_status(error: RpcError) -> int:
    """The HTTP status of a failed gateway call."""
    return HTTP_STATUS.get(error.code, 500)


SIGN_IN = "SIGN_IN"  # the reason of an error that the sign-in form's fields must fix

# The SDK's settings as the sign-in form names them (the page has no `key=` nor STELLO_KEY).
PAGE_FIELDS = {
    "(key= or STELLO_KEY)": "(the API key field)",
    "space=ID": "its id in the Space id field",
}


def configuration_error(error: ConfigurationError) -> ConsoleInputError:
    """A caller the SDK cannot set up (a space the key does not reach, a key no key can be)
    as the page's error, naming the sign-in form's fields."""
    text = error.message
    for setting, page_field in PAGE_FIELDS.items():
        text = text.replace(setting, page_field)
    return ConsoleInputError(text, reason=SIGN_IN)


def unreached_space(error: RpcError, space: str) -> ConsoleInputError | None:
    """The gateway's NOT_FOUND for the space the page signed in with (a space of another key,
    or none) as a space the key does not reach; None for any other error."""
    if error.reason != SPACE_NOT_FOUND or error.info.get("space_id") != space:
        return None
    return ConsoleInputError(
        f"this key reaches no space with id {space}: check its id in the Space id field "
        "(and the API key field)",
        reason=SIGN_IN,
    )


def page_error(
    error: RpcError, gateway: str, space: str, *, local: bool
) -> tuple[dict[str, Any], int]:
    """A failed gateway call as the page's JSON error and its HTTP status, a call's or the
    live stream's alike: NOT_FOUND for `space`, the space the page signed in with ("" for the
    local console's), is a space the key does not reach (SIGN_IN)."""
    unreached = unreached_space(error, space) if space else None
    if unreached is not None:
        return unreached.body(), unreached.status
    return rpc_error_body(error, gateway, local=local), rpc_error_status(error)
