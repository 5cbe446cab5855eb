"""Fork profiles from TOML: templates, modes, the registry (STELLO-SPEC §1.8, §6.4 item 34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_gateway.config import GatewaySettings
from agent_gateway.files import GatewayFiles
from agent_gateway.forks.compose import ContextMode, PromptMode
from agent_gateway.forks.profiles import (
    Profile,
    ProfileRegistry,
    ProfilesFileError,
    load_profiles,
    parse_profiles,
)
from agent_gateway.llm.prompts.templates import render_template, template_variables
from stello.errors import FailedPrecondition, InvalidArgument
from stello.reasons import PROFILE_NOT_FOUND
from tests.gateway.conftest import PROFILES_TOML


class TestTemplates:
    """`{name}` variables of a profile's system prompt."""

    def test_variables_in_first_use_order(self) -> None:
        """Variables are listed once each, in the order they first appear."""
        assert template_variables("{b} {a} {b} {{c}} {not valid} {x-y}") == ("b", "a")

    def test_render_replaces_and_unescapes(self) -> None:
        """Each variable is replaced; doubled braces become literal ones; other braces stay."""
        text = render_template("{a} {{a}} {b c} {", {"a": "1"})
        assert text == "1 {a} {b c} {"

    def test_missing_variable_is_invalid_argument(self) -> None:
        """A variable missing from profile_vars is INVALID_ARGUMENT naming it."""
        with pytest.raises(InvalidArgument, match="region") as caught:
            Profile("p", "in {region}").resolve({})
        assert caught.value.violations[0].field == "profile_vars"

    def test_unknown_variables_refused(self) -> None:
        """A value for a variable the template does not have is INVALID_ARGUMENT naming it
        (a mistyped name is not dropped unnoticed)."""
        with pytest.raises(InvalidArgument, match="its variables: none") as caught:
            Profile("p", "fixed").resolve({"unused": "x"})
        assert [v.field for v in caught.value.violations] == ["profile_vars['unused']"]


class TestRegistry:
    """Spec §6.4 item 34: register, get, has, names in insertion order, overwrite."""

    def test_register_and_get(self) -> None:
        """A registered profile is returned equal; an unknown name gives None."""
        registry = ProfileRegistry()
        research = Profile("research", "R")
        registry.register(research)
        assert registry.get("research") == research
        assert registry.get("unknown") is None
        assert registry.has("research")

    def test_names_in_insertion_order_and_overwrite(self) -> None:
        """Names come in insertion order; registering a name again replaces it."""
        registry = ProfileRegistry([Profile("a"), Profile("b")])
        registry.register(Profile("a", "new"))
        assert registry.names() == ["a", "b"]
        assert registry.require("a").system_prompt == "new"

    def test_unknown_profile_is_failed_precondition(self) -> None:
        """Requiring an unknown profile is FAILED_PRECONDITION with reason PROFILE_NOT_FOUND."""
        with pytest.raises(FailedPrecondition, match="nope") as caught:
            ProfileRegistry().require("nope")
        assert caught.value.reason == PROFILE_NOT_FOUND


class TestProfilesFile:
    """The TOML file: order, defaults, validation."""

    def test_parses_in_file_order(self) -> None:
        """Profiles come in file order with their modes, contexts, prompts and skills."""
        registry = parse_profiles(PROFILES_TOML)
        assert registry.names() == ["research", "preset", "append", "compressor", "bare"]
        research = registry.require("research")
        assert research.mode is PromptMode.PREPEND
        assert research.context is ContextMode.INHERIT
        assert research.prompt == "Research started."
        assert research.skills == ("search",)
        assert research.variables == ("topic", "region")
        assert registry.require("append").skills == ()
        bare = registry.require("bare")
        assert (bare.mode, bare.context, bare.skills, bare.system_prompt) == (
            PromptMode.PREPEND,
            None,
            None,
            None,
        )

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            pytest.param(
                "[[profiles]]\nname = 'a'\nmode = 'x'",
                'line 3: profile "a", field mode: is not a known field (known: name, '
                "system_prompt, system_prompt_mode, context, prompt, skills, compressor_prompt, "
                "consolidator_prompt): remove it or correct its spelling",
                id="unknown-key",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\nsystem_prompt_mode = 'later'",
                'line 3: profile "a", field system_prompt_mode: must be one of '
                "'preset', 'prepend' or 'append', got 'later'",
                id="bad-mode",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\ncontext = 'all'",
                'line 3: profile "a", field context: must be one of '
                "'none', 'inherit' or 'compress', got 'all'",
                id="bad-context",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\n\n[[profiles]]\nname = 'a'",
                'line 5: profile "a", field name: the name is defined twice (first on line 1): '
                "rename or remove one",
                id="dup",
            ),
            pytest.param(
                "[[profiles]\n",
                "line 1, column 11: not valid TOML: Expected ']]' at the end of an array "
                "declaration: fix the syntax there",
                id="bad-toml",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\n[[profiles]]\nprompt = 'x'",
                "line 3: profile 2 (no name, counting from 1), field name: is required: add it",
                id="no-name",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\nskills = ['x', 2]",
                'line 3: profile "a", field skills, item 2: must be a string (in quotes), '
                "not a TOML integer",
                id="skill-not-text",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\ncompressor_prompt = 'on {topic}'",
                'line 3: profile "a", field compressor_prompt: compressor uses the template '
                "variable {topic}, which it does not have (it has no variables); write {{ and }} "
                "for literal braces",
                id="compressor-variable",
            ),
            pytest.param(
                "[[profiles]]\nname = 'a'\nconsolidator_prompt = '{label}'",
                'line 3: profile "a", field consolidator_prompt: consolidator uses the template '
                "variable {label}, which it does not have (it has no variables); write {{ and }} "
                "for literal braces",
                id="consolidator-variable",
            ),
        ],
    )
    def test_invalid_file(self, text: str, problem: str) -> None:
        """A bad file is refused at startup naming the file, the 1-based line of the field,
        the profile by its name and the field as the file spells it, and what to do."""
        with pytest.raises(ProfilesFileError) as raised:
            parse_profiles(text, "profiles.toml")
        assert str(raised.value) == f"profiles.toml {problem}"

    def test_prompt_overrides(self) -> None:
        """A profile's compressor and consolidator prompts are read, literal braces unescaped."""
        registry = parse_profiles(
            "[[profiles]]\nname = 'a'\ncompressor_prompt = 'Keep {{json}}.'\n"
            "consolidator_prompt = 'Short.'\n[[profiles]]\nname = 'b'\n"
        )
        layer = registry.require("a").resolve({})
        assert (layer.compressor_prompt, layer.consolidator_prompt) == ("Keep {json}.", "Short.")
        bare = registry.require("b").resolve({})
        assert (bare.compressor_prompt, bare.consolidator_prompt) == (None, None)

    def test_load_from_path(self, tmp_path: Path) -> None:
        """load_profiles reads a file; no path means no profiles; a missing file is an error."""
        path = tmp_path / "p.toml"
        path.write_text("[[profiles]]\nname = 'x'\n", encoding="utf-8")
        assert load_profiles(path).names() == ["x"]
        assert len(load_profiles(None)) == 0
        with pytest.raises(ProfilesFileError, match="cannot read"):
            load_profiles(tmp_path / "missing.toml")


class TestPromptSizes:
    """A profile's compressor and consolidator prompts go into the sessions' tree config,
    which refuses a prompt over STELLO_MAX_SLOT_BYTES: the gateway refuses to start with one
    (every Fork with the profile would fail naming a field its caller never set)."""

    @pytest.mark.parametrize("field", ["compressor_prompt", "consolidator_prompt"])
    def test_a_prompt_over_the_slot_limit_stops_the_gateway(
        self, tmp_path: Path, field: str
    ) -> None:
        profiles = tmp_path / "profiles.toml"
        profiles.write_text(
            f'[[profiles]]\nname = "short"\n\n[[profiles]]\nname = "long"\n{field} = "{"é" * 6}"\n',
            encoding="utf-8",
        )
        config = GatewaySettings(profiles_file=profiles)
        assert GatewayFiles.read(config, max_slot_bytes=12).profiles.names() == ["short", "long"]
        with pytest.raises(ProfilesFileError) as raised:
            GatewayFiles.read(config, max_slot_bytes=11)
        assert str(raised.value) == (
            f'{profiles} line 6: profile "long", field {field}: is 12 bytes, over '
            "STELLO_MAX_SLOT_BYTES (11): shorten it"
        )
