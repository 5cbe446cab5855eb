"""Run one service process: database (configured or embedded), pool, app, server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import asyncpg

from stello import logs
from stello.auth import KeyStore
from stello.db import create_pool
from stello.embedded import database_url
from stello.migrate import migrate_dsn
from stello.server import ServiceApp, serve
from stello.settings import StelloSettings
from stello.tracing import TracingSettings, setup_tracing

AppFactory = Callable[[StelloSettings, asyncpg.Pool, KeyStore], ServiceApp]


def configure_logging() -> None:
    """Log lines with request ids on stderr, text or JSON (`stello.logs`, STELLO_LOG_*)."""
    logs.configure_logging(logs.LogSettings())


def _service_name() -> str:
    """The package run with ``python -m`` (e.g. ``storage_service``), for span names."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec.parent or spec.name) if spec is not None else "stello"


async def run_service(
    settings: StelloSettings, address: str, factory: AppFactory, *, migrate: bool = False
) -> None:
    """Serve the app `factory` builds until SIGTERM/SIGINT."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        if migrate:
            await migrate_dsn(settings.direct_dsn(dsn))
        async with create_pool(dsn, settings) as pool:
            keys = KeyStore(pool, settings.auth_cache_ttl_s)
            await serve(factory(settings, pool, keys), address)


def main(settings: StelloSettings, address: str, factory: AppFactory) -> None:
    """Entry point body shared by every service's ``__main__``."""
    configure_logging()
    provider = setup_tracing(TracingSettings(), _service_name())
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(run_service(settings, address, factory))
    finally:
        if provider is not None:
            provider.shutdown()  # flush the spans still batched


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where installed (about half asyncpg's CPU per query), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
