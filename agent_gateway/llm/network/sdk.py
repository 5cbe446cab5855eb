"""What the SDK-backed network providers (openai, anthropic) share: their endpoint's
facts, their retries (`sdk_retries`), a request retried until it is answered, each
attempt waiting no longer than the caller's deadline leaves (`SdkProvider._opened`,
`retries`, `deadlines.attempt_timeout`), the errors
of a request that got no answer (`remote` maps them), the reading of a call's body with a
bound (`SdkProvider._whole`), `aclose` and ``async with``."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Generic, Protocol, Self, TypeAlias, TypeVar

import httpx2

from agent_gateway.llm.deadlines import attempt_timeout
from agent_gateway.llm.network.answers import AnswerBound, Model, built
from agent_gateway.llm.network.remote import Endpoint
from agent_gateway.llm.network.retries import Retries, retries_sent
from stello.errors import StelloError


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context the providers of the process verify their servers with: httpx's
    default (the certifi bundle, or SSL_CERT_FILE / SSL_CERT_DIR as the process started
    with). Each SDK client made its own, loading the CA bundle again (~20 ms of CPU for each
    provider made); a context is safe to share between connections."""
    return httpx2.create_ssl_context()


class _Closable(Protocol):
    async def close(self) -> None: ...


class Body(Protocol):
    """An answer of the SDK whose body is not read yet (``with_streaming_response``)."""

    @property
    def headers(self) -> httpx2.Headers: ...

    def iter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]: ...


class _StatusError(Protocol):
    """An SDK's exception for an error answer (its APIStatusError)."""

    @property
    def response(self) -> httpx2.Response: ...


ClientT = TypeVar("ClientT", bound=_Closable)
StatusErrorT = TypeVar("StatusErrorT", bound=_StatusError)

Request: TypeAlias = Callable[[dict[str, str], float], AbstractAsyncContextManager[Body]]
"""One request of a call, sent with the headers (`retries.Retries.run`) and the timeout
(`deadlines.attempt_timeout`) it is given, its answer opened through the SDK's
``with_streaming_response``."""


def sdk_retries(
    endpoint: Endpoint, answered: type[StatusErrorT], unanswered: type[Exception]
) -> Retries:
    """The retries of the provider of `endpoint` through an SDK whose class for an error
    answer is `answered` (its APIStatusError) and for a request that got no answer
    `unanswered` (its APIConnectionError)."""

    def answer_of(exc: Exception) -> httpx2.Response | None:
        return exc.response if isinstance(exc, answered) else None

    return Retries(
        endpoint.provider, endpoint.max_retries, endpoint.longest_wait_s, answer_of, unanswered
    )


class SdkProvider(Generic[ClientT]):
    """What the SDK-backed providers share: their endpoint's facts, the errors of a
    request that got no answer, `aclose` and ``async with``."""

    _client: ClientT
    _endpoint: Endpoint
    _retries: Retries
    _max_context_tokens: int
    _record_bytes: int

    @property
    def max_context_tokens(self) -> int:
        """The model's context window, in tokens."""
        return self._max_context_tokens

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._endpoint.model

    def _unanswered(
        self,
        exc: BaseException,
        timeout: type[Exception],
        connection: type[Exception],
        *,
        mid_answer: bool = False,
    ) -> StelloError | None:
        """The domain error of a request that timed out or never reached the server (`timeout`
        and `connection` are the SDK's classes for those), or whose answer's content-encoding
        did not decode; None when the server answered.

        `mid_answer`: the failure came while an answer that had begun was read, a stream
        or a body (a request is retried, never an answer once it began): a server
        that stopped sending, or a connection that broke off.
        """
        if _undecodable(exc):
            return self._endpoint.unreadable_answer(
                f"the answer could not be decompressed ({_cause(exc)})"
            )
        made = _retries_before(exc)
        if isinstance(exc, timeout | httpx2.TimeoutException):
            return self._endpoint.timeout_error(
                mid_answer=mid_answer, made=made, waited_s=_timeout_of(exc)
            )
        if isinstance(exc, connection | httpx2.HTTPError):
            return self._endpoint.connection_error(_cause(exc), mid_answer=mid_answer, made=made)
        return None

    async def _opened(self, stack: AsyncExitStack, request: Request) -> Body:
        """The answer of `request`, its request retried (`retries.Retries`) until it is
        answered, entered on `stack`; each request sent with the headers the retries give
        it, and the provider's timeout at most what is left of the caller's deadline
        (`deadlines.attempt_timeout`: the timeout of the reading of its answer too)."""
        timeout_s = self._endpoint.timeout_s
        return await self._retries.run(
            lambda headers: stack.enter_async_context(request(headers, attempt_timeout(timeout_s)))
        )

    async def _whole(self, response: Body, kind: type[Model]) -> Model | object:
        """The body of a call's answer (not streamed), read as the SDK reads one, up to
        `answers.answer_limit` of its bytes (`AnswerBound.whole`): a JSON object built as
        `kind` (leniently, as the SDK builds it), any other JSON value as it is, and a body
        neither JSON nor said to be as its text.

        Raises:
            ResourceExhausted: reason LLM_ANSWER_TOO_LARGE, the body passed the limit.
            Unavailable: the body is said to be JSON and is not (`Endpoint.unreadable_answer`).
        """
        bound = AnswerBound(self._endpoint.provider, self._record_bytes)
        body = await bound.whole(response.iter_bytes())
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:  # or nests past what json reads
            media = response.headers.get("content-type", "").split(";")[0].strip()
            if media.endswith("json"):
                raise self._endpoint.unreadable_answer(f"the body is not JSON ({exc})") from exc
            return body.decode("utf-8", "replace")
        return built(kind, data)

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


def _cause(exc: BaseException) -> str:
    """What went wrong under `exc`: the message of the innermost of its causes (or of itself)
    that has one, else the innermost one's type ("ReadError")."""
    chain: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and at not in chain:
        chain.append(at)
        at = at.__cause__
    for error in reversed(chain):
        if str(error):
            return str(error)
    return type(chain[-1]).__name__


def _retries_before(exc: BaseException) -> int | None:
    """The retries made before the request that failed with `exc`; None when it does not
    say."""
    request = _request_of(exc)
    return None if request is None else retries_sent(request)


def _timeout_of(exc: BaseException) -> float | None:
    """The timeout of the request that timed out with `exc` (of its answer's reading);
    None when it does not say."""
    request = _request_of(exc)
    timeouts = request.extensions.get("timeout") if request is not None else None
    read = timeouts.get("read") if isinstance(timeouts, dict) else None
    return float(read) if isinstance(read, int | float) else None


def _request_of(exc: BaseException) -> httpx2.Request | None:
    """The request that failed with `exc` (the SDKs' errors and httpx's carry theirs);
    None when it has none."""
    try:
        request = getattr(exc, "request", None)
    except RuntimeError:  # an httpx error made without its request
        return None
    return request if isinstance(request, httpx2.Request) else None


def _undecodable(exc: BaseException) -> bool:
    """Whether `exc` or one of its causes is an answer's content-encoding that did not decode
    (a body said to be gzip that is not)."""
    at: BaseException | None = exc
    for _ in range(8):
        if at is None:
            return False
        if isinstance(at, httpx2.DecodingError):
            return True
        at = at.__cause__
    return False
