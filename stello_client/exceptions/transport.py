"""The call did not get through or finish: UNAVAILABLE (and OutcomeUnknown, a turn that may
be stored), DEADLINE_EXCEEDED, CANCELLED, and INTERNAL for a gateway bug or any status
without a class of its own.
"""

from __future__ import annotations

import grpc

from stello_client.exceptions.base import RpcError


class Unavailable(RpcError):
    """Raised when the gateway (or what it calls) could not be reached (retried first)."""

    code = grpc.StatusCode.UNAVAILABLE


class LlmUnavailable(Unavailable):
    """Raised when the LLM provider could not be reached or failed."""


class OutcomeUnknown(Unavailable):
    """Raised when a turn's answer was lost and it may have been stored, once (send,
    stream, submit_tool_results, submit_tool_results_stream).

    Unlike the other UNAVAILABLE failures it does not say nothing was written, so it is
    retried only with the call's own `request_id`, which answers the stored turn or runs
    it if it was not stored (the SDK's turns always carry one). Raised once the retries
    are spent, or by a stream after its first event: repeat the call with the same
    `request_id` (the error's), or read the session's records before sending it anew.
    """


class DeadlineExceeded(RpcError):
    """Raised when the call's deadline passed (the SDK's timeout, or the gateway's own).

    Attributes:
        timeout_s: when this client's own deadline is what passed (gRPC ended the call at
            it), the seconds the call was given; None for a bound of the gateway's (its
            message says which) or a deadline not known to have passed here.
    """

    code = grpc.StatusCode.DEADLINE_EXCEEDED
    timeout_s: float | None = None


class LlmTimeout(DeadlineExceeded):
    """Raised when the LLM provider did not answer in time."""


class Cancelled(RpcError):
    """Raised when the call was cancelled (by the gateway, or by the client's close() while
    it ran or paused between retries)."""

    code = grpc.StatusCode.CANCELLED


class Internal(RpcError):
    """Raised for INTERNAL (a gateway bug: `details` carries its error id) and any status
    without a class of its own."""

    code = grpc.StatusCode.INTERNAL
