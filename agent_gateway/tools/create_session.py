"""The built-in ``stello_create_session``: a fork of the turn's session, made by the model.

``stello_create_session`` (DESIGN §4.2, STELLO-SPEC §4.4.5) forks the
current session through the same saga as the Fork RPC. Its arguments are
checked like the spec's tool does: `label` required; `profile` must name a
configured profile (else the tool answers the configured ``unknown_profile``
text, the reference's ``Profile "<p>" 未注册`` under the ``zh`` preset, without
forking); only the keys present are passed on (absent `skills` stays absent,
``[]`` means no skills). Success answers ``{"sessionId", "label"}`` as JSON;
any failure (bad arguments, a refused fork) answers an error result the model
sees, never fails the turn. A fork made this way stays even if the turn fails.
With a fork guard set (`agent_gateway.forks.guard`), a session may fork itself only after
enough turns and a cooldown; a refusal is an error result too. The claim of a fork that
failed, or whose turn was cancelled while it was being made, is given back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from agent_gateway.clients import Caller
from agent_gateway.forks.compose import ContextMode
from agent_gateway.forks.creator import SessionCreator
from agent_gateway.forks.guard import ForkGuard
from agent_gateway.forks.inputs import ForkInput
from agent_gateway.forks.profiles import ProfileRegistry
from agent_gateway.llm import RAW_ARGUMENTS_KEY, Prompts, ToolCallSpec, ToolSpec
from agent_gateway.llm.prompts.texts import UNKNOWN_PROFILE
from agent_gateway.tools.base import CREATE_SESSION, ToolOutcome
from agent_gateway.tools.skills import SkillRegistry
from stello.errors import StelloError
from stello.storage.v1 import storage_pb2
from stello.validation import LABEL_ONE_LINE, MAX_LABEL_CHARS, has_control

CREATE_SESSION_SPEC = ToolSpec(
    name=CREATE_SESSION,
    description=(
        "Create a new child session (a fork of the current session) for a sub-task. "
        "Returns the new session's id and label."
    ),
    parameters={
        "type": "object",
        "properties": {
            "label": {"type": "string", "description": "Label of the new session."},
            "systemPrompt": {"type": "string", "description": "Its system prompt."},
            "prompt": {"type": "string", "description": "Its opening assistant message."},
            "profile": {"type": "string", "description": "Name of a fork profile to apply."},
            "context": {
                "type": "string",
                "enum": ["none", "inherit", "compress"],
                "description": "What it starts from: nothing, this conversation, or a summary.",
            },
            "profileVars": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Values of the profile's template variables.",
            },
            "skills": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Skills of the new session ([] = none).",
            },
        },
        "required": ["label"],
    },
)


class CreateSessionTool:
    """``stello_create_session``: forks the turn's session through the Fork saga."""

    def __init__(
        self,
        creator: SessionCreator,
        profiles: ProfileRegistry,
        prompts: Prompts,
        skills: SkillRegistry,
        guard: ForkGuard | None = None,
    ) -> None:
        self._creator = creator
        self._profiles = profiles
        self._prompts = prompts
        self._skills = skills
        self._guard = guard if guard is not None and guard.enabled else None

    async def run(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        call: ToolCallSpec,
        request_id: str,
    ) -> ToolOutcome:
        """Run one call; failures become error outcomes for the model.

        `request_id` makes the fork idempotent (the turn derives it from its request, the
        call's place in it and what it asks: `turns.rounds.builtin_request_id`).
        """
        try:
            fork = self._fork_input(space_id, session_id, call.arguments, request_id)
        except ValueError as exc:
            return ToolOutcome(str(exc), is_error=True)
        claim: storage_pb2.ClaimForkResponse | None = None
        try:
            if self._guard is not None:
                granted = await self._guard.claim(caller, space_id, session_id)
                if isinstance(granted, str):
                    return ToolOutcome(granted, is_error=True)
                claim = granted
            session = await self._creator.fork(caller, fork)
        except StelloError as exc:
            if self._guard is not None and claim is not None:
                await self._guard.give_back(caller, space_id, session_id, claim)
            return ToolOutcome(exc.message, is_error=True)
        except asyncio.CancelledError:
            if self._guard is not None and claim is not None:
                await self._guard.give_back_cancelled(caller, space_id, session_id, claim)
            raise
        body = {"sessionId": session.id, "label": session.label}
        return ToolOutcome(json.dumps(body, ensure_ascii=False, separators=(",", ":")))

    def _fork_input(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        args: Mapping[str, Any],
        request_id: str,
    ) -> ForkInput:
        """Spec §4.4.5's arguments as a Fork request; ValueError says what the model got wrong."""
        if RAW_ARGUMENTS_KEY in args:
            raise ValueError("the arguments must be a JSON object")
        label = args.get("label")
        if not isinstance(label, str) or not label.strip():
            raise ValueError("label is required (a non-empty string)")
        if len(label) > MAX_LABEL_CHARS:
            raise ValueError(f"label must be at most {MAX_LABEL_CHARS} characters")
        if has_control(label):
            raise ValueError(f"label {LABEL_ONE_LINE}")
        profile = _optional_str(args, "profile")
        if profile is not None and not self._profiles.has(profile):
            raise ValueError(self._prompts.text(UNKNOWN_PROFILE, profile=profile))
        context = _optional_str(args, "context")
        if context is not None and context not in ContextMode.__members__.values():
            raise ValueError("context must be one of none, inherit, compress")
        variables = args.get("profileVars", {})
        if not isinstance(variables, dict) or not all(
            isinstance(value, str) for value in variables.values()
        ):
            raise ValueError("profileVars must be an object of strings")
        skills = args.get("skills")
        if skills is not None and (
            not isinstance(skills, list) or not all(isinstance(s, str) for s in skills)
        ):
            raise ValueError("skills must be an array of strings")
        for index, name in enumerate(skills or ()):
            if (unknown := self._skills.unknown(name)) is not None:
                raise ValueError(f"skills[{index}] {unknown}")
        return ForkInput(
            space_id=space_id,
            source_id=session_id,
            label=label,
            profile=profile,
            profile_vars=variables,
            system_prompt=_optional_str(args, "systemPrompt"),
            skills=tuple(skills) if skills is not None else None,
            context=ContextMode(context) if context is not None else None,
            prompt=_optional_str(args, "prompt"),
            request_id=request_id,
            request_hash=_arguments_hash(session_id, args),
        )


def _arguments_hash(session_id: uuid.UUID, args: Mapping[str, Any]) -> bytes:
    """The fingerprint of one call's fork: its session and its arguments."""
    canonical = json.dumps([str(session_id), args], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).digest()


def _optional_str(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value
