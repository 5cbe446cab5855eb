"""The configured provider, built on first use, and what a gateway without its API key says.

A gateway whose provider has no API key still serves everything that needs no LLM. It
warns once at start, naming the variable to set; each call that needs the model then
fails with FAILED_PRECONDITION, reason LLM_API_KEY_MISSING and a plain sentence ending
"(error id <id>)" — like every provider error (agent.proto), it names no provider and no
setting: those are in the gateway's log under that error id.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence

from agent_gateway.llm.base import Completion, LLMMessage, LLMProvider, StreamEvent, ToolSpec
from stello.errors import FailedPrecondition, new_error_id
from stello.reasons import LLM_API_KEY_MISSING

logger = logging.getLogger(__name__)

__all__ = ["LazyProvider"]


class LazyProvider:
    """The configured provider, built on first use.

    A gateway whose provider cannot be built (a missing API key) still serves
    everything that needs no LLM; the calls that do answer the build error.
    """

    def __init__(self, build: Callable[[], LLMProvider], *, missing_key: str | None = None) -> None:
        """`missing_key`: what the operator must set, when the provider has no API key
        (`missing_api_key`), warned about at start."""
        self._build = build
        self._missing_key = missing_key
        self._provider: LLMProvider | None = None

    @property
    def provider(self) -> LLMProvider:
        """The provider (built now if it was not yet).

        Raises:
            FailedPrecondition: LLM_API_KEY_MISSING, in the client's words (the
                operator's are logged under the error id the message ends with).
        """
        if self._provider is None:
            try:
                self._provider = self._build()
            except FailedPrecondition as exc:
                if exc.reason != LLM_API_KEY_MISSING:
                    raise
                raise _key_missing(exc.message) from None
        return self._provider

    @property
    def max_context_tokens(self) -> int:
        """The provider's context window."""
        return self.provider.max_context_tokens

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """The provider's `complete`."""
        return await self.provider.complete(messages, tools=tools, max_tokens=max_tokens)

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The provider's `stream`."""
        return self.provider.stream(messages, tools=tools, max_tokens=max_tokens)

    def start(self) -> None:
        """Warn once when no turn can be served: the provider has no API key. (The
        provider itself is built on first use.)"""
        if self._missing_key is not None:
            logger.warning("the LLM provider cannot answer any turn: %s", self._missing_key)

    async def stop(self) -> None:
        """Close the provider's HTTP client, if it was built and has one (shutdown)."""
        close = getattr(self._provider, "aclose", None)
        if close is not None:
            await close()


def _key_missing(operator_message: str) -> FailedPrecondition:
    """The client's error for a provider without its API key; the operator's words logged
    under its error id."""
    error_id = new_error_id()
    logger.warning("LLM provider error (id %s): %s", error_id, operator_message)
    return FailedPrecondition(
        "the gateway has no API key for its LLM provider: its operator must configure one "
        f"(error id {error_id})",
        reason=LLM_API_KEY_MISSING,
    )
