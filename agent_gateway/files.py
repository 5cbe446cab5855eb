"""The files a gateway's settings name (prompts, profiles, skills), read and checked
together at start (`GatewayFiles`): by the gateway's composition root and by `stello up`."""

from __future__ import annotations

from dataclasses import dataclass

from agent_gateway.config import GatewaySettings
from agent_gateway.forks.profiles import ProfileRegistry, ProfilesFileError, load_profiles
from agent_gateway.llm import Prompts
from agent_gateway.llm.prompts.config import load_prompts
from agent_gateway.tools.skills import SkillRegistry, SkillsFileError, load_skills
from stello.settings import StelloSettings


@dataclass(frozen=True, slots=True)
class GatewayFiles:
    """The prompts, profiles and skills files a gateway's settings name, read and checked."""

    prompts: Prompts
    profiles: ProfileRegistry
    skills: SkillRegistry

    @classmethod
    def read(cls, config: GatewaySettings, max_slot_bytes: int | None = None) -> GatewayFiles:
        """Read the files `config` names (the defaults where it names none).

        Raises:
            PromptsFileError, ProfilesFileError, SkillsFileError: a file is not valid, a
                profile or STELLO_GATEWAY_DEFAULT_SKILLS names a skill not configured, or a
                profile's compressor or consolidator prompt is over `max_slot_bytes` (None:
                STELLO_MAX_SLOT_BYTES) (file, line, problem).
        """
        files = cls(
            load_prompts(config.prompts, config.prompts_file),
            load_profiles(config.profiles_file),
            load_skills(config.skills_file),
        )
        files.check_skill_names(config)
        limit = StelloSettings().max_slot_bytes if max_slot_bytes is None else max_slot_bytes
        files.check_prompt_sizes(limit)
        return files

    def check_prompt_sizes(self, max_slot_bytes: int) -> None:
        """Check that a profile's compressor and consolidator prompts fit the slot limit: the
        tree refuses a session config over it, so every Fork with the profile would fail,
        naming a field its caller never set (the system prompt, a template, is checked as
        composed, per request).

        Raises:
            ProfilesFileError: a profile's prompt is over `max_slot_bytes`.
        """
        for profile in self.profiles:
            for field in ("compressor_prompt", "consolidator_prompt"):
                size = len((getattr(profile, field) or "").encode())
                if size > max_slot_bytes:
                    raise ProfilesFileError(
                        profile.problem(
                            field,
                            f"is {size} bytes, over STELLO_MAX_SLOT_BYTES ({max_slot_bytes}): "
                            "shorten it",
                        )
                    )

    def check_skill_names(self, config: GatewaySettings) -> None:
        """Check that every skill a profile or STELLO_GATEWAY_DEFAULT_SKILLS names is
        configured: a session made with an unknown name would see fewer skills than its
        config says, without a word (CreateRoot and Fork refuse one the same way).

        Raises:
            ProfilesFileError: a profile names a skill the skills file does not define.
            SkillsFileError: STELLO_GATEWAY_DEFAULT_SKILLS does.
        """
        fix = "define it in STELLO_GATEWAY_SKILLS_FILE or take it out"
        for profile in self.profiles:
            for name in profile.skills or ():
                if (reason := self.skills.unknown(name)) is not None:
                    raise ProfilesFileError(profile.problem("skills", f"{reason}: {fix}"))
        for name in config.default_skills or ():
            if (reason := self.skills.unknown(name)) is not None:
                raise SkillsFileError(f"STELLO_GATEWAY_DEFAULT_SKILLS {reason}: {fix}")
