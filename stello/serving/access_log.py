"""A finished call's access line, beside the call chain (`stello.serving.interceptors`): the status
the call ended with as the client saw it (`outcome`) and the level its line is written at
(`AccessLog`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from stello.settings import StelloSettings

if TYPE_CHECKING:
    from stello.serving.interceptors import Context

DEADLINE_SLACK_S = 0.1
"""A call cancelled this close to its deadline was cancelled by the deadline."""


def outcome(context: Context, error: BaseException | None) -> grpc.StatusCode:
    """The status a finished call ended with, as the client saw it.

    A handler the client abandoned is cancelled by grpc, with no status set:
    CANCELLED, or DEADLINE_EXCEEDED when its deadline had passed (or was due
    within `DEADLINE_SLACK_S`). A stream the client left while its messages
    flowed is closed by grpc at a `yield` (GeneratorExit, not CancelledError),
    before `context.cancelled()` says so: the same. A handler that returned is OK
    unless its deadline had passed by then (the reply came too late): one that
    answered with less than the slack left was answered in time.
    """
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return code
    remaining = context.time_remaining()
    # The client's own deadline timer cancels the call a moment before the server's fires.
    expired = remaining is not None and remaining <= DEADLINE_SLACK_S
    if isinstance(error, asyncio.CancelledError | GeneratorExit) or context.cancelled():
        return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
    if error is not None:
        return grpc.StatusCode.UNKNOWN
    late = remaining is not None and remaining <= 0
    return grpc.StatusCode.DEADLINE_EXCEEDED if late else grpc.StatusCode.OK


@dataclass(frozen=True, slots=True)
class AccessLog:
    """At which level a call's access line is written (``rpc METHOD CODE 1.2ms``)."""

    every_call: bool = False
    """INFO for every call (``STELLO_ACCESS_LOG=1``); else DEBUG for a fast OK call."""
    slow_s: float = 1.0
    """A call at least this long is INFO (``STELLO_SLOW_CALL_MS``)."""

    @classmethod
    def of(cls, settings: StelloSettings) -> AccessLog:
        """The access log `settings` ask for."""
        return cls(settings.access_log, settings.slow_call_ms / 1000)

    def level(self, code: grpc.StatusCode, seconds: float) -> int:
        """INFO for what someone should see (a failure, a slow call), else DEBUG."""
        if self.every_call or code is not grpc.StatusCode.OK or seconds >= self.slow_s:
            return logging.INFO
        return logging.DEBUG
