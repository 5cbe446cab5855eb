"""How the network providers (openai, anthropic) tell a provider's failure (`Endpoint`).

A provider's failure becomes one of the kernel's domain errors. What the
client is told is the status, a stable reason and a plain sentence with an
error id; it never names the provider's base URL, the model, a setting or
anything the provider answered (a provider's text may echo the key, the model
or the request). The details — provider, base URL, model, the HTTP status, the
provider's own message, the retries made and the setting to check — go to the
gateway's log under that error id. Any piece of 8 or more characters of the
API key is masked (``***``) in what is logged (`mask_secret`).

- no connection, HTTP 408/409/5xx (after the retries, `retries`) -> `Unavailable`;
- a connection that broke off while an answer that had begun was read (a
  stream, or a body) -> `Unavailable` ("the answer broke off"), never retried
  (a request is retried, not an answer once it began); an answer that sent
  nothing more within the timeout -> `DeadlineExceeded`, likewise;
- an answer that is not the protocol's (not JSON, an HTML page, a body said to
  be gzip that is not) -> `Unavailable` (`Endpoint.unreadable_answer`);
- HTTP 429 (after retries) and 402 -> `ResourceExhausted`; a 429 or 503 whose
  Retry-After is longer than the gateway waits for one, or than what is left of
  the caller's deadline (a turn's, `deadlines`), fails at once, not retried,
  saying when to retry (`retries`); one that asks no wait fails at once, not
  retried (again), when the backoff before the next retry does not fit in
  what is left of the caller's deadline (`retries.backoff`);
- HTTP 401/403 -> `FailedPrecondition` ("the LLM provider rejected the API key");
- HTTP 404 -> `FailedPrecondition` `LLM_MODEL_NOT_FOUND`: an unknown model when
  the provider's message names the model (every provider's does), else a base
  URL whose path is likely wrong (a page, FastAPI's ``{"detail": "Not Found"}``,
  an error naming the path: OpenAI's base URL without its ``/v1``);
- a timeout (after retries) -> `DeadlineExceeded`: a request's timeout is the provider's, at
  most what is left of the caller's deadline (`deadlines.attempt_timeout`), its log saying
  which it was;
- an error answer's body is read up to a bound (`error_bodies`): past it, or
  when it breaks off (no more of it within the timeout, a reset), the error is
  the one its status says (retried as that status is), its logged detail noting
  the cut;
- HTTP 400, 413, 422 and any other 4xx -> `FailedPrecondition`. Not
  `InvalidArgument`: the caller's request was valid, the provider refused the
  context the gateway built from it (too long, a parameter the model does not
  take), which only a change of configuration or of the session can fix.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agent_gateway.llm.deadlines import time_left
from agent_gateway.llm.network.retries import (
    LONGEST_RETRY_WAIT_S,
    backoff,
    longest_wait,
    retried_status,
)
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
    StelloError,
    Unavailable,
    new_error_id,
)
from stello.reasons import (
    LLM_API_KEY_REJECTED,
    LLM_MODEL_NOT_FOUND,
    LLM_RATE_LIMITED,
    LLM_REQUEST_REJECTED,
    LLM_TIMEOUT,
    LLM_UNAVAILABLE,
)

logger = logging.getLogger(__name__)

Wire = TypeVar("Wire")
"""A type of the provider's protocol an answer is read as (a chat completion, a Message)."""
R = TypeVar("R")

MAX_DETAIL_CHARS = 500
"""A provider's error message is cut to this many characters."""


def _unfit(wait: str, left: float) -> str:
    """For the log: `wait` does not fit in what is `left` of the caller's deadline."""
    return f"{wait} does not fit in the {max(left, 0.0):.1f}s left of the caller's deadline"


def _unfit_backoff_note(backoff_s: float, left: float) -> str:
    """For the log: the SDK's next backoff, `backoff_s`, does not fit in what is `left`."""
    return _unfit(f"the next retry's backoff of up to {backoff_s:g}s", left)


def error_detail(body: object) -> str | None:
    """The human message of an HTTP error body (OpenAI or Anthropic shape), if any."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return str(body["message"])
        return None
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


KEY_PIECE_CHARS = 8
"""Any piece of the API key this long or longer is masked wherever it shows up."""


def _when(retry_after_s: float | None) -> str:
    """When to retry, for a client: "later", or in the seconds a Retry-After asked."""
    if retry_after_s is None or retry_after_s < 1:
        return "later"
    seconds = math.ceil(retry_after_s)
    return f"in {seconds} second{'' if seconds == 1 else 's'}"


def mask_secret(text: str, secret: str | None) -> str:
    """`text` with every run of characters covered by a piece of `secret` of at least
    `KEY_PIECE_CHARS` characters replaced by ``***`` (a key shorter than that, of 4 or more
    characters, is masked where it appears whole)."""
    if not secret:
        return text
    if len(secret) < KEY_PIECE_CHARS:
        return text.replace(secret, "***") if len(secret) >= 4 else text
    size = KEY_PIECE_CHARS
    pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    covered = [False] * len(text)
    for start in range(len(text) - size + 1):
        if text[start : start + size] in pieces:
            covered[start : start + size] = [True] * size
    out: list[str] = []
    for index, char in enumerate(text):
        if not covered[index]:
            out.append(char)
        elif index == 0 or not covered[index - 1]:
            out.append("***")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Which provider, server and model a provider talks to: the facts its errors log."""

    provider: str
    base_url: str
    model: str
    timeout_s: float
    max_retries: int
    secret: str | None = field(default=None, repr=False)

    @property
    def env(self) -> str:
        """The prefix of this provider's settings, e.g. ``STELLO_OPENAI``."""
        return f"STELLO_{self.provider.upper()}"

    def where(self) -> str:
        """Provider, server and model, for the log."""
        return f"{self.provider} at {self.base_url}, model {self.model}"

    def redact(self, text: str) -> str:
        """`text` with any piece of the API key masked, cut to `MAX_DETAIL_CHARS`."""
        text = mask_secret(text[: 4 * MAX_DETAIL_CHARS], self.secret)
        if len(text) > MAX_DETAIL_CHARS:
            text = text[:MAX_DETAIL_CHARS] + "..."
        return text

    def _retries(self, count: int | None = None) -> str:
        """ " after N retries" (`count`, else all that are made), for the log; "" for none."""
        count = self.max_retries if count is None else count
        if not count:
            return ""
        return f" after {count} {'retry' if count == 1 else 'retries'}"

    def _logged(self, what: str, details: str, check: str) -> str:
        """Log the details of a failure under a new error id; the id."""
        error_id = new_error_id()
        logger.warning(
            "LLM provider error (id %s): %s (%s; %s); check %s",
            error_id,
            what,
            self.where(),
            mask_secret(details, self.secret),
            check,
        )
        return error_id

    def status_error(
        self,
        status: int,
        detail: str | None,
        *,
        retried: bool = True,
        retry_after_s: float | None = None,
        retries_made: int | None = None,
    ) -> StelloError:
        """The domain error for an HTTP error answer with `status` and the provider's `detail`
        (logged, never answered); a rate limit or an unavailable provider carries
        `retry_after_s` (the provider's Retry-After) to the client as RetryInfo.

        `retried` False: the error came in an answer of HTTP 200 (an event of a stream
        under way, or a body that is an error object), which is not retried
        (`status` then stands for the error's type or code). `retries_made`: the retries
        made when the answer came (`retries.retries_made`), when known.
        """
        said = self._said(
            status, detail, retried=retried, retry_after_s=retry_after_s, made=retries_made
        )
        error = self._status_error(status, detail, said, _when(retry_after_s))
        if error.reason in (LLM_RATE_LIMITED, LLM_UNAVAILABLE):
            error.retry_after_s = retry_after_s
        return error

    @property
    def longest_wait_s(self) -> float:
        """The longest Retry-After the retries wait (`retries.longest_wait`)."""
        return longest_wait(self.timeout_s)

    def _said(
        self,
        status: int,
        detail: str | None,
        *,
        retried: bool,
        retry_after_s: float | None,
        made: int | None,
    ) -> str:
        """What the provider answered, and whether it was retried, for the log."""
        said = f"HTTP {status}" + (f": {self.redact(detail)}" if detail else "")
        if not retried:
            return f"error in an answer of HTTP 200, as {said}"
        if not retried_status(status):  # only these statuses are retried
            return said
        if retry_after_s is not None and retry_after_s > self.longest_wait_s:
            return (
                f"{said}, not retried: its Retry-After of {retry_after_s:g}s is longer than "
                f"the {self.longest_wait_s:g}s the gateway waits for one (STELLO_LLM_TIMEOUT_S, "
                f"at most {LONGEST_RETRY_WAIT_S:g}s)"
            )
        left = time_left()
        if retry_after_s is not None and left is not None and retry_after_s >= left:
            return f"{said}, not retried: " + _unfit(f"its Retry-After of {retry_after_s:g}s", left)
        unfit = self._unfit_backoff(retry_after_s, made, left)
        if unfit is not None and left is not None:
            again = " again" + self._retries(made) if made else ""
            return f"{said}, not retried{again}: " + _unfit_backoff_note(unfit, left)
        return said + self._retries(made)

    def _unanswered_retries(self, made: int | None) -> str:
        """ " after N retries" for a request that got no answer (`made` retries made before
        it, None: all that are made), and, when the retries stopped before the last because the
        next backoff does not fit in what is left of the caller's deadline, that; for the log."""
        left = time_left()
        unfit = self._unfit_backoff(None, made, left)
        if unfit is None or left is None:
            return self._retries(made)
        retried = self._retries(made) if made else ""
        return f"{retried}; not retried again: " + _unfit_backoff_note(unfit, left)

    def _unfit_backoff(
        self, retry_after_s: float | None, made: int | None, left: float | None
    ) -> float | None:
        """The backoff before the next retry (`retries.backoff`), when an answer that
        asked no wait was not retried (`made` retries made, fewer than are made) because that
        backoff does not fit in what is left of the caller's deadline (`left`); else None."""
        if retry_after_s is not None or made is None or made >= self.max_retries:
            return None
        wait = backoff(made)
        return wait if left is not None and wait >= left else None

    def _status_error(self, status: int, detail: str | None, said: str, when: str) -> StelloError:
        metadata = {"http_status": str(status)}
        if status in (401, 403):
            error_id = self._logged("API key rejected", said, f"{self.env}_API_KEY")
            return FailedPrecondition(
                "the LLM provider rejected the gateway's API key: its operator must configure "
                f"a valid one (error id {error_id})",
                reason=LLM_API_KEY_REJECTED,
                metadata=metadata,
            )
        if status in (402, 429):
            error_id = self._logged("rate limited or out of quota", said, "the provider's limits")
            return ResourceExhausted(
                f"the LLM provider is rate limiting or out of quota; retry {when} "
                f"(error id {error_id})",
                reason=LLM_RATE_LIMITED,
                metadata=metadata,
            )
        if status in (408, 409) or status >= 500:
            error_id = self._logged("unavailable", said, "the provider's status")
            return Unavailable(
                f"the LLM provider is unavailable; retry {when} (error id {error_id})",
                reason=LLM_UNAVAILABLE,
                metadata=metadata,
            )
        if status == 404 and not self._names_model(detail):
            error_id = self._logged(
                "no API at this path (a 404 that names no model)", said, self._path_hint()
            )
            return FailedPrecondition(
                "the LLM provider has no API at the gateway's base URL for it: the base URL's "
                f"path is likely wrong, and the gateway's operator must correct it (error id "
                f"{error_id})",
                reason=LLM_MODEL_NOT_FOUND,
                metadata=metadata,
            )
        if status == 404:
            error_id = self._logged(
                "unknown model", said, f"{self.env}_MODEL and the server at {self.env}_BASE_URL"
            )
            return FailedPrecondition(
                "the LLM provider does not know the configured model: the gateway's operator "
                f"must configure one it serves (error id {error_id})",
                reason=LLM_MODEL_NOT_FOUND,
                metadata=metadata,
            )
        error_id = self._logged("request rejected", said, "the provider's message")
        return FailedPrecondition(
            "the LLM provider rejected the request, and would again: the gateway's operator "
            f"finds the reason in its log (error id {error_id})",
            reason=LLM_REQUEST_REJECTED,
            metadata=metadata,
        )

    def _names_model(self, detail: str | None) -> bool:
        """Whether a provider's message names the model (a 404 for an unknown model does)."""
        return detail is not None and self.model.lower() in detail.lower()

    def _path_hint(self) -> str:
        """What to check of a base URL whose path a 404 says is wrong."""
        if self.provider == "anthropic":
            return f"the path of {self.env}_BASE_URL: the SDK adds /v1/messages to it"
        return f"the path of {self.env}_BASE_URL: OpenAI-compatible servers serve under /v1"

    def connection_error(
        self, detail: str, *, mid_answer: bool = False, made: int | None = None
    ) -> Unavailable:
        """The domain error for a server that cannot be reached or dropped the connection;
        `mid_answer`: it dropped it while an answer that had begun was read (never retried);
        `made`: the retries made before the last request (None: all that are made)."""
        if mid_answer:
            error_id = self._logged(
                "the connection broke off mid-answer (an answer is not retried once it began)",
                self.redact(detail),
                "the provider's status and the timeouts of any proxy before it",
            )
            return Unavailable(
                f"the LLM provider's answer broke off before its end; retry later "
                f"(error id {error_id})",
                reason=LLM_UNAVAILABLE,
            )
        error_id = self._logged(
            f"cannot reach the server{self._unanswered_retries(made)}",
            self.redact(detail),
            f"{self.env}_BASE_URL and that the server is running",
        )
        return Unavailable(
            f"the LLM provider cannot be reached; retry later (error id {error_id})",
            reason=LLM_UNAVAILABLE,
        )

    def unreadable_answer(self, what: str) -> Unavailable:
        """The domain error for an answer that does not follow the provider's protocol (not
        JSON, not the expected object, a stream that ended before its end marker): `what`
        went wrong, for the log."""
        error_id = self._logged(
            "unreadable answer", self.redact(what), f"{self.env}_BASE_URL and the provider's status"
        )
        return Unavailable(
            f"the LLM provider's answer could not be read; retry later (error id {error_id})",
            reason=LLM_UNAVAILABLE,
        )

    def read_as(
        self, value: object, kind: type[Wire], where: str, name: str, read: Callable[[Wire], R]
    ) -> R:
        """`read(value)` when `value` (`where` the answer held it: "the body") is of the
        protocol's type `kind` (`name`, "a chat completion"); UNAVAILABLE
        (`unreadable_answer`) when it is not, or when `read` meets a part of it that is not
        of its type (AttributeError, TypeError, ValueError)."""
        if not isinstance(value, kind):
            raise self.unreadable_answer(f"{where} is not {name}: {repr(value)[:200]}")
        try:
            return read(value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise self.unreadable_answer(f"{name} of unexpected shape ({exc})") from exc

    def timeout_error(
        self, *, mid_answer: bool = False, made: int | None = None, waited_s: float | None = None
    ) -> DeadlineExceeded:
        """The domain error for a server that did not answer within the timeout; `mid_answer`:
        an answer that had begun sent nothing more within it (never retried); `made`: the
        retries made before the last request (None: all that are made); `waited_s`: the
        request's timeout, when less than the provider's what was left of the caller's
        deadline (`deadlines.attempt_timeout`; None: the provider's)."""
        cut = waited_s if waited_s is not None and waited_s < self.timeout_s else None
        within = (
            f"within {self.timeout_s:g}s"
            if cut is None
            else f"within {cut:.2f}s, what was left of the caller's deadline"
        )
        waited = (
            f"no next piece of the answer {within} (an answer is not retried once it began)"
            if mid_answer
            else f"no answer {within}{self._unanswered_retries(made)}"
        )
        check = (
            "the provider, or raise STELLO_LLM_TIMEOUT_S"
            if cut is None
            else "the provider, or the caller's deadline"
        )
        error_id = self._logged(waited, "timeout", check)
        return DeadlineExceeded(
            f"the LLM provider did not answer in time; retry later (error id {error_id})",
            reason=LLM_TIMEOUT,
        )
