"""One storage, tree and two gateways in this process for every CLI test that needs them.

The `stello` commands under test run as real processes (off the event loop that
serves these servers: `stello` below runs them in a thread). One gateway
answers at once; the other's echo model waits before each streamed piece, so a
reply is still streaming when a test presses Ctrl-C. Both read the README's
profiles and skills examples as their files.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import asyncpg
import grpc

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.auth import KeyStore
from stello.serving.runner import AppFactory
from stello.serving.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings
from storage_service.app import create_app as storage_app
from tests.cli.processes import private_env, run_cli
from tests.support.fixtures import TestSpace
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

README = Path(__file__).resolve().parents[2] / "README.md"
PROFILES_MARKER = "<!-- profiles example: the file tests/cli/suite.py serves -->"
SKILLS_MARKER = "<!-- skills example: the file tests/cli/suite.py serves -->"
SLOW_DELTA_S = 1.0
SWEEP_S = 3600.0
"""The suite tree's sweep interval: once at start, then not within a test run."""


def readme_block(marker: str) -> str:
    """The README's first toml block after `marker`."""
    after = README.read_text().partition(marker)[2]
    found = re.search(r"```toml\n(.*?)```", after, flags=re.DOTALL)
    assert found, f"README.md lost its example after {marker}"
    return found.group(1)


def readme_profiles() -> str:
    """The README's example profiles file."""
    return readme_block(PROFILES_MARKER)


def readme_skills() -> str:
    """The README's example skills file."""
    return readme_block(SKILLS_MARKER)


@dataclass(frozen=True, slots=True)
class Suite:
    """Addresses of the running servers."""

    gateway: str
    slow_gateway: str
    tree: str

    def env(self, home: Path, space: TestSpace, *, slow: bool = False) -> dict[str, str]:
        """A private environment naming a gateway and the space's key (the space itself is
        left to the key: the CLI asks the gateway which one it reaches)."""
        env = private_env(home)
        env.update(STELLO_GATEWAY=self.slow_gateway if slow else self.gateway, STELLO_KEY=space.key)
        return env


async def stello(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `stello ARGS` in a thread, so this loop keeps serving the servers."""
    return await asyncio.to_thread(run_cli, env, *args, stdin=stdin)


class Servers:
    """Started servers, stopped in reverse order."""

    def __init__(self, settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore) -> None:
        self._settings, self._pool, self._keys = settings, pool, keys
        self._running: list[tuple[ServiceApp, grpc.aio.Server]] = []

    async def start(self, factory: AppFactory) -> str:
        """Start one server on a free port; its address."""
        app = factory(self._settings, self._pool, self._keys)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        self._running.append((app, server))
        return f"127.0.0.1:{port}"

    async def stop(self) -> None:
        """Stop them all."""
        for app, server in reversed(self._running):
            await shutdown(app, server, 0)


async def start_suite(servers: Servers, profiles: Path, skills: Path | None = None) -> Suite:
    """Storage, tree, and the fast and slow gateways over them."""
    storage = await servers.start(storage_app)
    # The suite lives for the whole test session: its periodic sweep (which reaches every
    # space) must not remove another test's expired provisional session under its feet.
    tree = await servers.start(partial(tree_app, config=TreeSettings(sweep_interval_s=SWEEP_S)))
    addresses = []
    for delay in (0.0, SLOW_DELTA_S):
        config = GatewaySettings(
            storage_address=storage,
            tree_address=tree,
            profiles_file=profiles,
            skills_file=skills,
            echo_delay_s=delay,
        )
        addresses.append(await servers.start(partial(gateway_app, config=config)))
    return Suite(addresses[0], addresses[1], tree)


async def start_chain(servers: Servers, tree_config: TreeSettings | None = None) -> str:
    """Storage, tree (with `tree_config`) and a gateway with no profiles or skills files; the
    gateway's address."""
    storage = await servers.start(storage_app)
    tree = await servers.start(partial(tree_app, config=tree_config or TreeSettings()))
    config = GatewaySettings(storage_address=storage, tree_address=tree)
    return await servers.start(partial(gateway_app, config=config))
