"""`python -m agent_gateway`: serve the gateway until SIGTERM/SIGINT."""

from __future__ import annotations

from functools import partial

from agent_gateway.app import create_app
from agent_gateway.config import GatewaySettings
from stello.runner import main as run
from stello.settings import StelloSettings


def main() -> None:
    """Read the settings once and serve."""
    settings = StelloSettings()
    config = GatewaySettings()
    run(settings, config.address, partial(create_app, config=config))


if __name__ == "__main__":
    main()
