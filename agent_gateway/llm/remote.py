"""What the network providers (openai, anthropic) share: error mapping and tool arguments.

Errors. A provider's failure becomes one of the kernel's domain errors, with a
message that says what to do and never the API key:

- no connection, HTTP 408/409/5xx (after the SDK's retries) -> `Unavailable`;
- HTTP 429 (after retries) and 402 -> `ResourceExhausted`;
- HTTP 401/403 -> `FailedPrecondition` ("the LLM provider rejected the API key");
- HTTP 404 -> `FailedPrecondition` (unknown model or wrong base URL);
- a timeout (after retries) -> `DeadlineExceeded`;
- HTTP 400, 413, 422 and any other 4xx -> `FailedPrecondition` carrying the
  provider's own message. Not `InvalidArgument`: the caller's request was
  valid, the provider refused the context the gateway built from it (too
  long, a parameter the model does not take), which only a change of
  configuration or of the session can fix.

Tool arguments. A model may produce arguments that are not a JSON object
(truncated or malformed JSON). They are neither dropped nor turned into `{}`:
`parse_tool_arguments` keeps the raw text under `RAW_ARGUMENTS_KEY`, so the
tool (built-in or client) sees what the model sent and can answer with an
error the model can correct.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

import httpx2

from agent_gateway.llm.base import JsonObject
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
    StelloError,
    Unavailable,
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

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Where tool arguments that are not a JSON object are kept, as the model's raw text."""

MAX_DETAIL_CHARS = 500
"""A provider's error message is cut to this many characters."""


def parse_tool_arguments(text: str, *, tool: str) -> JsonObject:
    """The tool-call arguments the model wrote as JSON text.

    Args:
        text: the arguments as the provider sent them ('' = no arguments).
        tool: the tool's name, for the log line.

    Returns:
        The decoded JSON object; `{}` for blank text; otherwise (invalid JSON,
        or JSON that is not an object) ``{RAW_ARGUMENTS_KEY: text}``.
    """
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    logger.warning(
        "the model called tool %r with arguments that are not a JSON object (%d chars); "
        "passing them on raw under %r",
        tool,
        len(text),
        RAW_ARGUMENTS_KEY,
    )
    return {RAW_ARGUMENTS_KEY: text}


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


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Which provider, server and model a provider talks to: the facts its errors report."""

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
        """Provider, server and model, for a message."""
        return f"{self.provider} at {self.base_url}, model {self.model}"

    def redact(self, text: str) -> str:
        """`text` cut to `MAX_DETAIL_CHARS`, with the API key (should a server echo it) masked."""
        if self.secret and len(self.secret) >= 4:
            text = text.replace(self.secret, "***")
        if len(text) > MAX_DETAIL_CHARS:
            text = text[:MAX_DETAIL_CHARS] + "..."
        return text

    def _metadata(self, status: int | None = None) -> dict[str, str]:
        metadata = {"provider": self.provider, "model": self.model}
        if status is not None:
            metadata["http_status"] = str(status)
        return metadata

    def _retries(self) -> str:
        if not self.max_retries:
            return ""
        return f" after {self.max_retries} {'retry' if self.max_retries == 1 else 'retries'}"

    def status_error(self, status: int, detail: str | None, *, retried: bool = True) -> StelloError:
        """The domain error for an HTTP error answer with `status` and the provider's `detail`.

        `retried` False: the error came inside a stream already under way, which
        the SDK does not retry (`status` then stands for the error's type).
        """
        said = f"HTTP {status}" + (f": {self.redact(detail)}" if detail else "")
        if not retried:
            said = f"error during the answer, as {said}"
        retries = self._retries() if retried else ""
        metadata = self._metadata(status)
        if status in (401, 403):
            return FailedPrecondition(
                f"the LLM provider rejected the API key ({self.where()}; {said}); "
                f"check {self.env}_API_KEY",
                reason=LLM_API_KEY_REJECTED,
                metadata=metadata,
            )
        if status in (402, 429):
            return ResourceExhausted(
                f"the LLM provider is rate limiting or out of quota ({self.where()}; {said})"
                f"{retries}; retry later or raise the provider's limits",
                reason=LLM_RATE_LIMITED,
                metadata=metadata,
            )
        if status in (408, 409) or status >= 500:
            return Unavailable(
                f"the LLM provider is unavailable ({self.where()}; {said}){retries}; retry later",
                reason=LLM_UNAVAILABLE,
                metadata=metadata,
            )
        if status == 404:
            return FailedPrecondition(
                f"the LLM provider does not know this model or path ({self.where()}; {said}); "
                f"check {self.env}_MODEL and {self.env}_BASE_URL",
                reason=LLM_MODEL_NOT_FOUND,
                metadata=metadata,
            )
        return FailedPrecondition(
            f"the LLM provider rejected the request ({self.where()}; {said})",
            reason=LLM_REQUEST_REJECTED,
            metadata=metadata,
        )

    def connection_error(self, detail: str) -> Unavailable:
        """The domain error for a server that cannot be reached or dropped the connection."""
        return Unavailable(
            f"cannot reach the LLM provider ({self.where()}){self._retries()}: "
            f"{self.redact(detail)}; check {self.env}_BASE_URL and that the server is running",
            reason=LLM_UNAVAILABLE,
            metadata=self._metadata(),
        )

    def timeout_error(self) -> DeadlineExceeded:
        """The domain error for a server that did not answer within the timeout."""
        return DeadlineExceeded(
            f"the LLM provider did not answer within {self.timeout_s:g}s ({self.where()})"
            f"{self._retries()}; retry later or raise STELLO_LLM_TIMEOUT_S",
            reason=LLM_TIMEOUT,
            metadata=self._metadata(),
        )


class _Closable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


class SdkProvider(Generic[ClientT]):
    """What the SDK-backed providers share: their endpoint's facts, the errors of a
    request that got no answer, `aclose` and ``async with``."""

    _client: ClientT
    _endpoint: Endpoint
    _max_context_tokens: int

    @property
    def max_context_tokens(self) -> int:
        """The model's context window, in tokens."""
        return self._max_context_tokens

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._endpoint.model

    def _unanswered(
        self, exc: BaseException, timeout: type[Exception], connection: type[Exception]
    ) -> StelloError | None:
        """The domain error of a request that timed out or never reached the server (`timeout`
        and `connection` are the SDK's classes for those), or None when the server answered."""
        if isinstance(exc, timeout | httpx2.TimeoutException):
            return self._endpoint.timeout_error()
        if isinstance(exc, connection):
            cause = exc.__cause__
            return self._endpoint.connection_error(str(cause) if cause else str(exc))
        if isinstance(exc, httpx2.HTTPError):
            return self._endpoint.connection_error(str(exc) or type(exc).__name__)
        return None

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
