"""`python -m agent_gateway`: serve the gateway until SIGTERM/SIGINT.

``--help`` lists the flags and every variable it reads, and exits; ``--workers N``
serves the port from N processes (`stello.serving.workers`).
"""

from __future__ import annotations

from functools import partial

from agent_gateway.app import create_app, services_tls
from agent_gateway.config import GatewaySettings
from agent_gateway.files import GatewayFiles
from agent_gateway.forks.profiles import ProfilesFileError
from agent_gateway.llm.prompts.config import PromptsFileError
from agent_gateway.tools.skills import SkillsFileError
from stello.errors import FailedPrecondition
from stello.serving.entry import parse_flags, settings_checked
from stello.serving.runner import launch_of
from stello.serving.runner import main as run
from stello.settings import StelloSettings
from stello.telemetry.logs import LogSettings
from stello.telemetry.tracing import TracingSettings


def main() -> None:
    """Read the settings and the prompts, profiles and skills files once, then serve.

    Invalid settings, a prompts, profiles or skills file that is not
    valid, or a TLS file of its channels to storage and tree that cannot be
    read, stop the process before anything starts, with a message naming
    the variable, or the file, line and problem (exit status 1).
    """
    flags = parse_flags(
        "python -m agent_gateway",
        "Serve stello.agent.v1.AgentGateway until SIGTERM or SIGINT.",
        GatewaySettings,
        (StelloSettings, LogSettings, TracingSettings),
    )
    with settings_checked("agent_gateway", flags):
        settings = StelloSettings()
        config = GatewaySettings(**flags)
        try:
            files = GatewayFiles.read(config, settings.max_slot_bytes)
            services_tls(config)  # read once here: before the database is sought
        except (PromptsFileError, ProfilesFileError, SkillsFileError, FailedPrecondition) as exc:
            raise SystemExit(f"agent_gateway: {exc}") from None
        factory = partial(
            create_app,
            config=config,
            prompts=files.prompts,
            profiles=files.profiles,
            skills=files.skills,
        )
        run(settings, launch_of("agent_gateway", config), factory)


if __name__ == "__main__":
    main()
