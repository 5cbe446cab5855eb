"""Fork and root composition, as pure functions (STELLO-SPEC §4.4.2 to §4.4.4, DESIGN §5).

Layers, lowest to highest priority: the gateway's defaults -> the source's frozen
config (forks only) -> the profile -> the request. Per field "later wins": an
unset value (None) never overrides, a set one always does, including ``()``
("no skills") and ``""``. The system prompt has its own rules
(`resolve_system_prompt`). The compressor and consolidator prompt overrides
come from the source and the profile only (unset = the gateway's configured
texts at the time of use, DESIGN §5.16). Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from agent_gateway.history.records import context_record
from stello.common.v1 import common_pb2
from stello.rules.tool_groups import kept_tool_group_indices

T = TypeVar("T")


class PromptMode(enum.StrEnum):
    """How a profile's prompt combines with the caller's (SystemPromptMode)."""

    PRESET = "preset"
    PREPEND = "prepend"
    APPEND = "append"


class ContextMode(enum.StrEnum):
    """How a fork seeds the child's records (ForkContext)."""

    NONE = "none"
    INHERIT = "inherit"
    COMPRESS = "compress"


@dataclass(frozen=True, slots=True)
class ConfigLayer:
    """One composition layer, or its result: None = the layer does not set the field."""

    system_prompt: str | None = None
    skills: tuple[str, ...] | None = None
    compressor_prompt: str | None = None
    consolidator_prompt: str | None = None

    @classmethod
    def from_proto(cls, config: common_pb2.SessionConfig | None) -> ConfigLayer:
        """The layer a stored SessionConfig gives (presence kept; None = empty layer)."""
        if config is None:
            return cls()
        return cls(
            config.system_prompt if config.HasField("system_prompt") else None,
            tuple(config.skills.names) if config.HasField("skills") else None,
            config.compressor_prompt if config.HasField("compressor_prompt") else None,
            config.consolidator_prompt if config.HasField("consolidator_prompt") else None,
        )

    def to_proto(self) -> common_pb2.SessionConfig | None:
        """The SessionConfig to store; None when no field is set (store no config)."""
        if self == ConfigLayer():
            return None
        config = common_pb2.SessionConfig()
        if self.system_prompt is not None:
            config.system_prompt = self.system_prompt
        if self.skills is not None:
            config.skills.names.extend(self.skills)
            config.skills.SetInParent()
        if self.compressor_prompt is not None:
            config.compressor_prompt = self.compressor_prompt
        if self.consolidator_prompt is not None:
            config.consolidator_prompt = self.consolidator_prompt
        return config


@dataclass(frozen=True, slots=True)
class ProfileLayer:
    """What a profile contributes, its template already rendered."""

    system_prompt: str | None
    mode: PromptMode
    skills: tuple[str, ...] | None
    context: ContextMode | None
    prompt: str | None
    compressor_prompt: str | None = None
    consolidator_prompt: str | None = None


class Summarizer(Protocol):
    """Summarises a source for a COMPRESS fork, through the session's provider."""

    async def summarize_for_fork(
        self,
        records: Sequence[common_pb2.Record],
        *,
        summary: str | None = None,
        omitted: int = 0,
    ) -> str:
        """The summary of the source's `summary` (its newest, if any) and the `records` after
        it (never called with neither), `omitted` records between them left out (too many to
        read); provider errors propagate."""
        ...


def later_wins(*values: T | None) -> T | None:
    """The last value that is set (not None); None when none is."""
    found: T | None = None
    for value in values:
        if value is not None:
            found = value
    return found


def resolve_system_prompt(profile: ProfileLayer | None, caller_prompt: str | None) -> str | None:
    """Combine a profile's prompt with the caller's by the profile's mode (spec §4.4.2).

    PRESET: the profile prompt when set (even ""), else the caller's. PREPEND
    (default) and APPEND: an empty side counts as absent, else the two joined by
    a blank line, the profile first (PREPEND) or last (APPEND). Without a
    profile: the caller's prompt.
    """
    if profile is None:
        return caller_prompt
    mine = profile.system_prompt
    if profile.mode is PromptMode.PRESET:
        return mine if mine is not None else caller_prompt
    if not mine:
        return caller_prompt
    if not caller_prompt:
        return mine
    if profile.mode is PromptMode.APPEND:
        return f"{caller_prompt}\n\n{mine}"
    return f"{mine}\n\n{caller_prompt}"


def compose(
    defaults: ConfigLayer,
    parent: ConfigLayer,
    profile: ProfileLayer | None,
    options: ConfigLayer,
) -> ConfigLayer:
    """The four-layer composition (`mergeSessionConfig`); a root passes an empty parent.

    Skills: later wins over defaults, parent, profile, options (replaced whole,
    never merged). System prompt without a profile: later wins over defaults,
    parent, options. With a profile: `resolve_system_prompt`, falling back to
    later wins over defaults and parent when that gives nothing. Compressor
    and consolidator prompts: later wins over defaults, parent, profile.
    """
    skills = later_wins(
        defaults.skills, parent.skills, profile.skills if profile else None, options.skills
    )
    if profile is None:
        prompt = later_wins(defaults.system_prompt, parent.system_prompt, options.system_prompt)
    else:
        prompt = resolve_system_prompt(profile, options.system_prompt)
        if prompt is None:
            prompt = later_wins(defaults.system_prompt, parent.system_prompt)
    compressor = later_wins(
        defaults.compressor_prompt,
        parent.compressor_prompt,
        profile.compressor_prompt if profile else None,
    )
    consolidator = later_wins(
        defaults.consolidator_prompt,
        parent.consolidator_prompt,
        profile.consolidator_prompt if profile else None,
    )
    return ConfigLayer(prompt, skills, compressor, consolidator)


def effective_context(requested: ContextMode | None, profile: ProfileLayer | None) -> ContextMode:
    """The request's context, else the profile's, else NONE."""
    found = later_wins(profile.context if profile else None, requested)
    return found or ContextMode.NONE


def opening_prompt(requested: str | None, profile: ProfileLayer | None) -> str | None:
    """The opening assistant record's text: the request's, else the profile's; None if empty."""
    text = later_wins(profile.prompt if profile else None, requested)
    return text or None


def drop_incomplete_tool_groups(
    records: Sequence[common_pb2.Record],
) -> list[common_pb2.Record]:
    """Spec §4.5.4 over stored records: the same sanitiser the turn context uses."""
    views = [context_record(r) for r in records]
    return [records[i] for i in kept_tool_group_indices(views)]


def inherited_copy(record: common_pb2.Record) -> common_pb2.Record:
    """A source record as the child's copy: everything but its seq (timestamps kept)."""
    copy = common_pb2.Record()
    copy.CopyFrom(record)
    copy.ClearField("seq")
    return copy
