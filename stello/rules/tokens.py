"""The token estimate of a record (DESIGN §4.3, §5.14): one rule for storage and the gateway.

STELLO-SPEC §4.7's ceil(length / 4), length in code points, with the names
and arguments of an assistant record's tool calls counted too (the model
reads them). Storage stores it per record and cumulatively through the SQL
function ``stello_record_tokens`` of migration 0006, which computes exactly
this; the gateway uses this one for text it has not stored yet. What a model
really counts differs (CJK text ~4x more): the gateway calibrates it
(`agent_gateway.history.budget`).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["estimate_tokens", "record_tokens"]


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4): the spec's estimate of one text."""
    return (len(text) + 3) // 4


def record_tokens(content: str, tool_calls: Iterable[tuple[str, str]] = ()) -> int:
    """The estimate of one record: its content and its tool calls' (name, arguments_json)."""
    length = len(content) + sum(len(name) + len(arguments) for name, arguments in tool_calls)
    return (length + 3) // 4
