"""Run one service process: database (configured or embedded), pool, app, server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg

from stello.auth import KeyStore
from stello.db import create_pool
from stello.embedded import database_url
from stello.migrate import migrate_dsn
from stello.server import ServiceApp, serve
from stello.settings import StelloSettings

AppFactory = Callable[[StelloSettings, asyncpg.Pool, KeyStore], ServiceApp]


def configure_logging() -> None:
    """Plain structured-ish lines on stderr: time, level, logger, message."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


async def run_service(
    settings: StelloSettings, address: str, factory: AppFactory, *, migrate: bool = False
) -> None:
    """Serve the app `factory` builds until SIGTERM/SIGINT."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        if migrate:
            await migrate_dsn(dsn)
        async with create_pool(dsn, settings) as pool:
            keys = KeyStore(pool, settings.auth_cache_ttl_s)
            await serve(factory(settings, pool, keys), address)


def main(settings: StelloSettings, address: str, factory: AppFactory) -> None:
    """Entry point body shared by every service's ``__main__``."""
    configure_logging()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(run_service(settings, address, factory))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where installed (about half asyncpg's CPU per query), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
