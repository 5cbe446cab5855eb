"""Skills: named instructions from the gateway's TOML file, and `activate_skill` (spec §4.10).

The file (``STELLO_GATEWAY_SKILLS_FILE``) lists skills in order::

    [[skills]]
    name = "tides"                      # what the model activates, and allow-lists name
    description = "Tide tables and how to read them."   # one line, shown to the model
    content = \"\"\"Read the table from the top ...\"\"\"     # what activate_skill answers

A session's frozen config holds its allow-list (`SessionConfig.skills`): unset
means every registered skill, ``[]`` none (and no `activate_skill` tool is
offered), a list only the registered skills it names. Unlike the reference
(spec §7: its tool captures the global router), the tool offered to a turn is
built from the session's own view: its description lists the allowed
``name: description`` lines and its `name` parameter enumerates them, and a
call naming a skill outside the view (unknown or not allowed) is an error
result for the model, never a failed turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_gateway.clients import Caller
from agent_gateway.llm import RAW_ARGUMENTS_KEY, ToolCallSpec, ToolSpec
from agent_gateway.tools.base import ACTIVATE_SKILL, ToolOutcome
from stello.config.files import named_entries, parse_toml, read_config_file
from stello.validation import SKILL_NAME, SKILL_NAME_RULE


@dataclass(frozen=True, slots=True)
class Skill:
    """One configured skill."""

    name: str
    description: str
    content: str


class SkillRegistry:
    """The skills by name, in configuration-file order."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        for skill in skills:
            self._skills[skill.name] = skill

    def visible(self, allowed: Sequence[str] | None) -> list[Skill]:
        """The skills a session may use: all when `allowed` is None, else those named, in
        registry order (names that are not registered are ignored)."""
        if allowed is None:
            return list(self._skills.values())
        wanted = set(allowed)
        return [skill for name, skill in self._skills.items() if name in wanted]

    def get(self, name: str) -> Skill | None:
        """The skill called `name`, or None."""
        return self._skills.get(name)

    def unknown(self, name: str) -> str | None:
        """Why an allow-list may not name `name`: it names no configured skill (the
        sentence lists those it may name); None when it is configured."""
        if name in self._skills:
            return None
        if not self._skills:
            return f"names no configured skill: this gateway has none, got {name[:80]!r}"
        known = ", ".join(list(self._skills)[:20])
        more = "" if len(self._skills) <= 20 else f" and {len(self._skills) - 20} more"
        return f"names no configured skill ({known}{more}), got {name[:80]!r}"

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)


def activate_skill_spec(skills: Sequence[Skill]) -> ToolSpec:
    """The tool over `skills` (at least one): their lines in the description, their enum."""
    lines = "\n".join(f"{skill.name}: {skill.description}" for skill in skills)
    return ToolSpec(
        name=ACTIVATE_SKILL,
        description=(
            "Activate a skill: answers its full instructions. Available skills:\n" + lines
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "enum": [skill.name for skill in skills],
                    "description": "The skill to activate.",
                }
            },
            "required": ["name"],
        },
    )


def activate(skills: Sequence[Skill], args: Mapping[str, Any]) -> tuple[str, bool]:
    """A call of the tool over `skills`: (the result's text, whether it is an error)."""
    name = args.get("name")
    known = ", ".join(skill.name for skill in skills)
    if RAW_ARGUMENTS_KEY in args or not isinstance(name, str) or not name:
        return f"name is required: one of {known}", True
    for skill in skills:
        if skill.name == name:
            return json.dumps({"content": skill.content}, ensure_ascii=False), False
    return f'Skill "{name}" is not available (available: {known})', True


@dataclass(frozen=True, slots=True)
class SkillActivation:
    """``activate_skill`` over the skills one turn may activate."""

    skills: tuple[Skill, ...]

    async def run(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        call: ToolCallSpec,
        request_id: str,
    ) -> ToolOutcome:
        """One call: the skill's content, or an error naming the skills there are."""
        text, is_error = activate(self.skills, call.arguments)
        return ToolOutcome(text, is_error=is_error)


class _SkillEntry(BaseModel):
    """One ``[[skills]]`` table, validated (the file is untrusted input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = Field(min_length=1, max_length=1000)
    content: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SKILL_NAME.match(value):
            raise ValueError(SKILL_NAME_RULE)
        return value

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value or "\r" in value:
            raise ValueError("must be one line (the tool's description lists one per skill)")
        return value


class _SkillsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    skills: list[_SkillEntry] = Field(default_factory=list)


class SkillsFileError(ValueError):
    """Raised when the skills file cannot be read or is not valid."""


def parse_skills(text: str, source: str = "<skills>") -> SkillRegistry:
    """The registry a TOML document describes.

    Raises:
        SkillsFileError: bad TOML, an unknown key, a bad value, a name used twice (file,
            line, skill, field).
    """
    data = parse_toml(text, _SkillsFile, source, SkillsFileError, "skill")
    named_entries(text, source, "skills", "skill", [e.name for e in data.skills], SkillsFileError)
    return SkillRegistry(Skill(e.name, e.description, e.content) for e in data.skills)


def load_skills(path: Path | None) -> SkillRegistry:
    """The registry of the file at `path`; empty when `path` is None.

    Raises:
        SkillsFileError: the file is missing, unreadable or not valid.
    """
    if path is None:
        return SkillRegistry()
    text = read_config_file(path, "skills file", SkillsFileError)
    return parse_skills(text, str(path))
