"""Migrations: ordered, recorded, applied once, safe from several processes at once."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import cast

import asyncpg
import pytest

from stello.db.migrate import CREATE_TABLE, load_migrations, migrate, pending, pending_dsn
from stello.db.pool import create_pool
from stello.serving.runner import warn_unmigrated
from stello.settings import StelloSettings
from tests.storage.tokens import session_token_problems
from tests.support.database import (
    create_empty_database,
    create_test_database,
    drop_test_database,
)
from tests.support.history import end_other_backends, waiting_on_a_lock

pytestmark = pytest.mark.sql


class TestMigrate:
    async def test_second_run_applies_nothing(self, direct_database_url: str) -> None:
        """Migrating an up-to-date database is a no-op that keeps one row per version."""
        con = await asyncpg.connect(direct_database_url)
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
        fresh = await create_empty_database(admin_dsn)
        try:
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "stello_cli",
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


SCANS = """
SELECT seq_scan + COALESCE(idx_scan, 0) FROM pg_stat_user_tables
WHERE relname = 'schema_migrations'
"""


async def scans(dsn: str, call: Callable[[], Awaitable[object]]) -> int:
    """The scans of `schema_migrations` while `call()` ran (every other backend ended
    before each count, so their statistics are flushed)."""
    counter = await asyncpg.connect(dsn)
    try:
        await end_other_backends(counter)
        before = await counter.fetchval(SCANS)
        await call()
        await end_other_backends(counter)
        return int(await counter.fetchval(SCANS)) - int(before)
    finally:
        await counter.close()


async def migrate_at(dsn: str, until: str | None = None) -> list[str]:
    """`migrate` on a connection of its own, closed after."""
    con = await asyncpg.connect(dsn)
    try:
        return await migrate(con, until=until)
    finally:
        await con.close()


class TestUpToDate:
    """An up-to-date schema is read once whatever the number of migrations it holds
    (STYLE §17): `stello migrate` probed each of them in a transaction of its own, 5 at
    the fifth migration, 46 at the 46th."""

    @pytest.mark.plain_postgres("migrates a database of its own from an older schema")
    async def test_migrate_reads_the_record_once_however_many_migrations(
        self, admin_dsn: str
    ) -> None:
        versions = [m.version for m in load_migrations()]
        dsn = await create_test_database(admin_dsn, until=versions[4])
        try:
            short = await scans(dsn, lambda: migrate_at(dsn, until=versions[4]))
            assert await migrate_at(dsn) == versions[5:]
            full = await scans(dsn, lambda: migrate_at(dsn))
            listed = await scans(dsn, lambda: pending_dsn(dsn))
            async with create_pool(dsn, StelloSettings(db_pool_min_size=1)) as pool:
                warned = await scans(dsn, lambda: warn_unmigrated(pool))
        finally:
            await drop_test_database(admin_dsn, dsn)
        assert (short, full, listed, warned) == (1, 1, 1, 1)


class TestTenantLocalOrder:
    """0004: refs ordered per session instead of by one identity sequence."""

    async def test_existing_refs_keep_their_order(self, admin_dsn: str) -> None:
        """Refs written under the identity keep their order, renumbered 0.. per session."""
        old = await create_empty_database(admin_dsn)
        con = await asyncpg.connect(old)
        try:
            await con.execute(CREATE_TABLE)
            for migration in load_migrations():
                if migration.version < "0004":
                    await con.execute(migration.sql)
                    await con.execute(
                        "INSERT INTO schema_migrations (version) VALUES ($1)", migration.version
                    )
            expected = await seed_refs(con)
            assert await migrate(con) == [
                m.version for m in load_migrations() if m.version >= "0004"
            ]
            rows = await con.fetch(
                "SELECT space_id, from_id, to_id, position FROM session_refs"
                " ORDER BY space_id, from_id, position"
            )
            identity = await con.fetchval(
                "SELECT is_identity FROM information_schema.columns"
                " WHERE table_name = 'session_refs' AND column_name = 'position'"
            )
        finally:
            await con.close()
            await drop_test_database(admin_dsn, old)
        got: dict[tuple[uuid.UUID, uuid.UUID], list[tuple[uuid.UUID, int]]] = {}
        for r in rows:
            got.setdefault((r["space_id"], r["from_id"]), []).append((r["to_id"], r["position"]))
        assert got == {
            key: [(to, n) for n, to in enumerate(targets)] for key, targets in expected.items()
        }
        assert identity == "NO"


async def seed_refs(
    con: asyncpg.Connection,
) -> dict[tuple[uuid.UUID, uuid.UUID], list[uuid.UUID]]:
    """Two spaces of two sources and three targets, refs added interleaved; each order."""
    principal = uuid.uuid4()
    await con.execute("INSERT INTO principals (id, name) VALUES ($1, 'p')", principal)
    plan: list[tuple[uuid.UUID, uuid.UUID, list[uuid.UUID]]] = []
    for n in range(2):
        space = uuid.uuid4()
        await con.execute(
            "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, $3)",
            space,
            principal,
            f"s{n}",
        )
        ids = [uuid.uuid4() for _ in range(5)]
        for session in ids:
            await con.execute(
                "INSERT INTO sessions (space_id, id, root_id, label) VALUES ($1, $2, $2, 'x')",
                space,
                session,
            )
        plan += [(space, ids[0], ids[2:]), (space, ids[1], ids[:1] + ids[4:2:-1])]
    for round_ in range(3):
        for space, source, targets in plan:
            await con.execute(
                "INSERT INTO session_refs (space_id, from_id, to_id) VALUES ($1, $2, $3)",
                space,
                source,
                targets[round_],
            )
    return {(space, source): targets for space, source, targets in plan}


class TestBoundedTurns:
    """0006: token columns filled for existing records, summaries kept by seq."""

    async def test_existing_records_get_their_tokens(self, admin_dsn: str) -> None:
        """Records written before 0006 get exact estimates and cumulatives (a trimmed session
        from its oldest remaining record); the cache row stays, as a complete summary."""
        old = await create_empty_database(admin_dsn)
        con = await asyncpg.connect(old)
        try:
            await con.execute(CREATE_TABLE)
            for migration in load_migrations():
                if migration.version < "0006":
                    await con.execute(migration.sql)
                    await con.execute(
                        "INSERT INTO schema_migrations (version) VALUES ($1)", migration.version
                    )
            space, sessions = await seed_records(con)
            assert "0006_bounded_turns" in await migrate(con)
            problems = [
                problem
                for session, trimmed in sessions
                for problem in await session_token_problems(con, space, session, trimmed=trimmed)
            ]
            cache = await con.fetchrow("SELECT covered_until_seq, lossy FROM compression_caches")
        finally:
            await con.close()
            await drop_test_database(admin_dsn, old)
        assert problems == []
        assert cache is not None and tuple(cache) == (2, False)


async def seed_records(con: asyncpg.Connection) -> tuple[uuid.UUID, list[tuple[uuid.UUID, bool]]]:
    """A space with a session of mixed records (a cache on it), a trimmed one and an empty one."""
    principal, space = uuid.uuid4(), uuid.uuid4()
    await con.execute("INSERT INTO principals (id, name) VALUES ($1, 'p')", principal)
    await con.execute(
        "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, 's')", space, principal
    )
    full, trimmed, empty = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for session in (full, trimmed, empty):
        await con.execute(
            "INSERT INTO sessions (space_id, id, root_id, label) VALUES ($1, $2, $2, 'x')",
            space,
            session,
        )
    calls = '[{"id": "c1", "name": "search", "arguments_json": "{\\"q\\":\\"天气\\"}"}]'
    rows = [
        (full, 1, "user", "hello there", None),
        (full, 2, "assistant", "", calls),
        (full, 3, "tool", "晴天，二十五度", None),
        (full, 4, "assistant", "x" * 4001, None),
        (trimmed, 3, "user", "kept", None),
        (trimmed, 4, "assistant", "also kept 🎉", None),
    ]
    for session, seq, role, content, tool_calls in rows:
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content, tool_calls)"
            " VALUES ($1, $2, $3, $4, $5, $6::jsonb)",
            space,
            session,
            seq,
            role,
            content,
            tool_calls,
        )
    await con.execute(
        "INSERT INTO compression_caches (space_id, session_id, summary, covered_until_seq)"
        " VALUES ($1, $2, 'so far', 2)",
        space,
        full,
    )
    return space, [(full, False), (trimmed, True), (empty, False)]


class TestPending:
    """What a database lacks, and the warning a service starting on it logs."""

    async def test_fresh_then_partly_then_fully_migrated(
        self, admin_dsn: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        versions = [m.version for m in load_migrations()]
        bare = await create_empty_database(admin_dsn)
        try:
            con = await asyncpg.connect(bare)
            try:
                assert await pending(con) == versions
                await migrate(con, until=versions[0])
                assert await pending(con) == versions[1:]
                async with create_pool(bare, StelloSettings(db_pool_min_size=1)) as pool:
                    with caplog.at_level(logging.WARNING, logger="stello.serving.runner"):
                        await warn_unmigrated(pool)
                        assert caplog.messages == [
                            f"the database lacks {len(versions) - 1} of Stello's migrations "
                            f"({versions[1]} to {versions[-1]}): run `stello migrate` with "
                            "this STELLO_DATABASE_URL; until then the calls that need them fail"
                        ]
                        caplog.clear()
                        await migrate(con)
                        assert await pending(con) == []
                        await warn_unmigrated(pool)
                        assert caplog.messages == []
            finally:
                await con.close()
        finally:
            await drop_test_database(admin_dsn, bare)


OUTSIDE_VERSION = "0027_records_tokens_for_reaching_only"

ONE_SESSION = """
WITH p AS (INSERT INTO principals (id, name) VALUES ($1::uuid, $1::uuid::text) RETURNING id),
     s AS (INSERT INTO spaces (id, principal_id, name) SELECT $1, p.id, 'migrated' FROM p
           RETURNING id)
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
SELECT s.id, $1, $1, 0, 'migrated' FROM s
"""

ONE_RECORD = """
INSERT INTO records (space_id, session_id, seq, role, content, created_at, token_estimate,
                     token_cumulative)
VALUES ($1, $1, $2::bigint, 'user', 'appended while the index is built', now(), 9, 9 * $2::bigint)
"""

RECORDS_TOKENS = """
SELECT i.indisvalid AS valid, pg_get_expr(i.indpred, i.indrelid) AS predicate
FROM pg_index i WHERE i.indexrelid = 'records_tokens'::regclass
"""


@pytest.mark.plain_postgres(
    "starts from the schema before 0027 on one server and watches its locks there; on Citus "
    "the build waits on the workers, and test_citus.py's TestLaterMigrations runs 0027 on a "
    "distributed schema"
)
class TestOutsideATransaction:
    """A migration that says `-- stello: outside a transaction` (0027: an index of
    `records` built CONCURRENTLY) leaves the table open to writes while it runs."""

    async def test_appends_go_on_while_records_tokens_is_built(self, admin_dsn: str) -> None:
        """A transaction that appended and has not committed holds the build back (as
        any build waits for the writers before it), and an append after it goes through
        meanwhile; a build in a transaction (0027's first version) held the table, and
        that append waited for the uncommitted one."""
        assert not {m.version: m for m in load_migrations()}[OUTSIDE_VERSION].transactional
        dsn = await create_test_database(admin_dsn, until="0026_orphaned_jobs_by_space")
        session = uuid.uuid4()
        writer, other, con = [await asyncpg.connect(dsn) for _ in range(3)]
        try:
            await other.execute(ONE_SESSION, session)
            open_append = writer.transaction()
            await open_append.start()
            await writer.execute(ONE_RECORD, session, 1)
            migrating = asyncio.create_task(migrate(con))
            for _ in range(500):
                if await waiting_on_a_lock(other) or migrating.done():
                    break
                await asyncio.sleep(0.01)
            assert await waiting_on_a_lock(other) == 1
            await asyncio.wait_for(other.execute(ONE_RECORD, session, 2), 5)
            assert not migrating.done()
            await open_append.commit()
            assert OUTSIDE_VERSION in await asyncio.wait_for(migrating, 60)
            row = await other.fetchrow(RECORDS_TOKENS)
            assert row is not None and row["valid"], row
            assert row["predicate"] == "(token_cumulative >= 0)"
        finally:
            for opened in (writer, other, con):
                await opened.close()
            await drop_test_database(admin_dsn, dsn)

    async def test_a_pools_connection_migrates_too(self, admin_dsn: str) -> None:
        """`migrate` on a connection of a pool (as the tests that migrate a database
        forward take one) runs a migration outside a transaction on a second connection
        opened as the pool's was: it was opened with the pool's proxy class, which takes
        no connection's arguments (TypeError)."""
        dsn = await create_test_database(admin_dsn, until="0026_orphaned_jobs_by_space")
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        try:
            async with pool.acquire() as con:
                applied = await migrate(cast(asyncpg.Connection, con))
            assert OUTSIDE_VERSION in applied
        finally:
            await pool.close()
            await drop_test_database(admin_dsn, dsn)
