"""The call path every SDK method takes: the key, a request id, the deadline, safe retries.

- The key travels in every call's metadata (grpc.aio's channel interceptors
  see unary calls only, so it is never left to the channel), with an
  ``x-request-id`` the gateway's log lines carry: the request's own
  `request_id` for a write that has one, else a new id per call (its retries
  keep it).
- The deadline covers the whole call, retries and their pauses included.
- Only safe calls are retried: reads, and writes that carry a `request_id`
  (the gateway answers a repeated one with the first reply, nothing done
  twice). A failure is retried when it says to: UNAVAILABLE (the gateway or
  what it calls was unreachable), and the reasons TURN_IN_PROGRESS (a lease
  still held, by this very call's first attempt perhaps) and LLM_RATE_LIMITED,
  with exponential backoff and jitter, never past the deadline (the SDK's
  channel reconnects after 0.1 s, then backs off up to 2 s, so a restarted
  gateway is reached within a pause or two).
- UNAVAILABLE with reason OUTCOME_UNKNOWN says the write may have been
  stored: it is retried only by a call that carries the request's own
  `request_id` (the repeat answers the stored write, or does it if it was
  not stored), never by one without, which could store it twice.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from stello import reasons
from stello_client.exceptions import RpcError, from_rpc_error

T = TypeVar("T")

RETRIED_REASONS = frozenset({reasons.TURN_IN_PROGRESS, reasons.LLM_RATE_LIMITED})


@dataclass(frozen=True, slots=True)
class Retry:
    """How safe calls are retried.

    Attributes:
        attempts: tries in all (1 = no retry).
        initial_backoff_s: the first pause; each next one `multiplier` times longer.
        max_backoff_s: the longest pause.
        multiplier: how the pause grows.
        busy_for_s: how long after the first attempt a session another turn holds
            (`TURN_IN_PROGRESS`) is still tried, past `attempts`, at `max_backoff_s`:
            a turn whose gateway died holds its session for at most the gateway's
            `STELLO_GATEWAY_TURN_LEASE_TTL_S` (10 s by default), and the retry with
            the same request_id then takes it over. 0: `attempts` alone.
    """

    attempts: int = 8
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    busy_for_s: float = 12.0

    def pause(self, attempt: int) -> float:
        """The pause after failed attempt `attempt` (1-based), with jitter (half to all of it)."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)  # spreads retries; no secret


NO_RETRY = Retry(attempts=1)


def retryable(error: RpcError, *, keyed: bool) -> bool:
    """Whether a safe call that failed so may be tried again; `keyed`: the request carries
    its own request_id (a write the gateway answers once)."""
    if error.reason == reasons.OUTCOME_UNKNOWN:
        return keyed
    return error.code == grpc.StatusCode.UNAVAILABLE or error.reason in RETRIED_REASONS


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


class Deadline:
    """The end of a call's time (None: no deadline), and what is left of it."""

    def __init__(self, timeout: float | None) -> None:
        self.began = time.monotonic()
        self._end = None if timeout is None else self.began + timeout

    def left(self) -> float | None:
        """Seconds left (never below a millisecond, so grpc still answers DEADLINE_EXCEEDED)."""
        return None if self._end is None else max(self._end - time.monotonic(), 0.001)

    def allows(self, pause: float) -> bool:
        """Whether a pause of `pause` seconds still leaves time for another attempt."""
        return self._end is None or time.monotonic() + pause < self._end


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
    metadata = (("authorization", f"Bearer {key}"), ("x-request-id", rid))
    policy = retry if safe else NO_RETRY
    return CallOptions(metadata, rid, Deadline(timeout), policy, method, bool(request_id))


async def unary(call: Callable[..., Awaitable[T]], request: Any, opts: CallOptions) -> T:
    """One unary call with its retries; a failure raises the SDK's exception."""
    attempt = 1
    while True:
        try:
            return await call(request, timeout=opts.deadline.left(), metadata=opts.metadata)
        except grpc.aio.AioRpcError as exc:
            error = from_rpc_error(exc, method=opts.method, request_id=opts.request_id)
        await before_retry(error, attempt, opts)
        attempt += 1


async def before_retry(error: RpcError, attempt: int, opts: CallOptions) -> None:
    """Pause before attempt `attempt` + 1, or raise `error` when it may not be retried."""
    pause = opts.retry.pause(attempt)
    if (
        (attempt >= opts.retry.attempts and not _still_busy(error, pause, opts))
        or not retryable(error, keyed=opts.keyed)
        or not opts.deadline.allows(pause)
    ):
        raise error
    await asyncio.sleep(pause)


def _still_busy(error: RpcError, pause: float, opts: CallOptions) -> bool:
    """Whether a TURN_IN_PROGRESS past the attempts is still within `Retry.busy_for_s`."""
    if error.reason != reasons.TURN_IN_PROGRESS or opts.retry.attempts <= 1:
        return False  # attempts=1 never retries
    return time.monotonic() + pause - opts.deadline.began < opts.retry.busy_for_s
