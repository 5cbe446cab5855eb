"""`stello keys` and `stello spaces` on a database of their own, given by --database-url."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.processes import private_env, run_cli
from tests.support.database import create_test_database, drop_test_database

pytestmark = pytest.mark.sql


@pytest.fixture(name="fresh")
async def _fresh(admin_dsn: str) -> AsyncIterator[str]:
    """A fresh, migrated database."""
    dsn = await create_test_database(admin_dsn)
    yield dsn
    await drop_test_database(admin_dsn, dsn)


async def stello_ok(env: dict[str, str], *args: str) -> str:
    """Run a command that must succeed; its stdout."""
    done = await asyncio.to_thread(run_cli, env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


class TestKeys:
    async def test_list_shows_the_note(self, fresh: str, home: Path) -> None:
        """`keys list` shows the note given by `keys create --name`, and nothing for none."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "a", "--name", "ci runner", *db)
        noted = dict(line.split(": ", 1) for line in made.splitlines())["key_id"]
        made = await stello_ok(env, "keys", "create", "--admin", *db)
        plain = dict(line.split(": ", 1) for line in made.splitlines())["key_id"]
        rows = {
            line.split()[0]: line
            for line in (await stello_ok(env, "keys", "list", *db)).splitlines()
        }
        assert rows[noted].split()[1:] == ["tenant", "a", "live", "ci", "runner"]
        assert rows[plain].split()[1:] == ["admin", "*", "live"]

    async def test_list_as_json(self, fresh: str, home: Path) -> None:
        """`keys list --json` (or `stello --json keys list`) prints one array of the table's
        fields, an admin key's space null, a revoked key so, and never a secret."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "a", "--name", "ci runner", *db)
        tenant = dict(line.split(": ", 1) for line in made.splitlines())
        made = await stello_ok(env, "keys", "create", "--admin", *db)
        admin = dict(line.split(": ", 1) for line in made.splitlines())
        await stello_ok(env, "keys", "revoke", admin["key_id"], *db)
        expected = [
            {
                "id": tenant["key_id"],
                "scope": "tenant",
                "space": "a",
                "state": "live",
                "name": "ci runner",
            },
            {
                "id": admin["key_id"],
                "scope": "admin",
                "space": None,
                "state": "revoked",
                "name": "",
            },
        ]
        for args in (("keys", "list", "--json"), ("--json", "keys", "list")):
            out = await stello_ok(env, *args, *db)
            assert json.loads(out) == expected
            assert tenant["key"] not in out and admin["key"] not in out
