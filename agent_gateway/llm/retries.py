"""When the network providers' SDKs retry a call, and how long a provider asks to wait.

The SDKs retry a timeout, a conflict, a rate limit and a server error
(STELLO_LLM_MAX_RETRIES times, `retried_status`), waiting what the answer's
Retry-After asks: Anthropic's SDK any length, OpenAI's up to two minutes. A wait
longer than the gateway waits for one (`longest_wait`: the provider's timeout,
STELLO_LLM_TIMEOUT_S, at most `LONGEST_RETRY_WAIT_S`) is not slept: the SDK
clients' `_should_retry` refuses it (`waits_too_long`), and the call fails at
once with the provider's status, telling the client when to retry (RetryInfo).
Nor is a wait that does not fit in what is left of the caller's deadline, when the
call is made for one (a turn's: `deadlines`).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

LONGEST_RETRY_WAIT_S = 60.0
"""The longest Retry-After the SDKs' retries wait, whatever the provider's timeout."""
MAX_RETRY_AFTER_S = 600.0
"""The longest wait a provider's Retry-After is passed on as (a longer one is told as this)."""


def retried_status(status: int) -> bool:
    """Whether the providers' SDKs retry an answer of HTTP `status` (STELLO_LLM_MAX_RETRIES
    times): a timeout, a conflict, a rate limit, a server error; never a refusal."""
    return status in (408, 409, 429) or status >= 500


def longest_wait(timeout_s: float) -> float:
    """The longest Retry-After a provider of timeout `timeout_s` waits before a retry."""
    return min(timeout_s, LONGEST_RETRY_WAIT_S)


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The seconds an HTTP answer's headers ask to wait (``retry-after-ms``, or
    ``retry-after`` in seconds or as an HTTP date), at most MAX_RETRY_AFTER_S; None
    when they say nothing usable."""
    asked = asked_wait(headers)
    return None if asked is None else min(asked, MAX_RETRY_AFTER_S)


def waits_too_long(headers: Mapping[str, str] | None, longest_s: float) -> bool:
    """Whether an HTTP answer's headers ask to wait longer than `longest_s` before a retry."""
    asked = asked_wait(headers)
    return asked is not None and asked > longest_s


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
