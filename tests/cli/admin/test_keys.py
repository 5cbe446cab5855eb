"""`stello keys` and `stello spaces` on a database of their own, given by --database-url."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pexpect
import pytest

from tests.cli.processes import client_env, private_env, run_cli
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

    async def test_an_admin_key_takes_no_space(self, fresh: str, home: Path) -> None:
        """`keys create --admin --space NAME` is a usage error saying why, and makes nothing:
        the space was ignored without a word, the key reaching every space."""
        env = private_env(home)
        db = ("--database-url", fresh)
        done = await asyncio.to_thread(
            run_cli, env, "keys", "create", "--admin", "--space", "evil", *db
        )
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.startswith("stello keys create: --space: an admin key reaches every")
        assert (await stello_ok(env, "keys", "list", *db)).strip() == ""

    @pytest.mark.parametrize(
        ("flag", "value", "said"),
        [
            pytest.param("--space", "evil\nspace_id: 0", "--space: must be one line", id="line"),
            pytest.param("--space", "\x1b[31mred", "--space: must be one line", id="escape"),
            pytest.param("--space", "   ", "--space: must not be empty", id="blank"),
            pytest.param("--space", "s" * 201, "--space: must be at most 200", id="long"),
            pytest.param("--principal", "a\tb", "--principal: must be one line", id="owner"),
            pytest.param("--name", "note\r", "--name: must be one line", id="note"),
        ],
    )
    async def test_names_follow_the_labels_rule(
        self, fresh: str, home: Path, flag: str, value: str, said: str
    ) -> None:
        """A space, owner or note that is not one line of at most 200 characters is a usage
        error naming the flag, and makes nothing (they were stored, and `spaces list`
        printed a forged line and ran the escape)."""
        env = private_env(home)
        db = ("--database-url", fresh)
        named = {"--space": "s", "--principal": "default", "--name": ""} | {flag: value}
        flags = [part for pair in named.items() for part in pair if pair[1]]
        done = await asyncio.to_thread(run_cli, env, "keys", "create", *flags, *db)
        assert (done.returncode, done.stdout) == (2, "")
        assert said in done.stderr
        assert (await stello_ok(env, "keys", "list", *db)).strip() == ""

    async def test_revoke_says_how_long_running_services_may_still_accept_it(
        self, fresh: str, home: Path
    ) -> None:
        """`keys revoke` says a running service may accept the key for up to
        STELLO_AUTH_CACHE_TTL_S more (each caches a resolved key that long): the seconds of
        this environment's setting, and the default's."""
        env = private_env(home)
        env.pop("STELLO_AUTH_CACHE_TTL_S", None)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "a", *db)
        key_id = dict(line.split(": ", 1) for line in made.splitlines())["key_id"]
        out = await stello_ok(env, "keys", "revoke", key_id, *db)
        assert out.splitlines()[0] == f"revoked: {key_id}"
        assert "up to 5 s (STELLO_AUTH_CACHE_TTL_S, default 5)" in out
        made = await stello_ok(env, "keys", "create", "--space", "a", *db)
        key_id = dict(line.split(": ", 1) for line in made.splitlines())["key_id"]
        slow = env | {"STELLO_AUTH_CACHE_TTL_S": "30"}
        out = await stello_ok(slow, "keys", "revoke", key_id, *db)
        assert "up to 30 s (STELLO_AUTH_CACHE_TTL_S, default 5)" in out

    async def test_revoke_as_json(self, fresh: str, home: Path) -> None:
        """`keys revoke --json` (or `stello --json keys revoke`) prints one object: the key
        revoked and how long running services may still accept it (it printed text)."""
        env = private_env(home) | {"STELLO_AUTH_CACHE_TTL_S": "30"}
        db = ("--database-url", fresh)
        for args in (("keys", "revoke", "--json"), ("--json", "keys", "revoke")):
            made = await stello_ok(env, "keys", "create", "--space", "a", *db)
            key_id = dict(line.split(": ", 1) for line in made.splitlines())["key_id"]
            out = await stello_ok(env, *args, key_id, *db)
            assert json.loads(out) == {
                "revoked": key_id,
                "auth_cache_ttl_s": 30,
                "auth_cache_ttl_s_default": 5,
            }

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

    async def test_create_says_whether_it_made_the_space(self, fresh: str, home: Path) -> None:
        """A key for a space no one had made says the space was created now (a mistyped name
        shows); a second key for it says existing; --json says so as `space_created`."""
        env = private_env(home)
        db = ("--database-url", fresh)
        first = await stello_ok(env, "keys", "create", "--space", "team-a", *db)
        made = dict(line.split(": ", 1) for line in first.splitlines())
        assert made["space"] == "team-a (created now)"
        again = await stello_ok(env, "keys", "create", "--space", "team-a", *db)
        kept = dict(line.split(": ", 1) for line in again.splitlines())
        assert (kept["space"], kept["space_id"]) == ("team-a (existing)", made["space_id"])
        as_json = json.loads(
            await stello_ok(env, "keys", "create", "--space", "team-b", "--json", *db)
        )
        assert (as_json["space"], as_json["space_created"]) == ("team-b", True)
        assert set(as_json) == {"key_id", "key", "space_id", "space", "space_created"}
        again_json = json.loads(
            await stello_ok(env, "--json", "keys", "create", "--space", "team-b", *db)
        )
        assert (again_json["space_id"], again_json["space_created"]) == (
            as_json["space_id"],
            False,
        )
        admin = json.loads(await stello_ok(env, "keys", "create", "--admin", "--json", *db))
        assert set(admin) == {"key_id", "key"}


async def space_names(dsn: str) -> list[str]:
    con = await asyncpg.connect(dsn)
    try:
        return [r["name"] for r in await con.fetch("SELECT name FROM spaces ORDER BY name")]
    finally:
        await con.close()


async def add_sessions(dsn: str, space_id: str, count: int) -> None:
    """`count` bare roots in the space."""
    con = await asyncpg.connect(dsn)
    try:
        await con.executemany(
            "INSERT INTO sessions (space_id, id, root_id, sibling_index, label) "
            "VALUES ($1, $2, $2, $3, 'root')",
            [(uuid.UUID(space_id), uuid.uuid4(), i) for i in range(count)],
        )
    finally:
        await con.close()


class TestSpacesList:
    async def test_columns_line_up_under_wide_names(self, fresh: str, home: Path) -> None:
        """A CJK space name is padded by the columns it takes (two per character), so the
        owner column lines up under it, and one session is "1 session" (the column drifted
        by a character per CJK character, and said "1 sessions")."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "研究チーム", *db)
        wide = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
        made = await stello_ok(env, "keys", "create", "--space", "team", *db)
        narrow = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
        await add_sessions(fresh, wide, 1)
        rows = {
            line[:36]: line for line in (await stello_ok(env, "spaces", "list", *db)).splitlines()
        }
        assert rows == {
            wide: f"{wide}  研究チーム" + " " * 14 + "  default           1 session",
            narrow: f"{narrow}  team" + " " * 20 + "  default           0 sessions",
        }

    async def test_list_as_json(self, fresh: str, home: Path) -> None:
        """`spaces list --json` (or `stello --json spaces list`) prints one array of the
        table's fields, as `keys list --json` does (the flag was taken and text printed)."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "team", "--principal", "ann", *db)
        space_id = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
        await add_sessions(fresh, space_id, 2)
        expected = [{"id": space_id, "name": "team", "principal": "ann", "sessions": 2}]
        for args in (("spaces", "list", "--json"), ("--json", "spaces", "list")):
            assert json.loads(await stello_ok(env, *args, *db)) == expected

    async def test_counts_in_the_right_number(self, fresh: str, home: Path) -> None:
        """`spaces list` says `1 session` of a space with one (it said `1 sessions`), and
        `0 sessions`, `2 sessions` as before."""
        env = private_env(home)
        db = ("--database-url", fresh)
        counts = {"none": 0, "one": 1, "two": 2}
        for name, count in counts.items():
            made = await stello_ok(env, "keys", "create", "--space", name, *db)
            await add_sessions(
                fresh, dict(line.split(": ", 1) for line in made.splitlines())["space_id"], count
            )
        listed = {
            line.split()[1]: line.split("default", 1)[1].strip()
            for line in (await stello_ok(env, "spaces", "list", *db)).splitlines()
        }
        assert listed == {"none": "0 sessions", "one": "1 session", "two": "2 sessions"}


class TestSpacesDelete:
    async def test_asks_naming_what_it_holds(self, fresh: str, home: Path) -> None:
        """On a terminal, `spaces delete` names the space, its sessions and keys, and erases
        nothing unless answered yes."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "team-b", *db)
        space_id = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
        await stello_ok(env, "keys", "create", "--space", "team-b", *db)
        await add_sessions(fresh, space_id, 3)

        def script(answer: str) -> int:
            child = pexpect.spawn(
                sys.executable,
                ["-m", "stello_cli", "spaces", "delete", "team-b", *db],
                env=client_env(env),
                encoding="utf-8",
                timeout=60,
            )
            child.expect_exact(
                f'Erase space "team-b" ({space_id}, owner default) with its 3 sessions and '
                "2 keys, records and all? [y/N] "
            )
            child.sendline(answer)
            child.expect(pexpect.EOF)
            child.wait()
            child.close()
            return int(child.exitstatus or 0)

        assert await asyncio.to_thread(script, "n") == 1
        assert await space_names(fresh) == ["team-b"]
        assert await asyncio.to_thread(script, "y") == 0
        assert await space_names(fresh) == []

    async def test_needs_yes_without_a_terminal(self, fresh: str, home: Path) -> None:
        """With stdin not a terminal it refuses (exit 2) and erases nothing; --yes erases."""
        env = private_env(home)
        db = ("--database-url", fresh)
        await stello_ok(env, "keys", "create", "--space", "team-b", *db)
        done = await asyncio.to_thread(run_cli, env, "spaces", "delete", "team-b", *db, stdin="y\n")
        assert done.returncode == 2, done.stderr
        assert "--yes: required when stdin is not a terminal" in done.stderr
        assert await space_names(fresh) == ["team-b"]
        out = await stello_ok(env, "spaces", "delete", "team-b", "--yes", *db)
        assert out.startswith("deleted: ")
        assert await space_names(fresh) == []

    async def test_delete_as_json(self, fresh: str, home: Path) -> None:
        """`spaces delete --yes --json` (or `stello --json spaces delete`) prints one object
        naming the space erased: its id, name and owner (it printed text)."""
        env = private_env(home)
        db = ("--database-url", fresh)
        for args in (("spaces", "delete", "--json"), ("--json", "spaces", "delete")):
            made = await stello_ok(env, "keys", "create", "--space", "t", "--principal", "ann", *db)
            space_id = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
            out = await stello_ok(env, *args, "t", "--yes", *db)
            assert json.loads(out) == {"deleted": space_id, "name": "t", "principal": "ann"}
            assert await space_names(fresh) == []

    async def test_delete_as_json_asks_on_stderr(self, fresh: str, home: Path) -> None:
        """On a terminal, `spaces delete --json` asks on stderr, so stdout holds only the
        JSON value (the question went before it on stdout)."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "t", *db)
        space_id = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]

        def answered() -> subprocess.CompletedProcess[str]:
            terminal, stdin = os.openpty()
            try:
                os.write(terminal, b"y\n")
                return subprocess.run(
                    [sys.executable, "-m", "stello_cli", "spaces", "delete", "t", "--json", *db],
                    env=client_env(env),
                    stdin=stdin,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            finally:
                os.close(stdin)
                os.close(terminal)

        done = await asyncio.to_thread(answered)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"deleted": space_id, "name": "t", "principal": "default"}
        assert done.stderr.startswith('Erase space "t"')
        assert await space_names(fresh) == []

    async def test_a_name_two_owners_use_needs_the_id(self, fresh: str, home: Path) -> None:
        """Names are unique per owner: a name two owners use erases neither; the id does."""
        env = private_env(home)
        db = ("--database-url", fresh)
        made = await stello_ok(env, "keys", "create", "--space", "shared", *db)
        first = dict(line.split(": ", 1) for line in made.splitlines())["space_id"]
        await stello_ok(env, "keys", "create", "--space", "shared", "--principal", "bob", *db)
        done = await asyncio.to_thread(run_cli, env, "spaces", "delete", "shared", "-y", *db)
        assert done.returncode == 1
        assert "2 spaces are named 'shared'" in done.stderr and "give the id" in done.stderr
        assert await space_names(fresh) == ["shared", "shared"]
        assert await stello_ok(env, "spaces", "delete", first, "-y", *db) == f"deleted: {first}\n"
        assert await space_names(fresh) == ["shared"]
