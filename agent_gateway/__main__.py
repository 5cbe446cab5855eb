"""`python -m agent_gateway`: serve the gateway until SIGTERM/SIGINT."""

from __future__ import annotations

from functools import partial

from agent_gateway.app import create_app
from agent_gateway.config import GatewaySettings
from agent_gateway.profiles import ProfilesFileError, load_profiles
from agent_gateway.prompt_config import PromptsFileError, load_prompts
from stello.runner import main as run
from stello.settings import StelloSettings


def main() -> None:
    """Read the settings and the prompts and profiles files once, then serve.

    A prompts or profiles file that is not valid stops the process before
    anything starts, with one line naming the file and the problem (exit 1).
    """
    settings = StelloSettings()
    config = GatewaySettings()
    try:
        prompts = load_prompts(config.prompts, config.prompts_file)
        profiles = load_profiles(config.profiles_file)
    except (PromptsFileError, ProfilesFileError) as exc:
        raise SystemExit(f"agent_gateway: {exc}") from None
    factory = partial(create_app, config=config, prompts=prompts, profiles=profiles)
    run(settings, config.address, factory)


if __name__ == "__main__":
    main()
