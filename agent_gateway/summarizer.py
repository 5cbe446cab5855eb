"""The COMPRESS fork's summariser over the configured LLM provider (STELLO-SPEC §4.4.3).

`compose.Summarizer` is the need; this is the production answer: the
configured ``fork_compressor`` text in the compressor structure of spec §4.9,
through `agent_gateway.llm`. The provider is built on first use, so a gateway
whose provider is not available still serves everything but COMPRESS forks
(which then answer the provider's error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_gateway.llm import LLMProvider, Prompts, compress_records
from agent_gateway.llm.prompt_texts import FORK_COMPRESSOR
from stello.common.v1 import common_pb2

_ROLES = {
    common_pb2.RECORD_ROLE_SYSTEM: "system",
    common_pb2.RECORD_ROLE_USER: "user",
    common_pb2.RECORD_ROLE_ASSISTANT: "assistant",
    common_pb2.RECORD_ROLE_TOOL: "tool",
}


@dataclass(frozen=True, slots=True)
class _Line:
    role: str
    content: str


class ProviderSummarizer:
    """Summarises a fork's source records with the fork-compress prompt."""

    def __init__(self, provider: Callable[[], LLMProvider], prompts: Prompts) -> None:
        self._factory = provider
        self._provider: LLMProvider | None = None
        self._prompts = prompts

    async def summarize_for_fork(self, records: Sequence[common_pb2.Record]) -> str:
        """One LLM call over `records`; provider errors propagate as domain errors."""
        if self._provider is None:
            self._provider = self._factory()
        lines = [_Line(_ROLES.get(r.role, "user"), r.content) for r in records]
        prompt = self._prompts.text(FORK_COMPRESSOR)
        return await compress_records(self._provider, lines, self._prompts, prompt=prompt)
