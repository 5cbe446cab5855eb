"""`python -m agent_gateway`: serve the gateway until SIGTERM/SIGINT."""

from __future__ import annotations

from functools import partial

from pydantic import ValidationError

from agent_gateway.app import create_app
from agent_gateway.config import GatewaySettings
from agent_gateway.forks.profiles import ProfilesFileError, load_profiles
from agent_gateway.llm.prompt_config import PromptsFileError, load_prompts
from agent_gateway.tools.skills import SkillsFileError, load_skills
from stello.runner import main as run
from stello.settings import StelloSettings


def main() -> None:
    """Read the settings and the prompts, profiles and skills files once, then serve.

    Invalid gateway settings, or a prompts, profiles or skills file that is not
    valid, stop the process before anything starts, with a message naming
    the variable, or the file, line and problem (exit status 1).
    """
    settings = StelloSettings()
    try:
        config = GatewaySettings()
        prompts = load_prompts(config.prompts, config.prompts_file)
        profiles = load_profiles(config.profiles_file)
        skills = load_skills(config.skills_file)
    except (ValidationError, PromptsFileError, ProfilesFileError, SkillsFileError) as exc:
        raise SystemExit(f"agent_gateway: {exc}") from None
    factory = partial(create_app, config=config, prompts=prompts, profiles=profiles, skills=skills)
    run(settings, config.address, factory)


if __name__ == "__main__":
    main()
