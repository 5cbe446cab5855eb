"""The call path the gateway's typed clients share (`clients`): who calls, and how.

Every call:

- authenticates as the gateway's caller: their key is forwarded as
  ``authorization: Bearer <key>``, so each service enforces tenancy itself;
- carries the caller's request id (``x-request-id``) for the logs;
- gets the time the caller has left as its deadline: capped by ``call_timeout_s``
  for the short calls, whole for the long ones (DeleteSubtree, GetTree: their
  cost grows with the subtree; the searches, which storage bounds itself; a
  saga's fill, which grows with an import's records: the caller's deadline
  decides, or ``long_call_timeout_s`` when the caller set none);
- is retried on UNAVAILABLE a bounded number of times with jittered exponential
  backoff, never past the deadline (mutating calls are safe to retry: they carry
  a request_id or are idempotent by nature; DeleteSubtree is not retried;
  ClaimJob is, with the token the client chose: a retry after a lost reply is
  granted the claim its first attempt took; BeginTurn is, and a retry after a
  lost reply meets the first lease:
  TURN_IN_PROGRESS until its TTL ends, as the turn would be refused anyway; a
  turn's commit is, and its lease precondition keeps the retry from writing
  twice);
- marks the error it raises `maybe_applied` when an attempt got no answer
  (UNAVAILABLE or DEADLINE_EXCEEDED, the last one or one retried before): that
  attempt may have been applied, so what the retry answered (a precondition no
  longer holding, say) does not prove that nothing was written. A turn's
  commit then proves what happened or tells its client the outcome is unknown
  (`turns.commit`);
- turns a failed RPC back into the kernel's domain error (`from_rpc_error`), so
  the gateway's own interceptor maps it to the same status for the client (an
  ABORTED one keeps its PreconditionFailure violations: which precondition
  failed decides what a turn's commit does next); an INTERNAL or unmapped
  status becomes `Internal`, which the gateway answers with its own error id
  (the service's text, with its error id, goes to the gateway's log only); a
  RESOURCE_EXHAUSTED that no service wrote (a reply past the gateway's or the
  service's message limit: gRPC's own text about its client) says so in words
  that name the limit and what to ask instead.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message

from stello.db.tasks import retrieved
from stello.errors import (
    REQUEST_ID_KEY,
    Aborted,
    DeadlineExceeded,
    Internal,
    StelloError,
    Unavailable,
    from_rpc_error,
    has_status_details,
    metadata_too_large,
    precondition_violations,
    reply_too_large,
)
from stello.telemetry.log_every import WarnEvery

log = logging.getLogger(__name__)

R = TypeVar("R", bound="Message | bytes")
A = TypeVar("A")
B = TypeVar("B")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who the gateway acts for: their key, their deadline (monotonic) and request id."""

    key: str
    deadline: float | None = None
    request_id: str = "-"

    def within(self, seconds: float) -> Caller:
        """This caller with a deadline no later than `seconds` from now."""
        limit = time.monotonic() + seconds
        if self.deadline is not None and self.deadline <= limit:
            return self
        return replace(self, deadline=limit)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None = no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """Per-call timeout and the UNAVAILABLE retry bounds."""

    timeout_s: float = 10.0
    long_timeout_s: float = 600.0
    max_retries: int = 3
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0


UNREACHED_LOG_EVERY_S = 60.0
"""How often, at most, the log says again why a service cannot be reached."""

# Failures that may come after the server did the work (the answer was lost on the way).
_UNANSWERED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

# The storage and tree RPCs that change a space (and so write events, DESIGN §4.6).
WRITES = frozenset(
    {
        "AddRef",
        "AppendRecords",
        "ApplyRetention",
        "Archive",
        "ClearInsight",
        "CommitSession",
        "ConsumeInsight",
        "CreateSession",
        "DeleteSubtree",
        "LeaveTurnQueue",
        "PutConfig",
        "PutInsight",
        "PutMemory",
        "PutSession",
        "PutSystemPrompt",
        "ReleaseTurn",
        "RemoveRef",
        "RemoveSharedMemoryEntry",
        "SetPinned",
        "Transact",
        "TrimRecords",
        "Unarchive",
        "UpdateLabel",
        "UpsertSharedMemoryEntry",
    }
)


class ServiceClient:
    """Shared call path: metadata, deadline, bounded retries, error mapping, counting."""

    def __init__(self, service: str, policy: CallPolicy, address: str = "") -> None:
        """`address`: where the service is dialled, for the log (its setting's value)."""
        self._service = service
        self._policy = policy
        self._address = address
        self._unreached = WarnEvery(log, UNREACHED_LOG_EVERY_S)
        """Says an unreachable service at most once per UNREACHED_LOG_EVERY_S."""
        self.calls: collections.Counter[str] = collections.Counter()
        """How many RPCs (attempts included) each method made; read by the benchmark."""
        self.after_write: Callable[[str], None] | None = None
        """Told the space id after each successful write (wakes WatchSpace's poller)."""

    async def _call(
        self,
        name: str,
        method: Any,
        request: Message,
        reply: type[R],
        caller: Caller,
        *,
        retry: bool = True,
        long: bool = False,
    ) -> R:
        metadata = (
            ("authorization", f"Bearer {caller.key}"),
            (REQUEST_ID_KEY, caller.request_id),
        )
        attempt = 0
        unanswered = False  # an attempt so far got no answer: it may have been applied
        while True:
            try:
                timeout = self._timeout(name, caller, long)
            except DeadlineExceeded as exc:
                exc.maybe_applied = unanswered
                raise
            self.calls[name] += 1
            try:
                response = await method(request, timeout=timeout, metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                unanswered = unanswered or exc.code() in _UNANSWERED
                delay = self._backoff(attempt, caller)
                if retry and exc.code() is grpc.StatusCode.UNAVAILABLE and delay is not None:
                    attempt += 1
                    await asyncio.sleep(delay)
                    continue
                error = from_rpc_error(exc)
                error.maybe_applied = unanswered
                if isinstance(error, Aborted):
                    # Which precondition failed decides what the gateway does next.
                    error.violations = tuple(precondition_violations(exc))
                if _unreached(exc):
                    self._log_unreached(exc)
                plain = isinstance(error, Unavailable | DeadlineExceeded | Internal)
                if plain or reply_too_large(exc) or metadata_too_large(exc):
                    # Say which hop failed (the caller cannot tell), in words, never
                    # the transport's debug text.
                    error.message = f"{self._service}.{name}: {_plain(exc, error)}"
                    error.args = (error.message,)
                raise error from exc
            if self.after_write is not None and name in WRITES:
                self.after_write(getattr(request, "space_id", ""))
            return cast(R, response)

    def _log_unreached(self, exc: grpc.aio.AioRpcError) -> None:
        """Log why the service could not be reached (gRPC's words: a TLS name check, a refused
        connection), at most once per UNREACHED_LOG_EVERY_S: the client is told only that
        the service is unavailable."""
        self._unreached.warning(
            "unreached",
            "cannot reach %s at %s: %s",
            self._service,
            self._address or "its address",
            exc.details() or exc.code().name,
        )

    def _timeout(self, name: str, caller: Caller, long: bool) -> float:
        cap = self._policy.long_timeout_s if long else self._policy.timeout_s
        remaining = caller.remaining()
        if remaining is None:
            return cap
        if remaining <= 0:
            raise DeadlineExceeded(f"the deadline passed before {self._service}.{name} was called")
        return remaining if long else min(remaining, cap)

    def _backoff(self, attempt: int, caller: Caller) -> float | None:
        """The delay before retry `attempt + 1`, or None when no retry is left."""
        if attempt >= self._policy.max_retries:
            return None
        delay = min(self._policy.backoff_s * 2.0**attempt, self._policy.max_backoff_s)
        # Jitter spreads the retries of many callers after one outage.
        delay *= random.uniform(0.5, 1.0)
        remaining = caller.remaining()
        if remaining is not None and remaining <= delay:
            return None
        return delay


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results, `first` run in a task while `second` runs here (two calls in parallel).

    What ``asyncio.gather`` answers for two, at about a third of its CPU (one task and
    no gathering future, not two tasks and one): a failure of either is raised, and a
    caller cancelled while waiting cancels both. When `second` fails, `first` is
    cancelled (a read nobody will use) and its own failure, if any, is not reported.
    """
    task = asyncio.ensure_future(first)
    try:
        second_result = await second
    except BaseException:
        task.cancel()
        task.add_done_callback(retrieved)
        raise
    return await task, second_result


def _unreached(exc: grpc.aio.AioRpcError) -> bool:
    """True when the service was not reached: UNAVAILABLE with no Stello status."""
    return exc.code() is grpc.StatusCode.UNAVAILABLE and not has_status_details(exc)


def _plain(exc: grpc.aio.AioRpcError, error: StelloError) -> str:
    """A failed call in words a person can act on (grpc's own texts name the transport)."""
    code = exc.code()
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return "did not answer within the deadline"
    if _unreached(exc):
        # No Stello status: the service could not be reached (not a database outage there).
        return "the service is unavailable; retry the call"
    if reply_too_large(exc):
        return OVERSIZED
    if metadata_too_large(exc):
        return OVERSIZED_HEADERS
    return error.message


OVERSIZED_HEADERS = (
    "its answer's headers were larger than gRPC's metadata limit (every status Stello "
    "sends stays below it: a fault of that service)"
)
OVERSIZED = (
    "its reply was larger than a gRPC message limit (the gateway's or that service's "
    "STELLO_MAX_MESSAGE_BYTES): ask for less at once "
    "(a smaller page, max_bytes or depth), or raise the limit"
)
