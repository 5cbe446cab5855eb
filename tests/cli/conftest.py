"""CLI fixtures: a private home for each test, outside pytest's own temporary folder."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(name="home")
def _home() -> Iterator[Path]:
    """A fresh folder for HOME, the XDG dirs, the config dir and the embedded data dir.

    Not under pytest's tmp_path: as root the embedded PostgreSQL runs as another
    user who must traverse the path, and any pytest starting on the machine resets
    /tmp/pytest-of-<user> to mode 0700 (as tests/support/database.py avoids too).
    """
    folder = Path(tempfile.mkdtemp(prefix="stello-cli-"))
    yield folder / "home"
    shutil.rmtree(folder, ignore_errors=True)
