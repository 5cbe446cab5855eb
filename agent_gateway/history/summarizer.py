"""The COMPRESS fork's summariser over the configured LLM provider (STELLO-SPEC §4.4.3).

`compose.Summarizer` is the need; this is the production answer: the
configured ``fork_compressor`` text in the fold structure of DESIGN §5.14
(the source's newest summary, then its records after it), through
`agent_gateway.history.folding`: at most `CALLS` calls, the newest records folded
first and the older ones named by count when they do not fit (DESIGN §4.3).
The provider is built on first use, so a gateway whose provider is not
available still serves everything but COMPRESS forks (which then answer the
provider's error). An answer with no text is such an error
(`folding.EmptyAnswer`): the fork makes no session rather than a child
with an empty ``<parent_context>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_gateway.history.folding import Folder, Packer
from agent_gateway.history.records import context_record
from agent_gateway.llm import Prompts
from agent_gateway.llm.prompts.texts import FORK_COMPRESSOR
from stello.common.v1 import common_pb2

CALLS = 3
"""Calls one COMPRESS fork may make."""
WHAT = "a compress fork's summary of its source"  # context="compress", as clients say it
"""The call, as a failed call's message names it (the fork then makes no session)."""


class ProviderSummarizer:
    """Summarises a fork's source with the fork-compress prompt."""

    def __init__(self, folder: Callable[[], Folder], prompts: Prompts) -> None:
        self._factory = folder
        self._folder: Folder | None = None
        self._prompts = prompts

    async def summarize_for_fork(
        self,
        records: Sequence[common_pb2.Record],
        *,
        summary: str | None = None,
        omitted: int = 0,
    ) -> str:
        """The source's summary and records folded (see the module docstring)."""
        if self._folder is None:
            self._folder = self._factory()
        folder = self._folder
        prompt = self._prompts.text(FORK_COMPRESSOR)
        capacity = folder.capacity(prompt)
        packer = Packer(capacity, CALLS)
        taken = 0
        for record in reversed(records):
            if not packer.add(folder.line(context_record(record), capacity)):
                break
            taken += 1
        omitted += len(records) - taken
        text = summary
        for i, chunk in enumerate(packer.in_order()):
            text = await folder.fold(
                text, chunk, prompt=prompt, what=WHAT, omitted=omitted if i == 0 else 0
            )
        return text or ""
