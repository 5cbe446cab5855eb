"""What every tool of a turn shares: the built-in names, a tool's answer, the client tools' checks.

A built-in tool is anything with `BuiltinTool.run`: the turn finds it by the
name the model called (`builtins.TurnTools`). Client tools are declared per
request (`ToolDefinition`); when the model calls one, the turn stops and returns
the call to the client.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from google.protobuf import json_format

from agent_gateway.clients import Caller
from agent_gateway.llm import ToolCallSpec, ToolSpec
from stello.common.v1 import common_pb2
from stello.errors import Violations

CREATE_SESSION = "stello_create_session"
MEMORY_RECALL = "stello_memory_recall"
MEMORY_REMEMBER = "stello_memory_remember"
MEMORY_FORGET = "stello_memory_forget"
ACTIVATE_SKILL = "activate_skill"
BUILTIN_NAMES = frozenset(
    {CREATE_SESSION, MEMORY_RECALL, MEMORY_REMEMBER, MEMORY_FORGET, ACTIVATE_SKILL}
)
"""Every name the gateway may offer as its own (a client tool may not take one)."""
MAX_TOOLS = 128
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every provider accepts as a function name."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's answer: the tool record's content and whether the call failed."""

    content: str
    is_error: bool = False


def client_tools(definitions: Sequence[common_pb2.ToolDefinition], v: Violations) -> list[ToolSpec]:
    """The request's client tools; names checked (pattern, unique, not a built-in)."""
    if len(definitions) > MAX_TOOLS:
        v.add("tools", f"must declare at most {MAX_TOOLS} tools, got {len(definitions)}")
        return []
    seen: set[str] = set()
    specs = []
    for i, tool in enumerate(definitions):
        name = tool.name
        if not TOOL_NAME.match(name):
            v.add(f"tools[{i}].name", "must be 1..64 characters of letters, digits, _ or -")
        elif name in BUILTIN_NAMES:
            v.add(f"tools[{i}].name", f"{name!r} is a built-in tool's name")
        elif name in seen:
            v.add(f"tools[{i}].name", f"{name!r} is declared twice")
        seen.add(name)
        parameters = (
            json_format.MessageToDict(tool.parameters) if tool.HasField("parameters") else {}
        )
        if parameters and parameters.get("type") != "object":
            v.add(f"tools[{i}].parameters", f"tool {name!r}: {_not_an_object(parameters)}")
        specs.append(ToolSpec(name, tool.description, parameters))
    return specs


def _not_an_object(schema: dict[str, object]) -> str:
    """Why a tool's parameters schema is refused: OpenAI and Anthropic take only an object."""
    got = f"type {schema['type']!r}" if "type" in schema else "no type"
    return (
        'must be an object schema, {"type": "object", "properties": {...}} (what OpenAI and '
        f"Anthropic take as a tool's parameters), got {got}"
    )


class BuiltinTool(Protocol):
    """A tool the gateway runs itself, on the caller's behalf."""

    async def run(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        call: ToolCallSpec,
        request_id: str,
    ) -> ToolOutcome:
        """Run one call of it; every failure is an error outcome the model sees, never raised.

        `request_id` makes a write idempotent (the turn derives it from its
        request and the call's place in it).
        """
        ...
