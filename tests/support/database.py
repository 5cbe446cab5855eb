"""A real PostgreSQL for the tests: the embedded server, or STELLO_TEST_DATABASE_URL.

One throwaway database per test run (migrated once, dropped at the end);
isolation between tests comes from a fresh space per test.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from stello.embedded import embedded_server, with_database
from stello.migrate import migrate

# The embedded server records every statement (tests/distribution reads them
# to prove each one filters by space_id).
STATEMENT_STATS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.max": "20000",
    "pg_stat_statements.track": "all",
}


@contextmanager
def server_dsn() -> Iterator[str]:
    """The admin DSN of the server the tests use; an embedded one lives for the block."""
    configured = os.environ.get("STELLO_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    folder = Path(tempfile.mkdtemp(prefix="stello-test-pg-"))
    with embedded_server(folder / "data", delete=True, config=STATEMENT_STATS) as dsn:
        yield dsn


async def create_test_database(admin_dsn: str) -> str:
    """Create and migrate a fresh database; return its DSN."""
    name = f"stello_test_{uuid.uuid4().hex[:12]}"
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'CREATE DATABASE "{name}"')
    finally:
        await con.close()
    dsn = with_database(admin_dsn, name)
    con = await asyncpg.connect(dsn)
    try:
        await migrate(con)
    finally:
        await con.close()
    return dsn


async def drop_test_database(admin_dsn: str, dsn: str) -> None:
    """Drop the database behind `dsn`, closing any connection left to it."""
    name = dsn.partition("?")[0].rpartition("/")[2]
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await con.close()
