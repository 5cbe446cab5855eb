"""Fork composition as pure functions: STELLO-SPEC §6.4 items 1-33 and the §6.5 compress step.

v1 composes the system prompt, skills and the compressor/consolidator prompt
overrides (DESIGN §5.13: no per-fork llm, tools or compressor functions;
§5.16: prompts are texts). The spec items about llm, tools, consolidateFn,
compressFn and forkCompressFn are restated on `later_wins`, the rule those
fields follow; a profile's `systemPromptFn` becomes its `{name}` template.
"""

from __future__ import annotations

import pytest

from agent_gateway.forks.compose import (
    ConfigLayer,
    ContextMode,
    ProfileLayer,
    PromptMode,
    compose,
    drop_incomplete_tool_groups,
    effective_context,
    inherited_copy,
    opening_prompt,
    resolve_system_prompt,
)
from agent_gateway.forks.profiles import Profile
from stello.common.v1 import common_pb2
from tests.gateway.conftest import record

EMPTY = ConfigLayer()


def profile(
    prompt: str | None = None,
    mode: PromptMode = PromptMode.PREPEND,
    skills: tuple[str, ...] | None = None,
    context: ContextMode | None = None,
    opening: str | None = None,
) -> ProfileLayer:
    """A resolved profile layer."""
    return ProfileLayer(prompt, mode, skills, context, opening)


class TestLaterWins:
    """Spec §6.4 items 1-9 and 22-24: per field, an unset layer never overrides a set one."""

    def test_label_only_fork_sets_nothing(self) -> None:
        """Item 1: empty defaults and a fork with only a label compose to all fields unset."""
        assert compose(EMPTY, EMPTY, None, EMPTY) == ConfigLayer(None, None)

    def test_fork_value_wins_over_every_layer(self) -> None:
        """Items 2 and 22: a value on all four layers comes from the fork options."""
        result = compose(
            ConfigLayer(skills=("d",)),
            ConfigLayer(skills=("p",)),
            profile(skills=("pr",)),
            ConfigLayer(skills=("f",)),
        )
        assert result.skills == ("f",)

    def test_parent_value_kept_when_upper_layers_unset(self) -> None:
        """Item 3: a value only on the parent survives a profile and a fork without it."""
        result = compose(EMPTY, ConfigLayer(skills=("p",)), profile(mode=PromptMode.PRESET), EMPTY)
        assert result.skills == ("p",)

    def test_defaults_value_kept(self) -> None:
        """Items 4 and 23: a value only in the defaults is kept."""
        result = compose(ConfigLayer("D", ("d",)), EMPTY, profile(mode=PromptMode.PRESET), EMPTY)
        assert result == ConfigLayer("D", ("d",))

    def test_each_field_from_its_own_layer(self) -> None:
        """Items 5 and 24: fields set on different layers each come from their own layer."""
        result = compose(ConfigLayer(system_prompt="D"), EMPTY, None, ConfigLayer(skills=("f",)))
        assert result == ConfigLayer("D", ("f",))

    @pytest.mark.parametrize(
        ("parent", "profile_skills", "fork", "expected"),
        [
            pytest.param(("a", "b"), ("c",), None, ("c",), id="item6-replaced-not-merged"),
            pytest.param(("a", "b"), (), None, (), id="item7-empty-overrides"),
            pytest.param(("a", "b"), None, None, ("a", "b"), id="item8-unset-inherits"),
            pytest.param(None, ("a",), (), (), id="item9-fork-empty-wins"),
        ],
    )
    def test_skills_tri_state(
        self,
        parent: tuple[str, ...] | None,
        profile_skills: tuple[str, ...] | None,
        fork: tuple[str, ...] | None,
        expected: tuple[str, ...],
    ) -> None:
        """Items 6-9: skills are replaced whole; an explicit empty list means no skills."""
        result = compose(
            EMPTY,
            ConfigLayer(skills=parent),
            profile(skills=profile_skills),
            ConfigLayer(skills=fork),
        )
        assert result.skills == expected


class TestSystemPromptComposition:
    """Spec §6.4 items 10-21: the system prompt's own composition rules."""

    @pytest.mark.parametrize(
        ("layer", "fork", "expected"),
        [
            pytest.param(profile("P", PromptMode.PRESET), "F", "P", id="item10-preset"),
            pytest.param(profile("P"), "F", "P\n\nF", id="item11-prepend-default"),
            pytest.param(profile("P", PromptMode.APPEND), "F", "F\n\nP", id="item12-append"),
            pytest.param(profile(None), "F", "F", id="item13-prepend-no-profile-prompt"),
            pytest.param(profile("P"), None, "P", id="item14-prepend-no-fork-prompt"),
        ],
    )
    def test_profile_modes(self, layer: ProfileLayer, fork: str | None, expected: str) -> None:
        """Items 10-14: the profile's mode combines its prompt with the fork's."""
        assert compose(EMPTY, EMPTY, layer, ConfigLayer(system_prompt=fork)).system_prompt == (
            expected
        )

    @pytest.mark.parametrize(
        ("parent", "fork", "expected"),
        [
            pytest.param(None, None, "D", id="item15-defaults"),
            pytest.param("Par", "F", "F", id="item16-fork-wins"),
            pytest.param("Par", None, "Par", id="item17-parent-wins"),
        ],
    )
    def test_without_profile_later_wins(
        self, parent: str | None, fork: str | None, expected: str
    ) -> None:
        """Items 15-17: without a profile the prompt is 'later wins' over defaults, parent, fork."""
        result = compose(
            ConfigLayer(system_prompt="D"),
            ConfigLayer(system_prompt=parent),
            None,
            ConfigLayer(system_prompt=fork),
        )
        assert result.system_prompt == expected

    def test_template_rendered_then_prepended(self) -> None:
        """Item 18: the profile's template is rendered with the variables, then prepended."""
        layer = Profile("p", system_prompt="动态:{x}").resolve({"x": "42"})
        assert compose(EMPTY, EMPTY, layer, ConfigLayer(system_prompt="F")).system_prompt == (
            "动态:42\n\nF"
        )

    def test_preset_template(self) -> None:
        """Item 19: a preset template renders its variables."""
        layer = Profile("p", "region={region}", PromptMode.PRESET).resolve({"region": "北京"})
        assert compose(EMPTY, EMPTY, layer, EMPTY).system_prompt == "region=北京"

    def test_preset_without_prompt_falls_back_to_defaults(self) -> None:
        """Item 20: a preset profile without a prompt and no fork prompt falls back to 'D'."""
        result = compose(
            ConfigLayer(system_prompt="D"), EMPTY, profile(None, PromptMode.PRESET), EMPTY
        )
        assert result.system_prompt == "D"

    def test_preset_beats_fork_without_parent(self) -> None:
        """Item 21: parent unset, preset 'P' and fork 'F' give 'P'."""
        result = compose(
            EMPTY, EMPTY, profile("P", PromptMode.PRESET), ConfigLayer(system_prompt="F")
        )
        assert result.system_prompt == "P"

    def test_profile_contribution_hides_parent_and_defaults(self) -> None:
        """Spec §4.4.2 rule 5: a profile or fork prompt hides the parent's and the defaults'."""
        result = compose(
            ConfigLayer(system_prompt="D"), ConfigLayer(system_prompt="Par"), profile("P"), EMPTY
        )
        assert result.system_prompt == "P"

    def test_preset_empty_profile_prompt_is_kept(self) -> None:
        """Spec §4.4.2 edge 4: a preset profile prompt of '' yields '' with no fallback."""
        result = compose(
            ConfigLayer(system_prompt="D"), EMPTY, profile("", PromptMode.PRESET), EMPTY
        )
        assert result.system_prompt == ""


class TestResolveSystemPrompt:
    """Spec §6.4 items 25-33: `resolveSystemPrompt` alone."""

    @pytest.mark.parametrize("caller", ["llm prompt", None])
    def test_no_profile_returns_caller(self, caller: str | None) -> None:
        """Item 25: without a profile the caller's prompt comes back unchanged (None stays None)."""
        assert resolve_system_prompt(None, caller) == caller

    def test_preset_ignores_caller(self) -> None:
        """Item 26: a preset profile's prompt wins over the LLM's."""
        assert resolve_system_prompt(profile("固定角色", PromptMode.PRESET), "x") == "固定角色"

    def test_preset_template(self) -> None:
        """Item 27: a preset template renders to '你是美国专家'."""
        layer = Profile("p", "你是{region}专家", PromptMode.PRESET).resolve({"region": "美国"})
        assert resolve_system_prompt(layer, None) == "你是美国专家"

    def test_template_is_the_profile_prompt(self) -> None:
        """Item 28: the rendered template is the profile's prompt (one template per profile)."""
        layer = Profile("p", "动态模板", PromptMode.PRESET).resolve({})
        assert resolve_system_prompt(layer, None) == "动态模板"

    def test_prepend_and_append_templates(self) -> None:
        """Item 29: a prepend template goes first, an append one last."""
        first = Profile("p", "动态: {name}").resolve({"name": "X"})
        last = Profile("p", "动态", PromptMode.APPEND).resolve({})
        assert resolve_system_prompt(first, "llm-prompt") == "动态: X\n\nllm-prompt"
        assert resolve_system_prompt(last, "llm-prompt") == "llm-prompt\n\n动态"

    @pytest.mark.parametrize(
        ("layer", "caller", "expected"),
        [
            pytest.param(profile("角色定义"), "上下文补充", "角色定义\n\n上下文补充", id="item30"),
            pytest.param(profile("角色定义"), None, "角色定义", id="item30-no-caller"),
            pytest.param(profile(None), "LLM 写的", "LLM 写的", id="item31"),
            pytest.param(
                profile("约束条件", PromptMode.APPEND),
                "角色定义",
                "角色定义\n\n约束条件",
                id="item32",
            ),
            pytest.param(profile("前置"), "后置", "前置\n\n后置", id="item33-default-prepend"),
            pytest.param(profile("P"), "", "P", id="empty-caller-absent"),
            pytest.param(profile(""), "C", "C", id="empty-profile-absent"),
        ],
    )
    def test_modes(self, layer: ProfileLayer, caller: str | None, expected: str) -> None:
        """Items 30-33: prepend/append join with a blank line; an empty side counts as absent."""
        assert resolve_system_prompt(layer, caller) == expected


class TestForkContext:
    """Spec §6.5 items 1-4, 13, 14 and §4.4.4: context choice, compress prompt, stored prompt."""

    def test_option_overrides_profile_context(self) -> None:
        """Item 14: the request's context wins over the profile's."""
        layer = profile(context=ContextMode.INHERIT)
        assert effective_context(ContextMode.COMPRESS, layer) is ContextMode.COMPRESS

    def test_profile_context_used_when_unset(self) -> None:
        """Item 13: without a requested context the profile's applies."""
        assert (
            effective_context(None, profile(context=ContextMode.COMPRESS)) is ContextMode.COMPRESS
        )

    def test_default_context_is_none(self) -> None:
        """Without a requested or profile context the fork starts empty (NONE)."""
        assert effective_context(None, None) is ContextMode.NONE
        assert effective_context(None, profile()) is ContextMode.NONE

    @pytest.mark.parametrize(
        ("requested", "layer", "expected"),
        [
            pytest.param("hello", profile(opening="P"), "hello", id="request-wins"),
            pytest.param(None, profile(opening="P"), "P", id="profile-prompt"),
            pytest.param("", profile(opening="P"), None, id="empty-request-writes-nothing"),
            pytest.param(None, None, None, id="none"),
        ],
    )
    def test_opening_prompt(
        self, requested: str | None, layer: ProfileLayer | None, expected: str | None
    ) -> None:
        """The opening record is the request's prompt, else the profile's, when non-empty."""
        assert opening_prompt(requested, layer) == expected

    def test_config_proto_keeps_presence(self) -> None:
        """A layer with nothing set stores no config; an empty skill list stays set."""
        assert ConfigLayer().to_proto() is None
        config = ConfigLayer(skills=()).to_proto()
        assert config is not None
        assert config.HasField("skills")
        assert not config.HasField("system_prompt")
        assert ConfigLayer.from_proto(config) == ConfigLayer(skills=())

    def test_prompt_overrides_round_trip(self) -> None:
        """Compressor and consolidator overrides are stored, presence kept, and read back."""
        layer = ConfigLayer(compressor_prompt="C", consolidator_prompt="")
        config = layer.to_proto()
        assert config is not None
        assert config.compressor_prompt == "C" and config.HasField("consolidator_prompt")
        assert not config.HasField("system_prompt") and not config.HasField("skills")
        assert ConfigLayer.from_proto(config) == layer


class TestPromptOverrides:
    """DESIGN §5.16: a profile's compressor/consolidator prompts, kept in the frozen config."""

    def test_profile_sets_them(self) -> None:
        """A profile's overrides reach the composed config; the request cannot set them."""
        layer = ProfileLayer(None, PromptMode.PREPEND, None, None, None, "C", "K")
        result = compose(EMPTY, EMPTY, layer, ConfigLayer(system_prompt="F"))
        assert (result.compressor_prompt, result.consolidator_prompt) == ("C", "K")

    def test_inherited_from_the_source(self) -> None:
        """A fork without a profile, or with one that sets none, keeps the source's overrides."""
        parent = ConfigLayer(compressor_prompt="C", consolidator_prompt="K")
        for layer in (None, profile("P")):
            result = compose(EMPTY, parent, layer, EMPTY)
            assert (result.compressor_prompt, result.consolidator_prompt) == ("C", "K")

    def test_profile_wins_over_the_source(self) -> None:
        """Later wins per field: the profile's override replaces the source's, the other stays."""
        parent = ConfigLayer(compressor_prompt="C", consolidator_prompt="K")
        layer = ProfileLayer(None, PromptMode.PREPEND, None, None, None, "C2", None)
        result = compose(EMPTY, parent, layer, EMPTY)
        assert (result.compressor_prompt, result.consolidator_prompt) == ("C2", "K")


def _assistant_calls(*ids: str) -> common_pb2.Record:
    calls = [common_pb2.ToolCall(id=i, name="t", arguments_json="{}") for i in ids]
    return record("assistant", "", tool_calls=calls)


class TestToolGroupSanitising:
    """Spec §4.5.4 as fork inheritance applies it."""

    def test_trailing_orphan_dropped(self) -> None:
        """An assistant whose tool call has no answer is dropped with nothing else."""
        records = [record("user", "q"), _assistant_calls("a")]
        assert [r.content for r in drop_incomplete_tool_groups(records)] == ["q"]

    def test_mid_history_orphan_dropped(self) -> None:
        """A partly answered group in the middle goes; the clean records around it stay."""
        records = [
            record("user", "q"),
            _assistant_calls("a", "b"),
            record("tool", "ra", tool_call_id="a"),
            record("assistant", "done"),
            record("tool", "stray", tool_call_id="z"),
        ]
        assert [r.content for r in drop_incomplete_tool_groups(records)] == ["q", "done"]

    def test_complete_group_kept(self) -> None:
        """A group whose every call is answered stays whole."""
        records = [
            _assistant_calls("a", "b"),
            record("tool", "rb", tool_call_id="b"),
            record("tool", "ra", tool_call_id="a"),
            record("assistant", "ok"),
        ]
        assert drop_incomplete_tool_groups(records) == records

    def test_inherited_copy_keeps_timestamp(self) -> None:
        """A copied record keeps everything (created_at included) but its seq."""
        original = record("user", "q", seq=7)
        original.created_at.FromSeconds(1_000)
        copy = inherited_copy(original)
        assert copy.seq == 0
        assert copy.created_at.seconds == 1_000
        assert copy.content == "q"
