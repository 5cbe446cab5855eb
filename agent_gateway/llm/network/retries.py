"""When the network providers retry a call, and how long a provider asks to wait.

The retries are the gateway's own loop around each request (`Retries.run`); the SDKs'
clients are made with ``max_retries=0`` and retry nothing. Their retry loops decide and
sleep in private methods (``_should_retry``, ``_sleep_for_retry``): overriding those to
bound the waits made our retries depend on names an SDK release may change without
notice, and then silently sleep past the caller's deadline. The loop uses only what the
SDKs publish: their error classes, and ``extra_headers`` to send the retry count
(`RETRY_COUNT_HEADER`, which the SDKs' own retries sent and `remote`'s log reads back).

A timeout, a conflict, a rate limit and a server error (`retried_status`, unless the
answer's ``x-should-retry`` says otherwise) are retried STELLO_LLM_MAX_RETRIES times,
waiting what the answer's Retry-After asks. A wait longer than the gateway waits for one
(`longest_wait`: the provider's timeout, STELLO_LLM_TIMEOUT_S, at most
`LONGEST_RETRY_WAIT_S`) is not slept (`not_waited`): the call fails at once with the
provider's status, telling the client when to retry (RetryInfo). Nor is a wait that does
not fit in what is left of the caller's deadline, when the call is made for one (a turn's:
`deadlines`): the Retry-After's, or, when the answer asks none, the backoff before the
next retry (`backoff`, after the retries made so far, `retries_made`). A request that got
no answer at all (a timeout, a connection closed or refused) is retried after the backoff
too, and fails at once with its own failure when that backoff does not fit
(`unanswered_wait`), which the providers map as before (a timeout DEADLINE_EXCEEDED, an
unreachable server UNAVAILABLE). Each request waits for its answer the provider's timeout,
at most what is left of the caller's deadline (`deadlines.attempt_timeout`, which the
providers give each request `run` sends).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import httpx2

from agent_gateway.llm.deadlines import past_deadline

logger = logging.getLogger(__name__)

T = TypeVar("T")

LONGEST_RETRY_WAIT_S = 60.0
"""The longest Retry-After the retries wait, whatever the provider's timeout."""
MAX_RETRY_AFTER_S = 600.0
"""The longest wait a provider's Retry-After is passed on as (a longer one is told as this)."""
FIRST_BACKOFF_S = 0.5
"""The wait before the first retry of an answer that asks none (the SDKs' INITIAL_RETRY_DELAY)."""
LONGEST_BACKOFF_S = 8.0
"""The longest wait before a retry of an answer that asks none (the SDKs' MAX_RETRY_DELAY)."""
RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header of a request that says how many retries were made before it (the SDKs'
name; `Retries.run` sends it through their public ``extra_headers``)."""


@dataclass(frozen=True, slots=True)
class Retries:
    """A provider's retries of a request: `max_retries` of them, a Retry-After waited up to
    `longest_wait_s`; `answer_of` is the error answer an SDK's exception carries (its
    APIStatusError's response, else None) and `unanswered` the SDK's class for a request
    that got no answer (its APIConnectionError, of which its timeout is a kind)."""

    provider: str
    max_retries: int
    longest_wait_s: float
    answer_of: Callable[[Exception], httpx2.Response | None]
    unanswered: type[Exception]

    async def run(self, attempt: Callable[[dict[str, str]], Awaitable[T]]) -> T:
        """`attempt` (one request, sent with the headers it is given), retried as the module
        says; the last failure is raised as it came."""
        made = 0
        while True:
            try:
                return await attempt({RETRY_COUNT_HEADER: str(made)})
            except Exception as exc:
                wait = self._wait(exc, made)
                if wait is None:
                    raise
            made += 1
            logger.info(
                "%s: retrying the request in %.2fs (retry %d of %d)",
                self.provider,
                wait,
                made,
                self.max_retries,
            )
            await asyncio.sleep(wait)

    def _wait(self, exc: Exception, made: int) -> float | None:
        """The wait before retrying a request that failed with `exc` after `made` retries;
        None when it is not retried."""
        if made >= self.max_retries:
            return None
        answer = self.answer_of(exc)
        if answer is not None:
            return answered_wait(answer, made, self.longest_wait_s)
        if isinstance(exc, self.unanswered):
            return unanswered_wait(made)
        return None


def answered_wait(response: httpx2.Response, made: int, longest_s: float) -> float | None:
    """The wait before retrying the request the error answer `response` answers, `made`
    retries made: its Retry-After, else the jittered `backoff`; None when it is not retried
    (`retried_answer`, `not_waited`)."""
    if not retried_answer(response) or not_waited(response, longest_s):
        return None
    asked = asked_wait(response.headers)
    return asked if asked is not None else jittered(backoff(made))


def unanswered_wait(made: int) -> float | None:
    """The wait before retrying a request that got no answer (a timeout, a connection error),
    `made` retries made: the jittered `backoff`; None when that backoff does not fit in what
    is left of the caller's deadline."""
    longest = backoff(made)
    return None if past_deadline(longest) else jittered(longest)


def retried_answer(response: httpx2.Response) -> bool:
    """Whether an error answer is one to retry: as its ``x-should-retry`` header says
    (``true`` or ``false``), else as its status does (`retried_status`)."""
    said = response.headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return retried_status(response.status_code)


def jittered(backoff_s: float) -> float:
    """`backoff_s` shortened by up to a quarter, at random (as the SDKs did), so that the
    retries of many calls failed at once do not come back at once."""
    return backoff_s * (1 - 0.25 * random.random())


def not_waited(response: httpx2.Response, longest_s: float) -> bool:
    """Whether the retry after the error answer `response` must not be waited for: its
    Retry-After is longer than the gateway waits for one (`longest_s`), or what would be
    slept (that Retry-After, else the backoff at its longest, `backoff`)
    does not fit in what is left of the caller's deadline (`deadlines.past_deadline`)."""
    asked = asked_wait(response.headers)
    if asked is not None and asked > longest_s:
        return True
    return past_deadline(asked if asked is not None else backoff(retries_made(response)))


def retried_status(status: int) -> bool:
    """Whether the providers retry an answer of HTTP `status` (STELLO_LLM_MAX_RETRIES
    times, as the SDKs did): a timeout, a conflict, a rate limit, a server error; never a
    refusal."""
    return status in (408, 409, 429) or status >= 500


def longest_wait(timeout_s: float) -> float:
    """The longest Retry-After a provider of timeout `timeout_s` waits before a retry."""
    return min(timeout_s, LONGEST_RETRY_WAIT_S)


def backoff(retries_made: int) -> float:
    """The longest wait before the next retry of a request whose failure asks no wait,
    `retries_made` retries made: `FIRST_BACKOFF_S` doubled per retry made, at most
    `LONGEST_BACKOFF_S` (as the SDKs'; `jittered` then shortens it by up to a quarter)."""
    return min(FIRST_BACKOFF_S * 2.0 ** min(retries_made, 64), LONGEST_BACKOFF_S)


def retries_made(response: httpx2.Response) -> int:
    """How many retries had been made when the request `response` answers was sent (its
    `RETRY_COUNT_HEADER`); 0 when it does not say."""
    try:
        request = response.request
    except RuntimeError:  # a response with no request
        return 0
    return retries_sent(request) or 0


def retries_sent(request: httpx2.Request) -> int | None:
    """How many retries had been made when `request` was sent (its `RETRY_COUNT_HEADER`);
    None when it does not say."""
    try:
        return max(0, int(request.headers[RETRY_COUNT_HEADER]))
    except (KeyError, ValueError):  # no count, or a count not a number
        return None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The seconds an HTTP answer's headers ask to wait (``retry-after-ms``, or
    ``retry-after`` in seconds or as an HTTP date), at most MAX_RETRY_AFTER_S; None
    when they say nothing usable."""
    asked = asked_wait(headers)
    return None if asked is None else min(asked, MAX_RETRY_AFTER_S)


def asked_wait(headers: Mapping[str, str] | None) -> float | None:
    """The seconds `headers` ask to wait, unbounded; None for none, nothing or nonsense."""
    if not headers:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return _positive(float(millis) / 1000)
        said = headers.get("retry-after")
        if said is None:
            return None
        try:
            return _positive(float(said))
        except ValueError:
            when = email.utils.parsedate_to_datetime(said)
            return _positive(when.timestamp() - time.time())
    except (ValueError, TypeError, OverflowError):
        return None


def _positive(seconds: float) -> float | None:
    if seconds != seconds or seconds <= 0:  # NaN, or nothing to wait
        return None
    return seconds
