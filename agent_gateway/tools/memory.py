"""The built-in shared memory tools (STELLO-SPEC §4.8), opt-in per gateway and per request.

- ``stello_memory_recall(slug)`` answers ``{"body"}``; an empty or unknown slug
  is an error result;
- ``stello_memory_remember(slug, summary, body)`` upserts and answers
  ``{"slug"}``; a slug that is empty or trims to empty, a missing summary or
  body, or one storage would refuse (`stello.rules.memory_rules`), is an error result;
- ``stello_memory_forget(slug)`` removes and answers ``{"slug"}``, also for an
  unknown slug.

The slug is trimmed first (the model's white space is not part of a key).
Every failure is an error result the model sees, never a failed turn. The
writes go to storage at once, with a request id derived from the turn's lease
and the call: they stay even if the turn later fails (as a fork made by
``stello_create_session`` does), and a call is never applied twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from agent_gateway.clients import Caller
from agent_gateway.llm import RAW_ARGUMENTS_KEY, ToolCallSpec, ToolSpec
from agent_gateway.memory.shared import SharedMemory
from agent_gateway.tools.base import MEMORY_FORGET, MEMORY_RECALL, MEMORY_REMEMBER, ToolOutcome
from stello.errors import NotFound, StelloError, Violations
from stello.rules import memory_rules
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS

_SLUG = {"type": "string", "description": "The entry's slug (its key in the index)."}

MEMORY_SPECS = (
    ToolSpec(
        name=MEMORY_RECALL,
        description=(
            "Read an entry of the shared memory (the index lists the entries as "
            "'- slug: summary'). Returns its body."
        ),
        parameters={"type": "object", "properties": {"slug": _SLUG}, "required": ["slug"]},
    ),
    ToolSpec(
        name=MEMORY_REMEMBER,
        description=(
            "Create or replace an entry of the shared memory, which every session of this "
            "space can recall. Returns its slug."
        ),
        parameters={
            "type": "object",
            "properties": {
                "slug": _SLUG,
                "summary": {
                    "type": "string",
                    "description": "One line saying what the entry holds (shown in the index).",
                },
                "body": {"type": "string", "description": "The entry's text."},
            },
            "required": ["slug", "summary", "body"],
        },
    ),
    ToolSpec(
        name=MEMORY_FORGET,
        description="Remove an entry of the shared memory. Returns its slug.",
        parameters={"type": "object", "properties": {"slug": _SLUG}, "required": ["slug"]},
    ),
)


def _write_id(request_id: str) -> str:
    """The request id of a memory write: the call's, kept within storage's 200 characters
    whatever the provider's call ids look like."""
    rid = f"tool/{request_id}"
    if len(rid) <= MAX_REQUEST_ID_CHARS:
        return rid
    return f"tool/sha256-{hashlib.sha256(request_id.encode()).hexdigest()}"


def _result(body: Mapping[str, str]) -> ToolOutcome:
    return ToolOutcome(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


def _error(text: str) -> ToolOutcome:
    return ToolOutcome(text, is_error=True)


def _slug(args: Mapping[str, Any]) -> str:
    """The trimmed slug; ValueError says what is wrong with it."""
    if RAW_ARGUMENTS_KEY in args:
        raise ValueError("the arguments must be a JSON object")
    value = args.get("slug")
    if not isinstance(value, str) or not value.strip():
        raise ValueError("slug is required (a non-empty string)")
    slug = value.strip()
    problem = memory_rules.slug_problem(slug)
    if problem:
        raise ValueError(f"slug {problem}")
    return slug


class MemoryTools:
    """Runs the three tools over the space's shared memory."""

    def __init__(self, memory: SharedMemory) -> None:
        self._memory = memory

    async def run(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        call: ToolCallSpec,
        request_id: str,
    ) -> ToolOutcome:
        """One call of a memory tool; every failure is an error outcome."""
        request_id = _write_id(request_id)
        try:
            slug = _slug(call.arguments)
            if call.name == MEMORY_RECALL:
                return await self._recall(caller, space_id, slug)
            if call.name == MEMORY_REMEMBER:
                return await self._remember(caller, space_id, slug, call.arguments, request_id)
            await self._memory.remove_entry(caller, space_id, slug, request_id=request_id)
            return _result({"slug": slug})
        except ValueError as exc:
            return _error(str(exc))
        except StelloError as exc:
            return _error(exc.message)

    async def _recall(self, caller: Caller, space_id: uuid.UUID, slug: str) -> ToolOutcome:
        try:
            entry = await self._memory.get_entry(caller, space_id, slug)
        except NotFound:
            return _error(f'Shared memory has no entry "{slug}"')
        return _result({"body": entry.body})

    async def _remember(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        slug: str,
        args: Mapping[str, Any],
        request_id: str,
    ) -> ToolOutcome:
        summary, body = args.get("summary"), args.get("body")
        for name, value in (("summary", summary), ("body", body)):
            if not isinstance(value, str) or not value:
                return _error(f"{name} is required (a non-empty string)")
        assert isinstance(summary, str) and isinstance(body, str)
        violations = Violations()
        self._memory.check_entry(slug, summary, body, violations)
        if violations.items:
            return _error("; ".join(f"{v.field} {v.description}" for v in violations.items))
        await self._memory.upsert_entry(
            caller, space_id, slug=slug, summary=summary, body=body, request_id=request_id
        )
        return _result({"slug": slug})
