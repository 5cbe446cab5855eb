"""Ordered SQL migrations, applied once each and recorded in `schema_migrations`.

Each file runs in its own transaction that first takes a transaction-scoped
advisory lock, so concurrent `stello migrate` runs (four replicas starting at
once) apply every file exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import asyncpg

LOCK_KEY = 0x5737_E110  # "stello" migrations

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file: its version (file stem) and text."""

    version: str
    sql: str


def load_migrations() -> list[Migration]:
    """Every packaged migration, in file-name order."""
    folder = resources.files("stello.migrations")
    files = sorted(
        (item for item in folder.iterdir() if item.name.endswith(".sql")),
        key=lambda item: item.name,
    )
    return [Migration(item.name.removesuffix(".sql"), item.read_text("utf-8")) for item in files]


async def migrate(con: asyncpg.Connection) -> list[str]:
    """Apply the pending migrations on `con`; return the versions applied now."""
    applied: list[str] = []
    for migration in load_migrations():
        async with con.transaction():
            await con.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            await con.execute(CREATE_TABLE)
            done = await con.fetchval(
                "SELECT true FROM schema_migrations WHERE version = $1", migration.version
            )
            if done:
                continue
            await con.execute(migration.sql)
            await con.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)", migration.version
            )
            applied.append(migration.version)
    return applied


async def migrate_dsn(dsn: str) -> list[str]:
    """Connect to `dsn`, apply pending migrations, disconnect.

    `dsn` is the direct URL (STELLO_DATABASE_DIRECT_URL) where one is set; the
    connection prepares no named statements, so a PgBouncer in transaction mode
    in front of the server works as well.
    """
    con = await asyncpg.connect(dsn, statement_cache_size=0)
    try:
        return await migrate(con)
    finally:
        await con.close()
