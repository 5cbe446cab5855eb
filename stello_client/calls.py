"""The call path every SDK method takes: the key, a request id, the deadline, safe retries.

- The key travels in every call's metadata (grpc.aio's channel interceptors
  see unary calls only, so it is never left to the channel), with an
  ``x-request-id`` the gateway's log lines carry: the request's own
  `request_id` for a write that has one, else a new id per call (its retries
  keep it). A header carries printable ASCII only: a request_id with another
  character (é, a line break) travels percent-encoded in the header
  (`header_request_id`), unchanged in the request.
- The deadline covers the whole call, retries and their pauses included.
- Only safe calls are retried: reads, and writes that carry a `request_id`
  (the gateway answers a repeated one with the first reply, nothing done
  twice). A failure is retried when it says to: UNAVAILABLE (the gateway or
  what it calls was unreachable), and the reasons TURN_IN_PROGRESS (a lease
  still held, by this very call's first attempt perhaps), SPACE_BUSY (the space's
  calls in progress at the server's cap: nothing was done) and LLM_RATE_LIMITED,
  with exponential backoff and jitter, never past the deadline (the SDK's
  channel reconnects after 0.1 s, then backs off up to 2 s, so a restarted
  gateway is reached within a pause or two).
- A turn the LLM provider failed (LLM_RATE_LIMITED, LLM_UNAVAILABLE) was
  already retried by the gateway (STELLO_LLM_MAX_RETRIES, waiting out the
  provider's Retry-After): it is tried `Retry.llm_attempts` times in all (one
  more by default), after the wait the failure names (RetryInfo) when it is
  longer than the backoff, so a rate limit is not hammered (explore10 F6: 24
  provider requests for one Send).
- UNAVAILABLE with reason OUTCOME_UNKNOWN says the write may have been
  stored: it is retried only by a call that carries the request's own
  `request_id` (the repeat answers the stored write, or does it if it was
  not stored), never by one without, which could store it twice.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from stello import reasons
from stello.errors import REQUEST_ID_KEY
from stello_client.exceptions.base import RpcError
from stello_client.exceptions.translate import GRPC_DEADLINES, from_rpc_error
from stello_client.exceptions.transport import DeadlineExceeded

T = TypeVar("T")

RETRIED_REASONS = frozenset(
    {reasons.TURN_IN_PROGRESS, reasons.LLM_RATE_LIMITED, reasons.SPACE_BUSY}
)


def is_number(value: object) -> bool:
    """Whether `value` is an int or a float (not a bool): what a number argument may be; any
    other type is the caller's TypeError."""
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Retry:
    """How safe calls are retried.

    Attributes:
        attempts: tries in all (1 = no retry at all: neither `busy_for_s` nor
            `unavailable_for_s` then tries again).
        llm_attempts: tries in all of a turn the LLM provider failed (LLM_RATE_LIMITED,
            LLM_UNAVAILABLE), at most `attempts`: the gateway has retried the provider
            already.
        initial_backoff_s: the first pause; each next one `multiplier` times longer.
        max_backoff_s: the longest pause.
        multiplier: how the pause grows.
        busy_for_s: how long after the first attempt a session another turn holds
            (`TURN_IN_PROGRESS`) is still tried, past `attempts`, at `max_backoff_s`:
            a turn whose gateway died holds its session for at most the gateway's
            `STELLO_GATEWAY_TURN_LEASE_TTL_S` (10 s by default), and the retry with
            the same request_id then takes it over. 0: `attempts` alone.
        unavailable_for_s: how long after the first attempt an UNAVAILABLE that names
            no reason (the gateway or its database out of reach: a restart, a failover)
            is still tried, past `attempts`, at `max_backoff_s`: a gateway restarting
            takes a few seconds, longer than `attempts`' pauses (3.6-7.1 s by default)
            may cover. 0: `attempts` alone.
    """

    attempts: int = 8
    llm_attempts: int = 2
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    busy_for_s: float = 12.0
    unavailable_for_s: float = 15.0

    def __post_init__(self) -> None:
        """Refuse a field no retry loop can use, naming it.

        Raises:
            TypeError: tries not an int, a pause, a duration or the multiplier not a
                number (text, None, a bool), naming it.
            ValueError: tries below 1, a pause or a duration not a finite number of
                seconds of 0 or more, a multiplier below 1, naming it.
        """
        for name in ("attempts", "llm_attempts"):
            tries = getattr(self, name)
            whole = isinstance(tries, int) and not isinstance(tries, bool)
            if not whole or tries < 1:
                raise (ValueError if whole else TypeError)(
                    f"Retry({name}={tries!r}): expected a whole number of tries, 1 or more "
                    "(1: never retry)"
                )
        for name in ("initial_backoff_s", "max_backoff_s", "busy_for_s", "unavailable_for_s"):
            seconds = getattr(self, name)
            if not is_number(seconds) or not math.isfinite(seconds) or seconds < 0:
                raise (ValueError if is_number(seconds) else TypeError)(
                    f"Retry({name}={seconds!r}): expected a finite number of seconds, 0 or more"
                )
        multiplier = self.multiplier
        if not is_number(multiplier) or not math.isfinite(multiplier) or multiplier < 1:
            raise (ValueError if is_number(multiplier) else TypeError)(
                f"Retry(multiplier={multiplier!r}): expected a number of 1 or more (how much "
                "longer each pause is than the last)"
            )

    def pause(self, attempt: int) -> float:
        """The pause after failed attempt `attempt` (1-based), with jitter (half to all of it)."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)  # spreads retries; no secret


NO_RETRY = Retry(attempts=1)


def retry_of(retry: Retry | None) -> Retry:
    """A client's `retry=`: the given Retry, or the default.

    Raises:
        TypeError: anything else (`retry=3`, meant as attempts), naming the argument.
    """
    if retry is None:
        return Retry()
    if not isinstance(retry, Retry):
        raise TypeError(f"retry: expected a stello_client.Retry (Retry(attempts=3)), got {retry!r}")
    return retry


def retryable(error: RpcError, *, keyed: bool) -> bool:
    """Whether a safe call that failed so may be tried again; `keyed`: the request carries
    its own request_id (a write the gateway answers once)."""
    if error.reason == reasons.OUTCOME_UNKNOWN:
        return keyed
    return error.code == grpc.StatusCode.UNAVAILABLE or error.reason in RETRIED_REASONS


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")
"""What a header value holds as it is (gRPC: printable ASCII), but the percent sign, which
escapes the rest."""


def header_request_id(request_id: str) -> str:
    """`request_id` as an ``x-request-id`` header can carry it: itself when it is printable
    ASCII, else percent-encoded (UTF-8), so that the gateway's log lines still name it
    (gRPC refuses any other character in a header, failing the call before it is sent)."""
    if all(" " <= c <= "~" for c in request_id):
        return request_id
    return urllib.parse.quote(request_id, safe=HEADER_SAFE)


class Deadline:
    """The end of a call's time (None: no deadline), and what is left of it."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        """The seconds the call was given (None: no deadline)."""
        self.began = time.monotonic()
        self._end = None if timeout is None else self.began + timeout

    def left(self) -> float | None:
        """Seconds left (never below a millisecond, so grpc still answers DEADLINE_EXCEEDED)."""
        return None if self._end is None else max(self._end - time.monotonic(), 0.001)

    def allows(self, pause: float) -> bool:
        """Whether a pause of `pause` seconds still leaves time for another attempt."""
        return self._end is None or time.monotonic() + pause < self._end

    def passed(self) -> bool:
        """Whether the deadline has passed (within `CLOCK_SLACK_S`: gRPC counts it on its
        own clock), so a DEADLINE_EXCEEDED in gRPC's words is this deadline's."""
        return self._end is not None and time.monotonic() >= self._end - CLOCK_SLACK_S


CLOCK_SLACK_S = 0.005
"""How much earlier than `Deadline`'s own count gRPC may end a call at its deadline (it
converts the timeout to a wall-clock deadline, and rounds it to milliseconds)."""


@dataclass(frozen=True, slots=True)
class CallOptions:
    """One call's metadata, deadline and retry policy; `keyed`: the request carries
    `request_id` as its own (an idempotent write)."""

    metadata: tuple[tuple[str, str], ...]
    request_id: str
    deadline: Deadline
    retry: Retry
    method: str
    keyed: bool = False
    safe: bool = False


def call_options(
    key: str,
    method: str,
    *,
    timeout: float | None,
    retry: Retry,
    safe: bool,
    request_id: str = "",
) -> CallOptions:
    """The options of one call of `method`; an unsafe one is never retried. `request_id`:
    the one the request carries (a write's idempotency key), else none."""
    rid = request_id or new_request_id()
    metadata = (("authorization", f"Bearer {key}"), (REQUEST_ID_KEY, header_request_id(rid)))
    policy = retry if safe else NO_RETRY
    return CallOptions(metadata, rid, Deadline(timeout), policy, method, bool(request_id), safe)


async def unary(call: Callable[..., Awaitable[T]], request: Any, opts: CallOptions) -> T:
    """One unary call with its retries; a failure raises the SDK's exception."""
    attempt = 1
    while True:
        try:
            return await call(request, timeout=opts.deadline.left(), metadata=opts.metadata)
        except grpc.aio.AioRpcError as exc:
            error = failure(exc, opts)
        await before_retry(error, attempt, opts)
        attempt += 1


TURNS = frozenset({"Send", "SendStream", "SubmitToolResults", "SubmitToolResultsStream"})


def failure(exc: grpc.aio.AioRpcError, opts: CallOptions) -> RpcError:
    """The SDK exception of a failed attempt (`from_rpc_error`); a deadline gRPC ended
    with its own words says what it means for the call, and whether a retry is safe, and
    when the call's own deadline is the one that passed, its `timeout_s`."""
    error = from_rpc_error(exc, method=opts.method, request_id=opts.request_id)
    if (
        not isinstance(error, DeadlineExceeded)
        or error.reason
        or error.details not in GRPC_DEADLINES
    ):
        return error
    passed = DeadlineExceeded(
        deadline_passed(opts),
        code=error.code,
        request_id=error.request_id,
        method=error.method,
        cause=exc,
    )
    if opts.deadline.passed():
        passed.timeout_s = opts.deadline.timeout
    return passed


def own_timeout(exc: grpc.aio.AioRpcError, deadline: Deadline) -> float | None:
    """The seconds `deadline` gave a call that gRPC ended at that deadline (in its own
    words, the deadline passed here); None for any other failure, a server's bound too."""
    own = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and exc.details() in GRPC_DEADLINES
    return deadline.timeout if own and deadline.passed() else None


def deadline_passed(opts: CallOptions) -> str:
    """Why a call ended DEADLINE_EXCEEDED with gRPC's words: its own deadline passed before
    the gateway answered, and what a retry does."""
    given = opts.deadline.timeout
    seconds = "" if given is None else f" (timeout={given:g} s, retries included)"
    text = f"the call's deadline passed{seconds} before the gateway answered"
    if opts.method in TURNS:
        return (
            f'{text}: a turn still waiting in the session\'s line (busy="enqueue") left it '
            "and wrote nothing, a running one stored nothing unless its commit was under "
            f"way; a retry with the same request_id ({opts.request_id}) is safe: it answers "
            "the stored turn if there is one, else runs the turn once"
        )
    if opts.keyed:
        return (
            f"{text}, so whether it was done is not known; a retry with the same request_id "
            f"({opts.request_id}) is safe: it answers what was done, else does it once"
        )
    if opts.safe:
        return f"{text}; a read changes nothing: retry it, or give it a longer timeout"
    return (
        f"{text}, so whether it was done is not known (this call carries no request_id): "
        "read the state before doing it again"
    )


LLM_REASONS = frozenset({reasons.LLM_RATE_LIMITED, reasons.LLM_UNAVAILABLE})
"""The provider failures the gateway has retried already (`Retry.llm_attempts`)."""


async def before_retry(error: RpcError, attempt: int, opts: CallOptions) -> None:
    """Pause before attempt `attempt` + 1, or raise `error` when it may not be retried."""
    pause = max(opts.retry.pause(attempt), error.retry_after_s or 0.0)
    if (
        (
            attempt >= opts.retry.attempts
            and not still_waiting(error, pause, opts.retry, opts.deadline.began)
        )
        or (error.reason in LLM_REASONS and attempt >= opts.retry.llm_attempts)
        or not retryable(error, keyed=opts.keyed)
        or not opts.deadline.allows(pause)
    ):
        raise error
    await asyncio.sleep(pause)


def still_waiting(error: RpcError, pause: float, retry: Retry, began: float) -> bool:
    """Whether a failure past the attempts is still within its time, counted from `began`
    (a call's first attempt; a watch's first failure in a row): a TURN_IN_PROGRESS within
    `Retry.busy_for_s`, an UNAVAILABLE without a reason within `Retry.unavailable_for_s`."""
    if retry.attempts <= 1:
        return False  # attempts=1 never retries
    if error.reason == reasons.TURN_IN_PROGRESS:
        within = retry.busy_for_s
    elif error.code == grpc.StatusCode.UNAVAILABLE and not error.reason:
        within = retry.unavailable_for_s
    else:
        return False
    return time.monotonic() + pause - began < within
