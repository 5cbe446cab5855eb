"""The shared memory index of a turn's context (STELLO-SPEC §4.9 item 7, DESIGN §4.5).

Rendered fresh each turn from what BeginTurn answered (the first entries of the
space within the caps, and the space's count), right after the system prompt::

    <shared_memory_index>
    - <slug>: <summary>
    - ...
    <N> more: recall by slug          (only when the index shows fewer than the space holds)
    </shared_memory_index>

    <the two-line hint>

It is sent in every turn whose space holds an entry (the spec's adapter supplies
it on every send then); the hint, which names the memory tools, only in a turn
that offers them (without them the model could not follow it). Storage counts
it in the records' budget (the lines, and `overhead_tokens` for the rest); the
turn counts it again, exactly, as part of its context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_gateway.llm import Prompts
from agent_gateway.llm.prompts.texts import SHARED_MEMORY_HINT, SHARED_MEMORY_MORE
from stello.common.v1 import common_pb2
from stello.rules.memory_rules import index_line
from stello.rules.tokens import estimate_tokens
from stello.storage.v1 import storage_pb2

OPEN, CLOSE = "<shared_memory_index>", "</shared_memory_index>"
_WIDEST_COUNT = "1000000"
"""The overhead is estimated with a count this wide (more entries than a space holds)."""


def render_index(
    entries: Sequence[common_pb2.SharedMemoryEntry],
    total: int,
    prompts: Prompts,
    *,
    hinted: bool,
) -> str | None:
    """The index's text, with the hint when `hinted` (the turn offers the memory tools);
    None when it shows no entry (then nothing is sent)."""
    if not entries:
        return None
    lines = [OPEN, *(index_line(e.slug, e.summary) for e in entries)]
    if total > len(entries):
        lines.append(prompts.text(SHARED_MEMORY_MORE, count=str(total - len(entries))))
    lines.append(CLOSE)
    text = "\n".join(lines)
    return text + "\n\n" + prompts.text(SHARED_MEMORY_HINT) if hinted else text


@dataclass(frozen=True, slots=True)
class IndexCaps:
    """How much of the shared memory an index shows (STELLO_GATEWAY_MEMORY_INDEX_*)."""

    max_entries: int = 50
    max_tokens: int = 2000

    def window(self, prompts: Prompts, *, hinted: bool) -> storage_pb2.MemoryIndexWindow:
        """BeginTurn's caps of the index: these, and the estimate of the index's own text
        (the hint's too when `hinted`)."""
        more = prompts.text(SHARED_MEMORY_MORE, count=_WIDEST_COUNT)
        fixed = f"{OPEN}\n{more}\n{CLOSE}"
        if hinted:
            fixed += f"\n\n{prompts.text(SHARED_MEMORY_HINT)}"
        return storage_pb2.MemoryIndexWindow(
            max_entries=self.max_entries,
            max_tokens=self.max_tokens,
            overhead_tokens=estimate_tokens(fixed),
        )
