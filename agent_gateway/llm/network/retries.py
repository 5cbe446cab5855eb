"""When the network providers' SDKs retry a call, and how long a provider asks to wait.

The SDKs retry a timeout, a conflict, a rate limit and a server error
(STELLO_LLM_MAX_RETRIES times, `retried_status`), waiting what the answer's
Retry-After asks: Anthropic's SDK any length, OpenAI's up to two minutes. A wait
longer than the gateway waits for one (`longest_wait`: the provider's timeout,
STELLO_LLM_TIMEOUT_S, at most `LONGEST_RETRY_WAIT_S`) is not slept: the SDK
clients' `_should_retry` refuses it (`not_waited`, mixed into both SDKs' clients by
`RetryPolicy`), and the call fails at
once with the provider's status, telling the client when to retry (RetryInfo).
Nor is a wait that does not fit in what is left of the caller's deadline, when the
call is made for one (a turn's: `deadlines`): the Retry-After's, or, when the answer
asks none, the SDKs' own backoff before their next retry (`backoff`, after the retries
made so far, `retries_made`). A request that got no answer at all (a timeout, a connection
closed or refused) the SDKs retry without asking `_should_retry`: `RetryPolicy`'s
`_sleep_for_retry` then refuses the backoff that does not fit, raising the failure the SDK
was handling (`unanswered_not_waited`), which the providers map as the SDK's own
(a timeout DEADLINE_EXCEEDED, an unreachable server UNAVAILABLE).
"""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx2

from agent_gateway.llm.deadlines import past_deadline

if TYPE_CHECKING:

    class _SdkClient:
        """What `RetryPolicy` overrides of the SDKs' clients (for the type checker only)."""

        def _should_retry(self, response: httpx2.Response) -> bool: ...

        async def _sleep_for_retry(
            self,
            *,
            retries_taken: int,
            max_retries: int,
            options: Any,
            response: httpx2.Response | None,
        ) -> None: ...

else:
    _SdkClient = object

LONGEST_RETRY_WAIT_S = 60.0
"""The longest Retry-After the SDKs' retries wait, whatever the provider's timeout."""
MAX_RETRY_AFTER_S = 600.0
"""The longest wait a provider's Retry-After is passed on as (a longer one is told as this)."""
FIRST_BACKOFF_S = 0.5
"""The SDKs' wait before their first retry of an answer that asks none (INITIAL_RETRY_DELAY)."""
LONGEST_BACKOFF_S = 8.0
"""The SDKs' longest wait before a retry of an answer that asks none (MAX_RETRY_DELAY)."""
RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header of the SDKs' requests that says how many retries they made before it."""


class RetryPolicy(_SdkClient):
    """The gateway's limits on the SDKs' retries, mixed into both SDKs' clients (before
    the SDK's class): `longest_wait_s` is the provider's `longest_wait`."""

    longest_wait_s: float = LONGEST_RETRY_WAIT_S

    def _should_retry(self, response: httpx2.Response) -> bool:
        """Not when the answer asks to wait longer than the gateway waits, nor when the wait
        before the retry (asked, or the SDK's backoff) would pass the caller's deadline
        (`not_waited`); else as the SDK decides."""
        if not_waited(response, self.longest_wait_s):
            return False
        return super()._should_retry(response)

    async def _sleep_for_retry(
        self,
        *,
        retries_taken: int,
        max_retries: int,
        options: Any,
        response: httpx2.Response | None,
    ) -> None:
        """Not after a request that got no answer when the SDK's backoff would pass the
        caller's deadline (`unanswered_not_waited`: the failure is raised at once); else
        as the SDK sleeps."""
        failure = unanswered_not_waited(response, retries_taken)
        if failure is not None:
            raise failure
        await super()._sleep_for_retry(
            retries_taken=retries_taken,
            max_retries=max_retries,
            options=options,
            response=response,
        )


def unanswered_not_waited(
    response: httpx2.Response | None, retries_taken: int
) -> BaseException | None:
    """The failure the SDKs' retry must raise instead of sleeping: when the request got no
    answer (`response` None: a timeout, a connection error) and the SDK's backoff after
    `retries_taken` retries (`backoff`) does not fit in what is left of the caller's
    deadline, the failure the SDK is handling (both SDKs sleep inside its ``except``);
    None to sleep as the SDK does (also when the SDK handles no failure there)."""
    if response is not None or not past_deadline(backoff(retries_taken)):
        return None
    return sys.exception()


def not_waited(response: httpx2.Response, longest_s: float) -> bool:
    """Whether the SDKs' retry must not sleep before retrying after the error answer
    `response`: its Retry-After is longer than the gateway waits for one (`longest_s`), or
    what the SDK would sleep (that Retry-After, else its backoff at its longest, `backoff`)
    does not fit in what is left of the caller's deadline (`deadlines.past_deadline`)."""
    asked = asked_wait(response.headers)
    if asked is not None and asked > longest_s:
        return True
    return past_deadline(asked if asked is not None else backoff(retries_made(response)))


def retried_status(status: int) -> bool:
    """Whether the providers' SDKs retry an answer of HTTP `status` (STELLO_LLM_MAX_RETRIES
    times): a timeout, a conflict, a rate limit, a server error; never a refusal."""
    return status in (408, 409, 429) or status >= 500


def longest_wait(timeout_s: float) -> float:
    """The longest Retry-After a provider of timeout `timeout_s` waits before a retry."""
    return min(timeout_s, LONGEST_RETRY_WAIT_S)


def backoff(retries_made: int) -> float:
    """The longest the SDKs wait before their next retry of an answer that asks no wait,
    `retries_made` retries made: `FIRST_BACKOFF_S` doubled per retry made, at most
    `LONGEST_BACKOFF_S` (their jitter then shortens it by up to a quarter)."""
    return min(FIRST_BACKOFF_S * 2.0 ** min(retries_made, 64), LONGEST_BACKOFF_S)


def retries_made(response: httpx2.Response) -> int:
    """How many retries the SDK had made when it sent the request `response` answers (its
    `RETRY_COUNT_HEADER`); 0 when it does not say."""
    try:
        request = response.request
    except RuntimeError:  # a response with no request
        return 0
    return retries_sent(request) or 0


def retries_sent(request: httpx2.Request) -> int | None:
    """How many retries the SDK had made when it sent `request` (its `RETRY_COUNT_HEADER`);
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
