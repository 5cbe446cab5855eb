"""``python -m storage_service``: serve SessionStorage on STELLO_STORAGE_HOST:PORT.

``--help`` lists the flags and every variable it reads, and exits; ``--workers N``
serves the port from N processes (`stello.serving.workers`).
"""

from __future__ import annotations

import functools

from stello.serving.entry import parse_flags, settings_checked
from stello.serving.runner import launch_of, main
from stello.settings import StelloSettings
from stello.telemetry.logs import LogSettings
from stello.telemetry.tracing import TracingSettings
from storage_service.app import create_app
from storage_service.config import StorageSettings


def run() -> None:
    """Read the flags and settings once, then serve until SIGTERM/SIGINT."""
    flags = parse_flags(
        "python -m storage_service",
        "Serve stello.storage.v1.SessionStorage until SIGTERM or SIGINT.",
        StorageSettings,
        (StelloSettings, LogSettings, TracingSettings),
    )
    with settings_checked("storage_service", flags):
        config = StorageSettings(**flags)
        launch = launch_of("storage_service", config)
        main(StelloSettings(), launch, functools.partial(create_app, config=config))


if __name__ == "__main__":
    run()
