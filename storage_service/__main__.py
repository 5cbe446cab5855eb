"""``python -m storage_service``: serve SessionStorage on STELLO_STORAGE_HOST:PORT."""

from __future__ import annotations

import functools

from stello.runner import main
from stello.settings import StelloSettings
from storage_service.app import create_app
from storage_service.config import StorageSettings


def run() -> None:
    """Read the settings once, then serve until SIGTERM/SIGINT."""
    config = StorageSettings()
    main(StelloSettings(), config.address, functools.partial(create_app, config=config))


if __name__ == "__main__":
    run()
