"""CLI fixtures: a private home for each test, and servers the CLI tests share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from stello.auth import KeyStore
from stello.settings import StelloSettings
from tests.cli.processes import make_cluster_template
from tests.cli.suite import Servers, Suite, readme_profiles, readme_skills, start_suite


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


@pytest.fixture(name="cluster_template", scope="session")
def _cluster_template() -> Iterator[Path]:
    """An embedded cluster made once (initdb, started and stopped by the library `stello up`
    uses, no database of ours in it), for `copy_cluster`: initdb was 1 s (idle) to 5 s (loaded)
    of a first `stello up`, in each test that starts one. Made in a process of
    its own: as root the library runs initdb under another user (see `home` on the path)."""
    folder = Path(tempfile.mkdtemp(prefix="stello-cli-template-"))
    yield make_cluster_template(folder / "pgdata")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(name="suite", scope="session")
async def _suite(
    settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore
) -> AsyncIterator[Suite]:
    """Storage, tree and two gateways (one with a slow echo), shared by the CLI tests."""
    folder = Path(tempfile.mkdtemp(prefix="stello-cli-suite-"))
    profiles = folder / "profiles.toml"
    profiles.write_text(readme_profiles(), encoding="utf-8")
    skills = folder / "skills.toml"
    skills.write_text(readme_skills(), encoding="utf-8")
    servers = Servers(settings, pool, keys)
    try:
        yield await start_suite(servers, profiles, skills)
    finally:
        await servers.stop()
        shutil.rmtree(folder, ignore_errors=True)
