"""Tool arguments a model wrote, read as a JSON object (`parse_tool_arguments`).

A model may produce arguments that are not a JSON object (truncated or malformed JSON;
text Python's json reads and JSON has not: NaN, Infinity, 1e999, nesting past what it
reads, `stello.formats.json_text`), which storage would refuse. They are neither dropped nor
turned into `{}`: `parse_tool_arguments` keeps the raw text under `RAW_ARGUMENTS_KEY`, so
the tool (built-in or client) sees what the model sent and can answer with an error the
model can correct.
"""

from __future__ import annotations

import logging

from agent_gateway.llm.base import JsonObject
from stello.formats import json_text

logger = logging.getLogger(__name__)

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Where tool arguments that are not a JSON object are kept, as the model's raw text."""


def parse_tool_arguments(text: str, *, tool: str) -> JsonObject:
    """The tool-call arguments the model wrote as JSON text.

    Args:
        text: the arguments as the provider sent them ('' = no arguments).
        tool: the tool's name, for the log line.

    Returns:
        The decoded JSON object; `{}` for blank text; otherwise (not strict JSON,
        or JSON that is not an object) ``{RAW_ARGUMENTS_KEY: text}``.
    """
    if not text.strip():
        return {}
    try:
        value = json_text.loads(text)
    except ValueError:
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
