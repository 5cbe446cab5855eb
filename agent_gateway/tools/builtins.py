"""Which built-in tools a turn offers, and running them (DESIGN §4.2, §4.5).

- ``stello_create_session`` when ``STELLO_GATEWAY_BUILTIN_TOOLS`` is on (`tools`);
- the three memory tools when the request asks for them (`memory_tools` set),
  else when ``STELLO_GATEWAY_MEMORY_TOOLS`` is on (`memory_tools`);
- ``activate_skill`` when the session's allow-list leaves at least one
  configured skill (`skills`): unset = every skill, ``[]`` = none (no tool).

The choice is made once per turn (`BuiltinTools.for_turn`, from what BeginTurn
answered: no call of its own) and the turn's
`TurnTools` runs what the model calls; a name the turn did not offer is an
error result (``Unknown tool: <name>``), never a failed turn.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from agent_gateway.clients import Caller, TreeClient
from agent_gateway.llm import ToolCallSpec, ToolSpec
from agent_gateway.tools.create_session import (
    ACTIVATE_SKILL,
    CREATE_SESSION,
    CREATE_SESSION_SPEC,
    MEMORY_FORGET,
    MEMORY_RECALL,
    MEMORY_REMEMBER,
    CreateSessionTool,
    ToolOutcome,
)
from agent_gateway.tools.memory import MEMORY_SPECS, MemoryTools
from agent_gateway.tools.skills import Skill, SkillRegistry, activate, activate_skill_spec
from stello.idempotency import MAX_REQUEST_ID_CHARS

MEMORY_NAMES = frozenset({MEMORY_RECALL, MEMORY_REMEMBER, MEMORY_FORGET})


def _write_id(request_id: str) -> str:
    """The request id of a memory write: the call's, kept within storage's 200 characters
    whatever the provider's call ids look like."""
    rid = f"tool/{request_id}"
    if len(rid) <= MAX_REQUEST_ID_CHARS:
        return rid
    return f"tool/sha256-{hashlib.sha256(request_id.encode()).hexdigest()}"


@dataclass(frozen=True, slots=True)
class TurnTools:
    """The built-in tools one turn offers, and their runner."""

    specs: tuple[ToolSpec, ...]
    create_session: CreateSessionTool | None = None
    memory: MemoryTools | None = None
    skills: tuple[Skill, ...] = ()

    async def run(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        call: ToolCallSpec,
        request_id: str,
    ) -> ToolOutcome:
        """Run one built-in call; failures (a tool not offered included) are error outcomes.

        `request_id` makes a write idempotent (the turn derives it from its lease
        and the call id).
        """
        if call.name == CREATE_SESSION and self.create_session is not None:
            return await self.create_session.run(caller, space_id, session_id, call, request_id)
        if call.name in MEMORY_NAMES and self.memory is not None:
            return await self.memory.run(caller, space_id, call, _write_id(request_id))
        if call.name == ACTIVATE_SKILL and self.skills:
            text, is_error = activate(self.skills, call.arguments)
            return ToolOutcome(text, is_error=is_error)
        return ToolOutcome(f"Unknown tool: {call.name}", is_error=True)


class BuiltinTools:
    """The gateway's own tools, chosen per turn and run on the caller's behalf."""

    def __init__(
        self,
        *,
        create_session: CreateSessionTool | None,
        memory: MemoryTools,
        memory_by_default: bool,
        skills: SkillRegistry,
        tree: TreeClient,
    ) -> None:
        self._create_session = create_session
        self._memory = memory
        self._memory_by_default = memory_by_default
        self._skills = skills
        self._tree = tree

    async def visible_skills(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> list[Skill]:
        """The configured skills the session's allow-list leaves (ListSkills: one tree read,
        none when no skill is configured).

        Raises:
            NotFound: the session is not in the space.
        """
        if not len(self._skills):
            return []
        config = await self._tree.get_config(caller, space_id, session_id)
        allowed = config.skills.names if config is not None and config.HasField("skills") else None
        return self._skills.visible(allowed)

    def all_skills(self) -> list[Skill]:
        """Every configured skill, in file order."""
        return list(self._skills)

    def memory_offered(self, memory_tools: bool | None) -> bool:
        """Whether a turn offers the memory tools (`memory_tools`: the request's choice, None
        = the gateway's setting)."""
        return self._memory_by_default if memory_tools is None else memory_tools

    def for_turn(
        self, *, memory_tools: bool | None = None, allowed: Sequence[str] | None = None
    ) -> TurnTools:
        """The tools a turn offers: `memory_tools` as `memory_offered`; `allowed`, the
        session's skill allow-list as BeginTurn answered it (None = unset, every skill)."""
        specs: list[ToolSpec] = []
        if self._create_session is not None:
            specs.append(CREATE_SESSION_SPEC)
        with_memory = self.memory_offered(memory_tools)
        if with_memory:
            specs.extend(MEMORY_SPECS)
        skills = self._skills.visible(allowed)
        if skills:
            specs.append(activate_skill_spec(skills))
        return TurnTools(
            tuple(specs),
            create_session=self._create_session,
            memory=self._memory if with_memory else None,
            skills=tuple(skills),
        )
