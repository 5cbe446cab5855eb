"""`stello up`: the whole suite on one machine, in one process.

Embedded PostgreSQL (unless a database URL is given), migrations, then the
storage, tree and gateway servers on loopback. A local space and key are made
on first run, saved to the user's config dir (mode 0600) and reused after.
Ctrl-C or SIGTERM stops the servers gracefully, then the embedded database.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import grpc
import platformdirs

from stello.auth import KeyStore
from stello.db import create_pool
from stello.embedded import database_url
from stello.migrate import migrate_dsn
from stello.server import ServiceApp, create_server, shutdown
from stello.settings import StelloSettings

LOCAL_SPACE = "local"


@dataclass(frozen=True, slots=True)
class Ports:
    """Where the three servers listen (0 = any free port)."""

    host: str = "127.0.0.1"
    storage: int = 50061
    tree: int = 50062
    gateway: int = 50063


@dataclass(frozen=True, slots=True)
class Credentials:
    """The local space and its key, as saved for the CLI client commands."""

    space_id: str
    key: str
    gateway: str = ""


def credentials_path() -> Path:
    """The file `stello up` writes and the client commands read."""
    override = os.environ.get("STELLO_CONFIG_DIR")
    folder = Path(override) if override else Path(platformdirs.user_config_dir("stello"))
    return folder / "credentials.json"


def load_credentials() -> Credentials | None:
    """The saved credentials, or None when there are none."""
    path = credentials_path()
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return Credentials(str(data["space_id"]), str(data["key"]), str(data.get("gateway", "")))


def save_credentials(credentials: Credentials) -> Path:
    """Write the credentials readable by the owner only."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(
            {
                "space_id": credentials.space_id,
                "key": credentials.key,
                "gateway": credentials.gateway,
            },
            handle,
        )
    os.chmod(path, 0o600)
    return path


async def local_credentials(keys: KeyStore) -> Credentials:
    """Reuse the saved key while it still works against this database; else make one."""
    saved = load_credentials()
    if saved is not None:
        principal = await keys.resolve(saved.key)
        if principal is not None and str(principal.space_id) == saved.space_id:
            return saved
    created = await keys.create_key(space=LOCAL_SPACE, name="stello up")
    return Credentials(str(created.space_id), created.secret)


def _factories(
    ports: Ports,
) -> list[
    tuple[str, int, Callable[[StelloSettings, asyncpg.Pool, KeyStore, str, str], ServiceApp]]
]:
    """The three services in start order; the gateway learns the others' addresses."""
    from agent_gateway.app import create_app as gateway_app
    from agent_gateway.config import GatewaySettings
    from storage_service.app import create_app as storage_app
    from tree_service.app import create_app as tree_app

    def storage(s: StelloSettings, p: asyncpg.Pool, k: KeyStore, _a: str, _b: str) -> ServiceApp:
        return storage_app(s, p, k)

    def tree(s: StelloSettings, p: asyncpg.Pool, k: KeyStore, _a: str, _b: str) -> ServiceApp:
        return tree_app(s, p, k)

    def gateway(s: StelloSettings, p: asyncpg.Pool, k: KeyStore, st: str, tr: str) -> ServiceApp:
        config = GatewaySettings(storage_address=st, tree_address=tr)
        return gateway_app(s, p, k, config)

    return [
        ("storage", ports.storage, storage),
        ("tree", ports.tree, tree),
        ("gateway", ports.gateway, gateway),
    ]


async def run_up(
    settings: StelloSettings, ports: Ports, on_ready: Callable[[dict[str, str]], None]
) -> None:
    """Run everything until SIGINT/SIGTERM; `on_ready` gets the printed lines as a dict."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        await migrate_dsn(dsn)
        async with create_pool(dsn, settings) as pool:
            keys = KeyStore(pool, settings.auth_cache_ttl_s)
            running: list[tuple[ServiceApp, grpc.aio.Server]] = []
            addresses: dict[str, str] = {}
            try:
                for name, port, factory in _factories(ports):
                    app = factory(
                        settings,
                        pool,
                        keys,
                        addresses.get("storage", ""),
                        addresses.get("tree", ""),
                    )
                    server, bound = await create_server(app, f"{ports.host}:{port}")
                    await server.start()
                    running.append((app, server))
                    addresses[name] = f"{ports.host}:{bound}"
                credentials = await local_credentials(keys)
                save_credentials(
                    Credentials(credentials.space_id, credentials.key, addresses["gateway"])
                )
                on_ready(
                    {
                        "gateway": addresses["gateway"],
                        "storage": addresses["storage"],
                        "tree": addresses["tree"],
                        "space_id": credentials.space_id,
                        "key": credentials.key,
                    }
                )
                await _wait_for_stop_signal()
            finally:
                for app, server in reversed(running):
                    await shutdown(app, server, settings.shutdown_grace_s)


async def _wait_for_stop_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
