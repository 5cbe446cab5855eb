"""The caller's deadline, for the network providers' retries and requests of a model call.

A turn's model call is made for a client whose RPC has a deadline; a provider's retry
loop would not know it. The turn sets it, for the call only, in `caller_deadline` (a
context variable: `bounded` around an awaited call, `bounded_steps` around each step
of a stream, so that it never outlives the call nor leaks into the caller's code or
into tasks started elsewhere). The network providers' retries (`retries.Retries`) then
refuse to sleep a wait that does not fit in what is left of it (`retries.not_waited`): a Retry-After
(the call fails at once with the provider's status, telling the client when to retry,
RetryInfo), or, when the answer asks none, the backoff before the next retry
(`retries.backoff`: the call fails at once with the provider's status), instead of the
client's deadline passing during the sleep.

Nor does a request of the call wait for its answer past that deadline: its timeout
is the provider's (STELLO_LLM_TIMEOUT_S), at most what is left of the caller's deadline
(`attempt_timeout`), so that a request to a slow server ends by the caller's deadline
(DEADLINE_EXCEEDED, `remote.Endpoint.timeout_error`) rather than running on after the
caller gave up. Its answer's reading has the same timeout, each piece waited for that long
at most (what was left when the request was sent, not what is left as it is read).

A COMPRESS fork's summary is made under it too (`forks.creator`), and so is the
backoff after a request that got no answer (`retries.unanswered_wait`).

Work with no caller deadline (a background fold, a consolidation) leaves it unset and
keeps the gateway's own limit on a wait (`retries.longest_wait`). So does the manual
Consolidate, though its client has a deadline: its run is a job of the background runner
that outlives the call (shielded, saving its progress per chunk, waited for by any other
Consolidate of the session, `history.consolidation`), so a wait the provider asks is slept
and the run goes on, rather than failing the job, for every waiter, at one caller's deadline.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

caller_deadline: ContextVar[float | None] = ContextVar("stello_caller_deadline", default=None)
"""The deadline (`time.monotonic`) of the caller a model call is made for; None for none."""


def time_left() -> float | None:
    """Seconds left before the caller's deadline (None: no caller deadline is set)."""
    deadline = caller_deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def past_deadline(wait_s: float) -> bool:
    """Whether a wait of `wait_s` does not fit in what is left of the caller's deadline
    (False with no deadline set)."""
    left = time_left()
    return left is not None and wait_s >= left


def attempt_timeout(timeout_s: float) -> float:
    """The timeout of one request of a model call: the provider's `timeout_s`, at most what
    is left of the caller's deadline (0 when nothing is left)."""
    left = time_left()
    return timeout_s if left is None else max(0.0, min(timeout_s, left))


@contextmanager
def bounded(deadline: float | None) -> Iterator[None]:
    """Within this block, model calls are made for a caller whose deadline is `deadline`."""
    token = caller_deadline.set(deadline)
    try:
        yield
    finally:
        caller_deadline.reset(token)


async def bounded_steps(events: AsyncIterator[T], deadline: float | None) -> AsyncIterator[T]:
    """`events` (a model's stream), each step taken `bounded` by `deadline`."""
    while True:
        with bounded(deadline):
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
        yield event
