"""The gateway's prompt set: a preset and a TOML file of overrides, checked at start.

``STELLO_GATEWAY_PROMPTS`` names the preset (``en``, the default, or ``zh``:
the reference's Chinese texts); ``STELLO_GATEWAY_PROMPTS_FILE`` a TOML file
whose top-level keys replace the preset's texts, one key each::

    # prompts.toml: any subset of the keys of agent_gateway.llm.prompts.texts
    session_identity = "<session_identity>\\nYou are working on {label}.\\n</session_identity>"
    compressor = \"\"\"Summarise the conversation below for a colleague taking over.
    Keep decisions, facts and open questions.\"\"\"

Values are ``{name}`` templates (`agent_gateway.llm.prompts.templates`) that may use
only their key's variables. An unreadable file, bad TOML, an unknown key, a
value that is not a string, or a variable the key does not have stops the
process with a message naming the file, line, key and variable.

`SessionPrompts` resolves the compressor and consolidator prompts of one
session: its frozen config's override (from a profile, DESIGN §5.16), else
the configured set's text.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from pathlib import Path

from agent_gateway.clients import Caller, TreeClient
from agent_gateway.llm.prompts.messages import PromptError, Prompts, prompt_key, template_problem
from agent_gateway.llm.prompts.texts import COMPRESSOR, CONSOLIDATOR, PresetName


class PromptsFileError(ValueError):
    """Raised when the prompts file cannot be read or is not valid."""


def load_prompts(preset: PresetName, path: Path | None) -> Prompts:
    """The preset's texts with the overrides of the file at `path` (None = no file).

    Raises:
        PromptsFileError: the file is unreadable or not valid (the message says where).
    """
    if path is None:
        return Prompts.preset(preset)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptsFileError(
            f"cannot read the prompts file {path} (STELLO_GATEWAY_PROMPTS_FILE): {exc}"
        ) from exc
    return Prompts.preset(preset, parse_prompts(text, str(path)))


def parse_prompts(text: str, source: str = "<prompts>") -> dict[str, str]:
    """The overrides a prompts file gives, each checked against its key.

    Raises:
        PromptsFileError: bad TOML, or every key that is unknown, not a string,
            or uses a template variable it does not have.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PromptsFileError(f"{source}: not valid TOML: {exc}") from exc
    problems: list[str] = []
    overrides: dict[str, str] = {}
    for name, value in data.items():
        where = f"{source}, line {_line_of(text, name)}"
        try:
            key = prompt_key(name)
        except PromptError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if not isinstance(value, str):
            kind = type(value).__name__
            problems.append(f"{where}: {name} must be a string, not a TOML {kind}")
            continue
        problem = template_problem(key, value)
        if problem is not None:
            problems.append(f"{where}: {problem}")
            continue
        overrides[name] = value
    if problems:
        raise PromptsFileError("; ".join(problems))
    return overrides


def _line_of(text: str, key: str) -> int | str:
    """The line where `key` is defined (bare, quoted or as a table); '?' if not found."""
    quoted = re.escape(key)
    pattern = re.compile(rf"^\s*(\[\s*)?(?:{quoted}|\"{quoted}\"|'{quoted}')\s*[=\].]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return "?"


class SessionPrompts:
    """The compressor and consolidator prompts of a session: its override, else the set's."""

    def __init__(self, tree: TreeClient, prompts: Prompts) -> None:
        self._tree = tree
        self.prompts = prompts
        """The configured set."""

    async def compressor(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> str:
        """The system prompt of the session's compressions (one tree GetConfig)."""
        frozen = await self._frozen(caller, space_id, session_id, "compressor_prompt")
        return self.prompts.text(COMPRESSOR) if frozen is None else frozen

    async def consolidator(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> str:
        """The system prompt of the session's consolidations (one tree GetConfig)."""
        frozen = await self._frozen(caller, space_id, session_id, "consolidator_prompt")
        return self.prompts.text(CONSOLIDATOR) if frozen is None else frozen

    async def _frozen(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, name: str
    ) -> str | None:
        """The override `name` of the session's frozen config; None when unset."""
        config = await self._tree.get_config(caller, space_id, session_id)
        if config is None or not config.HasField(name):
            return None
        value: str = getattr(config, name)
        return value
