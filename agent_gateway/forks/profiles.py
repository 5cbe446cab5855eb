"""Fork profiles: named templates from the gateway's TOML file (DESIGN §5.12, spec §1.8).

The file lists profiles in order::

    [[profiles]]
    name = "research"
    system_prompt = "You research {topic} for {audience}."  # {name} variables
    system_prompt_mode = "prepend"   # preset | prepend (default) | append
    context = "inherit"              # none | inherit | compress (forks only)
    prompt = "Let's start."          # opening assistant record
    skills = ["search"]              # absent = inherit; [] = no skills
    compressor_prompt = "Summarise the research so far, sources included."
    consolidator_prompt = "Write the findings as one short paragraph."

Only ``system_prompt`` is a template: ``{name}`` is replaced by the request's
``profile_vars[name]`` (a missing one is INVALID_ARGUMENT, and so is a value for
a variable the template does not have: a mistyped name would otherwise be
dropped unnoticed); ``{{`` and ``}}`` are literal braces; any other brace is
kept as written.

``compressor_prompt`` and ``consolidator_prompt`` replace the gateway's
``compressor`` / ``consolidator`` texts (`agent_gateway.llm.prompts.texts`)
for the sessions made with the profile: they are kept in the session's
frozen config, so its later compressions and consolidations use them, and
forks of it inherit them. They have no variables (a ``{name}`` in them is
refused when the file is read; ``{{``/``}}`` are literal braces).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_gateway.forks.compose import ContextMode, ProfileLayer, PromptMode
from agent_gateway.llm import PromptKey, template_problem
from agent_gateway.llm.prompts.templates import render_template, template_variables
from agent_gateway.llm.prompts.texts import COMPRESSOR, CONSOLIDATOR
from stello.config.files import Entry, named_entries, parse_toml, read_config_file
from stello.errors import MAX_VIOLATIONS, FailedPrecondition, InvalidArgument, cut
from stello.reasons import PROFILE_NOT_FOUND


def each_variable(names: Iterable[str], description: str) -> list[tuple[str, str]]:
    """One problem per `profile_vars` key of `names` (sorted, at most MAX_VIOLATIONS), each
    named `profile_vars['NAME']` (cut to 64 bytes), for `InvalidArgument.fields`."""
    return [
        (f"profile_vars[{cut(name, 64)!r}]", description) for name in sorted(names)[:MAX_VIOLATIONS]
    ]


@dataclass(frozen=True, slots=True)
class Profile:
    """One configured profile; `system_prompt` is its template."""

    name: str
    system_prompt: str | None = None
    mode: PromptMode = PromptMode.PREPEND
    context: ContextMode | None = None
    prompt: str | None = None
    skills: tuple[str, ...] | None = None
    compressor_prompt: str | None = None
    consolidator_prompt: str | None = None
    entry: Entry | None = field(default=None, compare=False, repr=False)
    """Where the profiles file defines it, for a problem found after reading (None: made
    in code)."""

    def problem(self, name: str, text: str) -> str:
        """``FILE line N: profile "NAME", field FIELD: TEXT`` for a problem with its field
        `name` (``profile 'NAME', field FIELD: TEXT`` without a file)."""
        if self.entry is None:
            return f"profile {self.name!r}, field {name}: {text}"
        return self.entry.problem((name,), text)

    @property
    def variables(self) -> tuple[str, ...]:
        """The template variables a request must give in `profile_vars`."""
        return template_variables(self.system_prompt) if self.system_prompt else ()

    def resolve(self, values: Mapping[str, str]) -> ProfileLayer:
        """This profile as a composition layer, its template rendered with `values`.

        Raises:
            InvalidArgument: a template variable is missing from `values`, or `values`
                names one the profile does not have (a typo would go unnoticed).
        """
        problems: list[tuple[str, str]] = []
        missing = [name for name in self.variables if name not in values]
        if missing:
            listed = ", ".join(missing)
            problems.append(
                (
                    "profile_vars",
                    f"profile {self.name!r} needs the template variable(s) {listed}; "
                    "give them in profile_vars",
                )
            )
        known = ", ".join(self.variables) or "none"
        unknown = [name for name in values if name not in self.variables]
        problems += each_variable(
            unknown,
            f"profile {self.name!r} has no template variable of this name (its variables: {known})",
        )
        if problems:
            raise InvalidArgument.fields(problems)
        rendered = (
            render_template(self.system_prompt, values) if self.system_prompt is not None else None
        )
        return ProfileLayer(
            rendered,
            self.mode,
            self.skills,
            self.context,
            self.prompt,
            self.compressor_prompt,
            self.consolidator_prompt,
        )


class ProfileRegistry:
    """The profiles by name, in configuration-file order (registering a name again replaces it)."""

    def __init__(self, profiles: Iterable[Profile] = ()) -> None:
        self._profiles: dict[str, Profile] = {}
        for profile in profiles:
            self.register(profile)

    def register(self, profile: Profile) -> None:
        """Add `profile`, replacing one of the same name (which keeps its position)."""
        self._profiles[profile.name] = profile

    def get(self, name: str) -> Profile | None:
        """The profile called `name`, or None."""
        return self._profiles.get(name)

    def has(self, name: str) -> bool:
        """Whether a profile is called `name`."""
        return name in self._profiles

    def names(self) -> list[str]:
        """Every name, in order."""
        return list(self._profiles)

    def require(self, name: str) -> Profile:
        """The profile called `name`.

        Raises:
            FailedPrecondition: reason PROFILE_NOT_FOUND, no such profile.
        """
        profile = self._profiles.get(name)
        if profile is None:
            known = ", ".join(self._profiles) or "none are configured"
            raise FailedPrecondition(
                f"fork profile {cut(name, 64)!r} is not configured (known: {known})",
                reason=PROFILE_NOT_FOUND,
                metadata={"subject": f"profile/{cut(name, 64)}"},
            )
        return profile

    def __iter__(self) -> Iterator[Profile]:
        return iter(self._profiles.values())

    def __len__(self) -> int:
        return len(self._profiles)


class _ProfileEntry(BaseModel):
    """One ``[[profiles]]`` table, validated (the file is untrusted input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    system_prompt: str | None = None
    system_prompt_mode: Literal["preset", "prepend", "append"] = "prepend"
    context: Literal["none", "inherit", "compress"] | None = None
    prompt: str | None = None
    skills: list[str] | None = None
    compressor_prompt: str | None = None
    consolidator_prompt: str | None = None


class _ProfilesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    profiles: list[_ProfileEntry] = Field(default_factory=list)


class ProfilesFileError(ValueError):
    """Raised when the profiles file cannot be read or is not valid."""


def parse_profiles(text: str, source: str = "<profiles>") -> ProfileRegistry:
    """The registry a TOML document describes.

    Raises:
        ProfilesFileError: bad TOML, an unknown key or value, a name used twice,
            or a prompt override using a template variable (file, line, profile, field).
    """
    data = parse_toml(text, _ProfilesFile, source, ProfilesFileError, "profile")
    names = [item.name for item in data.profiles]
    entries = named_entries(text, source, "profiles", "profile", names, ProfilesFileError)
    registry = ProfileRegistry()
    for item, entry in zip(data.profiles, entries, strict=True):
        registry.register(
            Profile(
                name=item.name,
                system_prompt=item.system_prompt,
                mode=PromptMode(item.system_prompt_mode),
                context=ContextMode(item.context) if item.context else None,
                prompt=item.prompt,
                skills=tuple(item.skills) if item.skills is not None else None,
                compressor_prompt=_override(entry, COMPRESSOR, item.compressor_prompt),
                consolidator_prompt=_override(entry, CONSOLIDATOR, item.consolidator_prompt),
                entry=entry,
            )
        )
    return registry


def _override(entry: Entry, key: PromptKey, text: str | None) -> str | None:
    """A profile's override of a built-in text, checked and rendered (literal braces)."""
    if text is None:
        return None
    problem = template_problem(key, text)
    if problem is not None:
        raise ProfilesFileError(entry.problem((f"{key.name}_prompt",), problem))
    return render_template(text, {})


def load_profiles(path: Path | None) -> ProfileRegistry:
    """The registry of the file at `path`; empty when `path` is None.

    Raises:
        ProfilesFileError: the file is missing, unreadable or not valid.
    """
    if path is None:
        return ProfileRegistry()
    text = read_config_file(path, "profiles file", ProfilesFileError)
    return parse_profiles(text, str(path))
