"""Migrations: ordered, recorded, applied once, safe from several processes at once."""

from __future__ import annotations

import asyncio
import sys

import asyncpg
import pytest

from stello.migrate import load_migrations, migrate
from tests.support.database import create_test_database, drop_test_database

pytestmark = pytest.mark.sql


class TestMigrate:
    async def test_second_run_applies_nothing(self, database_url: str) -> None:
        """Migrating an up-to-date database is a no-op that keeps one row per version."""
        con = await asyncpg.connect(database_url)
        try:
            assert await migrate(con) == []
            versions = [
                r["version"] for r in await con.fetch("SELECT version FROM schema_migrations")
            ]
        finally:
            await con.close()
        assert versions == [m.version for m in load_migrations()]

    async def test_four_processes_at_once(self, admin_dsn: str) -> None:
        """Four `stello migrate` processes on a fresh database apply each file exactly once."""
        dsn = await create_test_database(admin_dsn)
        name = dsn.partition("?")[0].rpartition("/")[2]
        fresh = dsn.replace(name, name + "_fresh")
        con = await asyncpg.connect(admin_dsn)
        try:
            await con.execute(f'CREATE DATABASE "{name}_fresh"')
        finally:
            await con.close()
        try:
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "stello",
                    "migrate",
                    "--database-url",
                    fresh,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                for _ in range(4)
            ]
            results = [await p.communicate() for p in procs]
            assert [p.returncode for p in procs] == [0, 0, 0, 0], results
            con = await asyncpg.connect(fresh)
            try:
                rows = await con.fetch("SELECT version FROM schema_migrations ORDER BY version")
                tables = await con.fetchval(
                    "SELECT count(*) FROM information_schema.tables WHERE table_name = 'sessions'"
                )
            finally:
                await con.close()
            assert [r["version"] for r in rows] == [m.version for m in load_migrations()]
            assert tables == 1
        finally:
            await drop_test_database(admin_dsn, fresh)
            await drop_test_database(admin_dsn, dsn)
