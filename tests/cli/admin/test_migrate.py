"""`stello migrate --pending`: what an upgrade would apply, each with what it does, none applied."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from stello.db.migrate import Migration, load_migrations, pending
from stello.serving.runner import warn_unmigrated
from stello_cli.admin.commands import OUTSIDE_NOTE, lock_notes, migrate_reply
from tests.cli.processes import private_env, run_cli
from tests.support.database import create_test_database, drop_test_database

pytestmark = pytest.mark.sql

OLDER = load_migrations()[-3].version  # a schema two migrations behind this release


@pytest.fixture(name="behind")
async def _behind(admin_dsn: str) -> AsyncIterator[str]:
    """A database migrated up to OLDER only."""
    dsn = await create_test_database(admin_dsn, OLDER)
    yield dsn
    await drop_test_database(admin_dsn, dsn)


async def waiting(dsn: str) -> list[str]:
    con = await asyncpg.connect(dsn)
    try:
        return await pending(con)
    finally:
        await con.close()


async def test_pending_lists_and_applies_nothing(behind: str, tmp_path: Path) -> None:
    env = private_env(tmp_path)
    later = load_migrations()[-2:]
    done = await asyncio.to_thread(run_cli, env, "migrate", "--pending", "--database-url", behind)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "pending: 2 migrations (none applied; `stello migrate` applies them)"
    expected: list[str] = []
    for migration in later:
        expected.append(f"{migration.version} {migration.title}")
        expected += lock_notes(migration)
        if not migration.transactional:
            expected.append(OUTSIDE_NOTE)
    assert [" ".join(line.split()) for line in lines[1:]] == expected
    assert await waiting(behind) == [m.version for m in later]

    done = await asyncio.to_thread(run_cli, env, "migrate", "--database-url", behind)
    assert done.returncode == 0, done.stderr
    done = await asyncio.to_thread(run_cli, env, "migrate", "--pending", "--database-url", behind)
    assert done.stdout == "pending: nothing (up to date)\n"


async def test_migrate_as_json(behind: str, tmp_path: Path) -> None:
    """`migrate --pending --json` and `migrate --json` (or `stello --json migrate`) print one
    object each: what is pending with its notes, then what was applied (they printed text)."""
    env = private_env(tmp_path)
    later = load_migrations()[-2:]
    db = ("--database-url", behind)
    done = await asyncio.to_thread(run_cli, env, "migrate", "--pending", "--json", *db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "pending": [
            {
                "version": m.version,
                "title": m.title,
                "notes": lock_notes(m) + ([] if m.transactional else [OUTSIDE_NOTE]),
            }
            for m in later
        ],
        "newer": [],
    }
    done = await asyncio.to_thread(run_cli, env, "migrate", "--json", *db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "applied": [m.version for m in later],
        "session_defaults": [],
    }
    done = await asyncio.to_thread(run_cli, env, "--json", "migrate", *db)
    assert json.loads(done.stdout) == {"applied": [], "session_defaults": []}


def test_migrate_distribute_as_json() -> None:
    """`migrate --distribute --json` gives the steps, and whether --shard-count was applied
    (null without it), as the text's lines say."""
    create = "create_distributed_table('sessions', 'space_id')"
    assert migrate_reply(["0001_init"], [create], [], 8) == {
        "applied": ["0001_init"],
        "distributed": [create],
        "shard_count_applied": True,
    }
    assert migrate_reply([], [], [], 8)["shard_count_applied"] is False
    assert migrate_reply([], [], [], None)["shard_count_applied"] is None
    assert migrate_reply([], None, ["jit=off"], None) == {
        "applied": [],
        "session_defaults": ["jit=off"],
    }


def test_the_tables_an_upgrade_builds_indexes_on() -> None:
    """Existing tables only (not one the file creates, nor a build CONCURRENTLY)."""
    sql = """-- A title.
CREATE TABLE fresh (id int);
CREATE INDEX fresh_id ON fresh (id);
CREATE UNIQUE INDEX IF NOT EXISTS old_a ON ONLY old (a);  -- CREATE INDEX x ON commented
create index quiet on Other (b);
CREATE INDEX CONCURRENTLY online ON big (c);
"""
    migration = Migration("0099_example", sql)
    assert (migration.title, migration.indexed_tables) == ("A title.", ["Other", "old"])


def test_the_tables_an_upgrade_locks() -> None:
    """ALTER TABLE on an existing table, or an index of it dropped (not CONCURRENTLY) and
    built again, locks it: reads wait too; --pending says so, and writes-only for the
    tables it only builds indexes on."""
    sql = """-- A title.
CREATE TABLE fresh (id int);
ALTER TABLE fresh ADD COLUMN b int;
ALTER TABLE IF EXISTS ONLY old ADD COLUMN v tsvector GENERATED ALWAYS AS (x) STORED;
CREATE INDEX old_v ON old (v);
DROP INDEX rebuilt_a;
CREATE INDEX rebuilt_a ON rebuilt (a);
CREATE INDEX other_b ON other (b);
DROP INDEX CONCURRENTLY gone;  -- ALTER TABLE commented
"""
    migration = Migration("0099_example", sql)
    assert migration.locked_tables == ["old", "rebuilt"]
    assert lock_notes(migration) == [
        "reads and writes of old, rebuilt wait while it runs (it locks them, and may rewrite "
        "them: as long as a large table's rewrite)",
        "builds indexes on other: writes to them wait meanwhile",
    ]


def test_the_real_migrations_that_lock_reads() -> None:
    """0006 (a column on sessions and records, then a recount in the same transaction) and
    0019 (a stored generated column on records) make reads wait, not only writes."""
    files = {m.version: m for m in load_migrations()}
    assert files["0006_bounded_turns"].locked_tables == [
        "compression_caches",
        "records",
        "session_slots",
        "sessions",
    ]
    records, sessions = lock_notes(files["0019_search"])
    assert records.startswith("reads and writes of records wait while it runs")
    assert sessions == "builds indexes on sessions: writes to them wait meanwhile"
    assert files["0020_followups"].locked_tables == ["sessions"]
    index_only = files["0015_session_metadata"]
    assert (index_only.locked_tables, index_only.indexed_tables) == ([], ["sessions"])


def test_a_file_outside_a_transaction_says_so() -> None:
    """Its line of its own makes it run outside a transaction; the title stops before it."""
    sql = "-- A title\n-- stello: outside a transaction\nCREATE INDEX CONCURRENTLY x ON big (c);\n"
    migration = Migration("0099_example", sql)
    assert (migration.title, migration.transactional) == ("A title", False)
    assert Migration("0099_example", "-- A title.\nSELECT 1; -- stello: outside\n").transactional


def test_every_migration_says_what_it_does() -> None:
    """Each file opens with a comment line: the title --pending prints."""
    assert [m.version for m in load_migrations() if not m.title] == []


def test_lock_table_and_triggers_are_told() -> None:
    """LOCK TABLE (ACCESS EXCLUSIVE unless it names a mode) and DROP TRIGGER make reads wait;
    CREATE TRIGGER and a LOCK in a mode against writes only make writes wait (--pending
    missed them: explore9 F1)."""
    sql = """-- A title.
LOCK TABLE sessions;
LOCK records, ONLY events IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE spaces IN ACCESS SHARE MODE NOWAIT;
CREATE TRIGGER slots_touch BEFORE UPDATE ON session_slots FOR EACH ROW EXECUTE FUNCTION f();
DROP TRIGGER IF EXISTS old_touch ON refs;
SELECT pg_advisory_lock(1);
SELECT id FROM sessions FOR UPDATE SKIP LOCKED;
"""
    migration = Migration("0099_example", sql)
    assert migration.locked_tables == ["refs", "sessions"]
    assert migration.write_locked_tables == ["events", "records", "session_slots"]
    assert lock_notes(migration)[-1] == (
        "writes to events, records, session_slots wait while it runs (it locks them: reads go on)"
    )


async def test_migrations_of_a_newer_release_are_told(
    admin_dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database a newer release migrated (after a rolled-back upgrade): `--pending` says
    which migrations this release does not know, and a service starting on it logs a
    warning (it said "nothing (up to date)" and started without a word)."""
    dsn = await create_test_database(admin_dsn)
    try:
        con = await asyncpg.connect(dsn)
        try:
            await con.execute("INSERT INTO schema_migrations (version) VALUES ('9999_future')")
        finally:
            await con.close()
        env = private_env(tmp_path)
        done = await asyncio.to_thread(run_cli, env, "migrate", "--pending", "--database-url", dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "newer: the database holds 1 migration this release does not know (9999_future): "
            "a newer release migrated it, and this one may fail on its schema; run that "
            "release (or a newer one) on this database",
            "pending: nothing (up to date)",
        ]
        async with asyncpg.create_pool(dsn, min_size=1, max_size=1) as pool:
            await warn_unmigrated(pool)
        assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
            done.stdout.splitlines()[0].removeprefix("newer: ")
        ]
    finally:
        await drop_test_database(admin_dsn, dsn)
