"""What the SDK-backed network providers (openai, anthropic) share: their endpoint's
facts, the errors of a request that got no answer (`remote` maps them), `aclose` and
``async with``."""

from __future__ import annotations

from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

import httpx2

from agent_gateway.llm.remote import Endpoint
from stello.errors import StelloError


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

        `mid_answer`: the failure came while a stream that had begun was read (the SDK
        retries a request, never a stream once it began): a server that stopped sending,
        or a connection that broke off.
        """
        if _undecodable(exc):
            return self._endpoint.unreadable_answer(
                f"the answer could not be decompressed ({_cause(exc)})"
            )
        if isinstance(exc, timeout | httpx2.TimeoutException):
            return self._endpoint.timeout_error(mid_answer=mid_answer)
        if isinstance(exc, connection | httpx2.HTTPError):
            return self._endpoint.connection_error(_cause(exc), mid_answer=mid_answer)
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
