"""``python -m tree_service``: serve SessionTree (STELLO_* and STELLO_TREE_* settings).

``--help`` lists the flags and every variable it reads, and exits; ``--workers N``
serves the port from N processes (`stello.serving.workers`).
"""

from __future__ import annotations

from functools import partial

from stello.serving import runner
from stello.serving.entry import parse_flags, settings_checked
from stello.settings import StelloSettings
from stello.telemetry.logs import LogSettings
from stello.telemetry.tracing import TracingSettings
from tree_service.app import create_app
from tree_service.config import TreeSettings


def main() -> None:
    """Read the flags and settings once and serve (with the sweeper) until SIGTERM/SIGINT."""
    flags = parse_flags(
        "python -m tree_service",
        "Serve stello.tree.v1.SessionTree (and its provisional sweeper) until SIGTERM or SIGINT.",
        TreeSettings,
        (StelloSettings, LogSettings, TracingSettings),
    )
    with settings_checked("tree_service", flags):
        config = TreeSettings(**flags)
        launch = runner.launch_of("tree_service", config)
        runner.main(StelloSettings(), launch, partial(create_app, config=config))


if __name__ == "__main__":
    main()
