"""``python -m tree_service``: serve SessionTree (STELLO_* and STELLO_TREE_* settings)."""

from __future__ import annotations

from functools import partial

from stello import runner
from stello.settings import StelloSettings
from tree_service.app import create_app
from tree_service.config import TreeSettings


def main() -> None:
    """Build the settings once and serve (with the sweeper) until SIGTERM/SIGINT."""
    config = TreeSettings()
    runner.main(StelloSettings(), config.address, partial(create_app, config=config))


if __name__ == "__main__":
    main()
