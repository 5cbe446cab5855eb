"""Which built-in tools a turn offers, and running them (DESIGN §4.2, §4.5).

- ``stello_create_session`` when ``STELLO_GATEWAY_BUILTIN_TOOLS`` is on (`create_session`);
- the three memory tools when the request asks for them (`memory_tools` set),
  else when ``STELLO_GATEWAY_MEMORY_TOOLS`` is on (`memory`);
- ``activate_skill`` when the session's allow-list leaves at least one
  configured skill (`skills`): unset = every skill, ``[]`` = none (no tool).

The choice is made once per turn (`BuiltinTools.for_turn`, from what BeginTurn
answered: no call of its own) and the turn's
`TurnTools` runs what the model calls; a name the turn did not offer is an
error result (``Unknown tool: <name>``), never a failed turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent_gateway.clients import Caller, TreeClient
from agent_gateway.llm import ToolCallSpec, ToolSpec
from agent_gateway.tools.base import (
    ACTIVATE_SKILL,
    CREATE_SESSION,
    MEMORY_FORGET,
    MEMORY_RECALL,
    MEMORY_REMEMBER,
    BuiltinTool,
    ToolOutcome,
)
from agent_gateway.tools.create_session import CREATE_SESSION_SPEC, CreateSessionTool
from agent_gateway.tools.memory import MEMORY_SPECS, MemoryTools
from agent_gateway.tools.skills import Skill, SkillActivation, SkillRegistry, activate_skill_spec


@dataclass(frozen=True, slots=True)
class TurnTools:
    """The built-in tools one turn offers: their specs, and each tool by the name it answers."""

    specs: tuple[ToolSpec, ...]
    tools: Mapping[str, BuiltinTool] = field(default_factory=dict)

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
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolOutcome(f"Unknown tool: {call.name}", is_error=True)
        return await tool.run(caller, space_id, session_id, call, request_id)


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
        which also proves the session is the caller's, skills configured or not).

        Raises:
            NotFound: the session is not in the space.
        """
        config = await self._tree.get_config(caller, space_id, session_id)
        allowed = config.skills.names if config is not None and config.HasField("skills") else None
        return self._skills.visible(allowed)

    @property
    def skills(self) -> SkillRegistry:
        """The configured skills."""
        return self._skills

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
        tools: dict[str, BuiltinTool] = {}
        if self._create_session is not None:
            specs.append(CREATE_SESSION_SPEC)
            tools[CREATE_SESSION] = self._create_session
        if self.memory_offered(memory_tools):
            specs.extend(MEMORY_SPECS)
            tools.update(
                dict.fromkeys((MEMORY_RECALL, MEMORY_REMEMBER, MEMORY_FORGET), self._memory)
            )
        skills = self._skills.visible(allowed)
        if skills:
            specs.append(activate_skill_spec(skills))
            tools[ACTIVATE_SKILL] = SkillActivation(tuple(skills))
        return TurnTools(tuple(specs), tools)
