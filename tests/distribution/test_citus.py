"""The schema on a real Citus cluster: `stello migrate`, then `distribute`, on a coordinator
with two workers (DESIGN §4.7, docs/scaling.md).

The cluster is built and started by scripts/citus and tests/support/citus.py;
where Citus cannot be made available every test here skips with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from stello.db.migrate import load_migrations, migrate
from stello.db.pool import create_pool
from stello.distribution import plan as distribution_plan
from stello.distribution import runs as distribution_runs
from stello.distribution.apply import distribute
from stello.distribution.runs import is_distributed
from stello.errors import FailedPrecondition
from storage_service.search.backfill import SearchBackfill
from storage_service.unit import Database
from tests.support.bouncer import database_of
from tests.support.citus import (
    SCRIPT,
    SKIPPED,
    CitusCluster,
    LoggedError,
    logged_errors,
)
from tests.support.citus_pass import ROUTER_ONLY, unexpected_errors
from tree_service.trees.repository import FOREST, ROOT_TREE, tree_settings

pytestmark = [pytest.mark.citus, pytest.mark.timeout(300)]

SHARDS = 4  # per table: fast to create, still spread over both workers

DATABASE_DEFAULTS = """
SELECT coalesce(s.setconfig, '{}') FROM pg_database d
LEFT JOIN pg_db_role_setting s ON s.setdatabase = d.oid AND s.setrole = 0
WHERE d.datname = current_database()
"""

FOREIGN_KEYS = """
SELECT t.relname AS table_name, con.conname AS name, pg_get_constraintdef(con.oid) AS definition
FROM pg_constraint con
JOIN pg_class t ON t.oid = con.conrelid
WHERE con.contype = 'f' AND t.relnamespace = 'public'::regnamespace
ORDER BY 1, 2
"""

TABLES = """
SELECT table_name::text AS name, citus_table_type AS kind, distribution_column AS column_name,
       colocation_id
FROM citus_tables
ORDER BY 1
"""

# The same, with the group told as "that of sessions" or not (groups are numbered per database).
PLACEMENT = """
SELECT t.table_name::text AS name, t.citus_table_type AS kind, t.distribution_column,
       t.colocation_id = s.colocation_id AS with_sessions
FROM citus_tables t, citus_tables s
WHERE s.table_name = 'sessions'::regclass
ORDER BY 1
"""

PUBLIC_TABLES = """
SELECT relname FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')
ORDER BY 1
"""

# Where each distributed function lives: its argument index and group (NULL: propagated only).
FUNCTIONS = """
SELECT p.oid::regprocedure::text AS signature, o.distribution_argument_index AS argument,
       o.colocationid,
       o.colocationid = (SELECT colocation_id FROM citus_tables
                         WHERE table_name = 'sessions'::regclass) AS with_sessions
FROM pg_dist_object o
JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND p.oid = o.objid
ORDER BY 1
"""

SHARD_NODES = """
SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = $1::regclass
"""


@dataclass(frozen=True, slots=True)
class Distributed:
    """A fresh database on the cluster, migrated and distributed, and what it took."""

    dsn: str
    applied: list[str]
    keys_before: list[tuple[str, str, str]]
    steps: list[str]


def _signature(text: str) -> str:
    """A signature as regprocedure prints it (no blank after the commas)."""
    return text.replace(", ", ",")


async def _keys(con: asyncpg.Connection) -> list[tuple[str, str, str]]:
    return [(r["table_name"], r["name"], r["definition"]) for r in await con.fetch(FOREIGN_KEYS)]


async def _snapshot(con: asyncpg.Connection) -> tuple[object, ...]:
    """What distribution decides, as the catalog holds it: tables, keys, functions (groups
    told relative to sessions', so two databases compare)."""
    return (
        [tuple(r) for r in await con.fetch(PLACEMENT)],
        await _keys(con),
        [(r["signature"], r["argument"], r["with_sessions"]) for r in await con.fetch(FUNCTIONS)],
    )


@pytest.fixture(name="node_logs", autouse=True)
def _node_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print what the nodes logged during the test: pytest shows it under a failure only."""
    if "cluster" not in request.fixturenames:
        yield
        return
    cluster: CitusCluster = request.getfixturevalue("cluster")
    sizes = {node.name: len(node.log()) for node in cluster.nodes}
    yield
    for node in cluster.nodes:
        print(f"===== {node.name} log during the test\n{node.log()[sizes[node.name] :]}")  # noqa: T201


@pytest.fixture(name="distributed", scope="module")
async def _distributed(cluster: CitusCluster) -> AsyncIterator[Distributed]:
    dsn = await cluster.create_database()
    con = await asyncpg.connect(dsn)
    try:
        applied = await migrate(con)
        keys = await _keys(con)
        steps = await distribute(con, shard_count=SHARDS)
    finally:
        await con.close()
    yield Distributed(dsn, applied, keys, steps)


@pytest.fixture(name="con")
async def _con(distributed: Distributed) -> AsyncIterator[asyncpg.Connection]:
    con = await asyncpg.connect(distributed.dsn)
    try:
        yield con
    finally:
        await con.close()


class TestScript:
    def test_no_source_skips_in_one_line(self, tmp_path: Path) -> None:
        """Without an installed Citus or a tarball, scripts/citus says why in one line, exit 3."""
        pg_config = tmp_path / "pg_config"
        pg_config.write_text(
            "#!/bin/sh\n"
            f'case "$1" in --pkglibdir) echo {tmp_path};; --sharedir) echo {tmp_path};;\n'
            "  --version) echo 'PostgreSQL 15.20';; esac\n"
        )
        pg_config.chmod(0o755)
        env = {
            **os.environ,
            "STELLO_CITUS_PG_CONFIG": str(pg_config),
            "STELLO_CITUS_SOURCE": str(tmp_path / "missing.tar.gz"),
            "STELLO_CITUS_CACHE": str(tmp_path / "cache"),
        }
        done = subprocess.run(
            ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == SKIPPED
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "Citus pass skipped" in lines[0], done.stderr

    def test_bad_checksum_fails(self, tmp_path: Path) -> None:
        """A tarball whose sha256 is not the vendored one fails the script (no skip, no build)."""
        pg_config = tmp_path / "pg_config"
        pg_config.write_text(
            "#!/bin/sh\n"
            f'case "$1" in --pkglibdir) echo {tmp_path};; --sharedir) echo {tmp_path};;\n'
            "  --version) echo 'PostgreSQL 15.20';; esac\n"
        )
        pg_config.chmod(0o755)
        tarball = tmp_path / "citus-13.2.2.tar.gz"
        tarball.write_bytes(b"not citus")
        env = {
            **os.environ,
            "STELLO_CITUS_PG_CONFIG": str(pg_config),
            "STELLO_CITUS_SOURCE": str(tarball),
            "STELLO_CITUS_CACHE": str(tmp_path / "cache"),
        }
        done = subprocess.run(
            ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode not in (0, SKIPPED)
        assert "sha256" in done.stderr


class TestLog:
    def test_errors_come_with_their_statement(self) -> None:
        """A node's log is read as its ERRORs, each with the (multi-line) statement logged."""
        log = (
            "2026-01-02 03:04:05.678 UTC [11] db1 LOG:  checkpoint starting\n"
            "2026-01-02 03:04:05.679 UTC [12] db1 ERROR:  could not run distributed query\n"
            "2026-01-02 03:04:05.679 UTC [12] db1 HINT:  Consider an equality filter.\n"
            "2026-01-02 03:04:05.679 UTC [12] db1 STATEMENT:  \n"
            "\tSELECT 1\n"
            "\tFOR UPDATE\n"
            "2026-01-02 03:04:06.000 UTC [13]  ERROR:  canceling statement due to user request\n"
        )
        assert logged_errors(log) == [
            LoggedError("db1", "could not run distributed query", "\nSELECT 1\nFOR UPDATE"),
            LoggedError("", "canceling statement due to user request", ""),
        ]

    def test_only_provoked_errors_are_allowed(self) -> None:
        """The pass's allow-list drops the errors tests provoke on purpose (each with its
        statement where it names one; a statement timeout, a bound of ours met, with any or
        none) and keeps any other, a refused statement above all."""
        refused = LoggedError("db", "could not run distributed query with FOR UPDATE", "SELECT 1")
        cancelled = LoggedError("db", "canceling statement due to user request", "SELECT 1")
        timeout_elsewhere = LoggedError(
            "db", "canceling statement due to statement timeout", "SELECT * FROM records"
        )
        tree_timeout = LoggedError(
            "db", "canceling statement due to statement timeout", "\nWITH RECURSIVE tree AS ("
        )
        whole_tree_timeouts = [  # a whole tree's one read (no walk)
            LoggedError("db", "canceling statement due to statement timeout", statement)
            for statement in (
                FOREST,
                ROOT_TREE,
                # as a worker logs it: Citus's deparse of the read for the shard (ci23)
                "SELECT (id)::text AS id, (parent_id)::text AS parent_id, depth, sibling_index,"
                " label, status, turn_count FROM public.sessions_102008 s WHERE true",
                # or in the batch Citus sent it in, headed by GetTree's settings (ci29)
                "BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED;\n" + tree_settings(5000).strip(),
            )
        ]
        # a bound met on a worker between the messages of a statement: none logged
        timeout_unlogged = LoggedError("db", "canceling statement due to statement timeout", "")
        found = unexpected_errors(
            [
                refused,
                cancelled,
                timeout_elsewhere,
                tree_timeout,
                *whole_tree_timeouts,
                timeout_unlogged,
            ]
        )
        assert found == [refused]
        unprovoked_key = LoggedError(
            "db",
            'insert or update on table "idempotency_key_sessions" violates foreign key '
            'constraint "idempotency_key_sessions_space_id_session_id_fkey"',
            "UPDATE sessions SET label = $3",
        )
        assert unexpected_errors([unprovoked_key]) == [unprovoked_key]


class TestDistribute:
    async def test_migrate_on_a_fresh_coordinator(self, distributed: Distributed) -> None:
        """stello migrate applies every migration on a coordinator whose schema is not
        distributed yet."""
        assert distributed.applied == [m.version for m in load_migrations()]

    async def test_tenant_tables_are_colocated_by_space_id(self, con: asyncpg.Connection) -> None:
        """Every tenant table is distributed by space_id in the co-location group of sessions."""
        tables = {r["name"]: r for r in await con.fetch(TABLES)}
        group = tables["sessions"]["colocation_id"]
        for name in distribution_plan.DISTRIBUTED_TABLES:
            assert tables[name]["kind"] == "distributed", name
            assert tables[name]["column_name"] == "space_id", name
            assert tables[name]["colocation_id"] == group, name
        shards = await con.fetchval(
            "SELECT shard_count FROM citus_tables WHERE table_name = 'sessions'::regclass"
        )
        assert shards == SHARDS

    async def test_every_table_is_placed(self, con: asyncpg.Connection) -> None:
        """No table of the schema is left local: each is distributed or a reference table."""
        public = {r["relname"] for r in await con.fetch(PUBLIC_TABLES)}
        placed = {r["name"] for r in await con.fetch(TABLES)}
        assert public == placed
        assert placed == set(distribution_plan.DISTRIBUTED_TABLES) | set(
            distribution_plan.REFERENCE_TABLES
        )

    async def test_reference_tables_are_on_every_worker(
        self, con: asyncpg.Connection, cluster: CitusCluster
    ) -> None:
        """The global tables are reference tables with a copy on each node."""
        tables = {r["name"]: r for r in await con.fetch(TABLES)}
        for name in distribution_plan.REFERENCE_TABLES:
            assert tables[name]["kind"] == "reference", name
            assert await con.fetchval(SHARD_NODES, name) == len(cluster.nodes), name

    async def test_tenant_shards_are_on_both_workers(self, con: asyncpg.Connection) -> None:
        """The shards of sessions are spread over the two workers."""
        assert await con.fetchval(SHARD_NODES, "sessions") == 2

    async def test_foreign_keys_are_as_before(
        self, con: asyncpg.Connection, distributed: Distributed
    ) -> None:
        """The tenant keys dropped for the conversion are back, exactly as they were."""
        assert await _keys(con) == distributed.keys_before
        assert any(name == "sessions" for name, _, _ in distributed.keys_before)

    async def test_functions_are_on_the_workers(
        self, con: asyncpg.Connection, cluster: CitusCluster, distributed: Distributed
    ) -> None:
        """Each shared function exists on every worker, co-located by its space argument."""
        found = {r["signature"]: r for r in await con.fetch(FUNCTIONS)}
        group = await con.fetchval(
            "SELECT colocation_id FROM citus_tables WHERE table_name = 'sessions'::regclass"
        )
        for signature, argument in distribution_plan.FUNCTIONS.items():
            row = found[_signature(signature)]
            if argument is None:
                assert row["argument"] is None, signature
            else:
                assert (row["argument"], row["colocationid"]) == (0, group), signature
        name = database_of(distributed.dsn)
        for worker in cluster.workers:
            there = await asyncpg.connect(worker.dsn(name))
            try:
                signatures = {
                    r["signature"]
                    for r in await there.fetch(
                        "SELECT oid::regprocedure::text AS signature FROM pg_proc "
                        "WHERE pronamespace = 'public'::regnamespace"
                    )
                }
            finally:
                await there.close()
            assert signatures == {_signature(s) for s in distribution_plan.FUNCTIONS}, worker.name

    async def test_second_run_changes_nothing(
        self, con: asyncpg.Connection, distributed: Distributed
    ) -> None:
        """distribute on a distributed schema takes no step and leaves the catalog as it was."""
        assert distributed.steps
        before = await _snapshot(con)
        assert await distribute(con, shard_count=SHARDS) == []
        assert await _snapshot(con) == before
        assert await is_distributed(con)

    async def test_the_services_read_the_catalogue_unfiltered_and_uncompiled(
        self, con: asyncpg.Connection, distributed: Distributed
    ) -> None:
        """The database's defaults turn JIT off and list the services' application_name in
        citus.show_shards_for_app_name_prefixes: a service's connection (stello.db.pool's pool)
        has both, and Citus adds no shard filter to its queries of pg_class."""
        defaults = set(await con.fetchval(DATABASE_DEFAULTS))
        assert {"jit=off", "citus.show_shards_for_app_name_prefixes=stello"} <= defaults
        async with create_pool(distributed.dsn) as pool, pool.acquire() as service:
            assert await service.fetchval("SHOW application_name") == "stello"
            assert await service.fetchval("SHOW jit") == "off"
            plan = await service.fetch("EXPLAIN SELECT oid FROM pg_class WHERE relname = 'x'")
        assert not any("relation_is_a_known_shard" in row[0] for row in plan)
        # Anyone else still reads the catalogue as Citus shows it by default.
        filtered = await con.fetch("EXPLAIN SELECT oid FROM pg_class WHERE relname = 'x'")
        assert any("relation_is_a_known_shard" in row[0] for row in filtered)

    async def test_get_trees_settings_reach_the_worker(
        self, con: asyncpg.Connection, distributed: Distributed
    ) -> None:
        """GetTree's SET LOCALs (tree_settings) hold on the worker its walk runs on, not only
        on the coordinator: a statement routed to a space's shard reads them there."""
        space = await _seed_space(con, records=0)
        session = await con.fetchval("SELECT id FROM sessions WHERE space_id = $1", space)
        on_worker = (
            "SELECT current_setting('enable_sort') AS sort,"
            " current_setting('statement_timeout') AS timeout"
            " FROM sessions WHERE space_id = $1 AND id = $2"
        )
        async with create_pool(distributed.dsn) as pool, pool.acquire() as service:
            async with service.transaction():
                await service.execute(tree_settings(4321))
                shown = await service.fetchrow(on_worker, space, session)
            assert shown is not None
            assert (shown["sort"], shown["timeout"]) == ("off", "4321ms")
            after = await service.fetchrow(on_worker, space, session)
            assert after is not None and after["sort"] == "on"  # for its transaction only

    async def test_an_operators_prefixes_are_kept(self, con: asyncpg.Connection) -> None:
        """A prefix list set by hand without the services' name gets it added, the rest kept."""
        database = await con.fetchval("SELECT current_database()")
        setting = f'ALTER DATABASE "{database}" SET citus.show_shards_for_app_name_prefixes'
        await con.execute(f"{setting} = 'psql'")
        try:
            assert await distribute(con, shard_count=SHARDS) == [f"{setting} = 'psql,stello'"]
            assert "citus.show_shards_for_app_name_prefixes=psql,stello" in await con.fetchval(
                DATABASE_DEFAULTS
            )
            assert await distribute(con, shard_count=SHARDS) == []
        finally:
            await con.execute(f"{setting} = 'stello'")

    async def test_shared_functions_run_from_shards(self, con: asyncpg.Connection) -> None:
        """A statement routed to a space's shard calls stello_release_records there, and the
        recount runs per space and for every space."""
        ids = [
            r["id"]
            for r in await con.fetch("SELECT gen_random_uuid() AS id FROM generate_series(1, 3)")
        ]
        principal, space, session = ids
        await con.execute(
            "INSERT INTO principals (id, name) VALUES ($1, $2)", principal, str(principal)
        )
        await con.execute(
            "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, 's')", space, principal
        )
        await con.execute(
            "INSERT INTO sessions (space_id, id, root_id, label) VALUES ($1, $2, $2, 'a')",
            space,
            session,
        )
        await con.execute(
            "INSERT INTO records (space_id, session_id, seq, role, content, token_estimate,"
            " token_cumulative) SELECT $1, $2, n, 'user', 'twelve chars', 0, 0"
            " FROM generate_series(1, 3) n",
            space,
            session,
        )
        await con.execute("SELECT stello_recount_tokens($1, NULL)", space)
        await con.execute("SELECT stello_recount_tokens(NULL, NULL)")
        total = await con.fetchval(
            "SELECT token_total FROM sessions WHERE space_id = $1 AND id = $2", space, session
        )
        assert total == 9
        await con.execute(
            "WITH s AS (SELECT id FROM sessions WHERE space_id = $1 AND id = $2)"
            " SELECT stello_release_records($1, (SELECT array_agg(id) FROM s), 2)",
            space,
            session,
        )
        seqs = await con.fetch(
            "SELECT seq FROM records WHERE space_id = $1 AND session_id = $2 ORDER BY seq",
            space,
            session,
        )
        assert [r["seq"] for r in seqs] == [3]


class TestRefusals:
    async def test_no_worker(self, cluster: CitusCluster) -> None:
        """A coordinator with no worker in the database is refused, and nothing changes."""
        dsn = await cluster.create_database(register_workers=False)
        con = await asyncpg.connect(dsn)
        try:
            await migrate(con)
            with pytest.raises(FailedPrecondition, match="no active worker") as refused:
                await distribute(con)
            assert refused.value.reason == "CITUS_NO_WORKER"
            assert not await is_distributed(con)
            assert await con.fetchval("SELECT count(*) FROM pg_dist_partition") == 0
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))

    async def test_schema_too_old(self, cluster: CitusCluster) -> None:
        """A database not migrated, or migrated to before 0004 (a SET NULL key, a sequence)
        or to before 0006 (whose backfill cannot run on a distributed schema: one distributed
        at 0005 could never be migrated on), is refused with what to run."""
        dsn = await cluster.create_database()
        con = await asyncpg.connect(dsn)
        try:
            for until in (None, "0002_idempotency_claim", "0005_space_events"):
                if until is not None:
                    await migrate(con, until=until)
                with pytest.raises(FailedPrecondition, match="stello migrate") as refused:
                    await distribute(con)
                assert refused.value.reason == "SCHEMA_TOO_OLD"
            assert not await is_distributed(con)
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))

    async def test_no_citus_extension(self, cluster: CitusCluster) -> None:
        """A database without the citus extension migrates as on plain PostgreSQL, and the
        distribution is refused."""
        admin = await asyncpg.connect(cluster.dsn())
        try:
            await admin.execute('CREATE DATABASE "stello_plain"')
        finally:
            await admin.close()
        con = await asyncpg.connect(cluster.dsn("stello_plain"))
        try:
            assert await migrate(con) == [m.version for m in load_migrations()]
            with pytest.raises(FailedPrecondition, match="citus extension") as refused:
                await distribute(con)
            assert refused.value.reason == "CITUS_MISSING"
            assert not await is_distributed(con)
        finally:
            await con.close()
            await cluster.drop_database("stello_plain")


# A space's rows in each tenant table the seed writes, as the coordinator answers them.
SPACE_ROWS = """
SELECT (SELECT count(*) FROM sessions WHERE space_id = $1) AS sessions,
       (SELECT count(*) FROM records WHERE space_id = $1) AS records,
       (SELECT count(*) FROM session_slots WHERE space_id = $1) AS slots
"""

# The workers holding the space's shard of each tenant table that has one.
SPACE_NODES = """
SELECT DISTINCT p.nodeport
FROM unnest($2::text[]) AS t (name)
JOIN pg_dist_shard_placement p
  ON p.shardid = get_shard_id_for_distribution_column(t.name::regclass, $1::uuid)
"""

# Whether the space's shard of each named table holds its hash value only (shards of its own).
OWN_SHARDS = """
SELECT bool_and(s.shardminvalue = s.shardmaxvalue)
FROM unnest($2::text[]) AS t (name)
JOIN pg_dist_shard s
  ON s.shardid = get_shard_id_for_distribution_column(t.name::regclass, $1::uuid)
"""


async def _seed_space(con: asyncpg.Connection, records: int = 3) -> uuid.UUID:
    """A space with a session, its records and a slot row, written through the coordinator."""
    principal, space, session = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await con.execute(
        "INSERT INTO principals (id, name) VALUES ($1, $2)", principal, str(principal)
    )
    await con.execute(
        "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, 's')", space, principal
    )
    await con.execute(
        "INSERT INTO sessions (space_id, id, root_id, label) VALUES ($1, $2, $2, 'a')",
        space,
        session,
    )
    await con.execute(
        "INSERT INTO records (space_id, session_id, seq, role, content, token_estimate,"
        " token_cumulative) SELECT $1, $2, n, 'user', 'twelve chars', 0, 0"
        " FROM generate_series(1, $3::int) n",
        space,
        session,
        records,
    )
    await con.execute(
        "INSERT INTO session_slots (space_id, session_id, memory) VALUES ($1, $2, 'm')",
        space,
        session,
    )
    return space


async def _rows_of(con: asyncpg.Connection, spaces: list[uuid.UUID]) -> list[tuple[int, ...]]:
    """Each space's rows in the tables the seed writes."""
    counted = [await con.fetchrow(SPACE_ROWS, space) for space in spaces]
    return [tuple(row) if row is not None else () for row in counted]


class TestPlacement:
    async def test_a_new_worker_takes_shard_groups_and_the_rows_follow(
        self, cluster: CitusCluster
    ) -> None:
        """Distributed on one worker, then a second added and the shards rebalanced online
        (logical replication): shards are on both workers, each space's rows of every table
        stay together on one, and every row is still there."""
        dsn = await cluster.create_database(register_workers=False)
        con = await asyncpg.connect(dsn)
        try:
            await con.execute("SELECT citus_add_node('127.0.0.1', $1)", cluster.workers[0].port)
            await migrate(con)
            await distribute(con, shard_count=SHARDS)
            spaces = [await _seed_space(con, records=n + 1) for n in range(8)]
            before = await _rows_of(con, spaces)
            await con.execute("SELECT citus_add_node('127.0.0.1', $1)", cluster.workers[1].port)
            await con.execute("SELECT rebalance_table_shards(shard_transfer_mode => 'auto')")
            assert await con.fetchval(SHARD_NODES, "sessions") == 2
            assert await _rows_of(con, spaces) == before
            tables = list(distribution_plan.DISTRIBUTED_TABLES)
            for space in spaces:
                assert len(await con.fetch(SPACE_NODES, space, tables)) == 1, space
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))

    async def test_a_space_gets_a_shard_of_its_own(self, cluster: CitusCluster) -> None:
        """isolate_tenant_to_new_shard with CASCADE gives one space a shard of its own in every
        co-located table; its rows and the other spaces' are all still there, together."""
        dsn = await cluster.create_database()
        con = await asyncpg.connect(dsn)
        try:
            await migrate(con)
            await distribute(con, shard_count=SHARDS)
            spaces = [await _seed_space(con, records=n + 1) for n in range(6)]
            before = await _rows_of(con, spaces)
            big = spaces[0]
            tables = list(distribution_plan.DISTRIBUTED_TABLES)
            assert not await con.fetchval(OWN_SHARDS, big, tables)
            await con.fetchval(
                "SELECT isolate_tenant_to_new_shard('sessions', $1::uuid, 'CASCADE',"
                " shard_transfer_mode => 'block_writes')",
                big,
            )
            assert await con.fetchval(OWN_SHARDS, big, tables)
            assert await _rows_of(con, spaces) == before
            for space in spaces:
                assert len(await con.fetch(SPACE_NODES, space, tables)) == 1, space
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))


class TestLaterMigrations:
    @pytest.mark.parametrize(
        "distributed_at",
        [
            "0006_bounded_turns",
            "0008_fork_guard",
            "0009_lineage",
            # 0036 creates a tenant table (idempotency_key_entries) on a distributed schema.
            "0035_search_tags",
        ],
    )
    async def test_migrate_distribute_then_the_rest(
        self, cluster: CitusCluster, distributed: Distributed, distributed_at: str
    ) -> None:
        """Migrations later than the distribution apply on the distributed schema: the tables
        they create are distributed at once, and the result is the schema distributed at the end."""
        dsn = await cluster.create_database()
        con = await asyncpg.connect(dsn)
        try:
            await migrate(con, until=distributed_at)
            assert await distribute(con, shard_count=SHARDS)
            versions = [m.version for m in load_migrations()]
            later = versions[versions.index(distributed_at) + 1 :]
            assert await migrate(con) == later
            tables = {r["name"]: r["kind"] for r in await con.fetch(TABLES)}
            public = {r["relname"] for r in await con.fetch(PUBLIC_TABLES)}
            assert {tables.get(t) for t in public & set(distribution_plan.DISTRIBUTED_TABLES)} == {
                "distributed"
            }
            await distribute(con, shard_count=SHARDS)
            assert await distribute(con, shard_count=SHARDS) == []
            reference = await asyncpg.connect(distributed.dsn)
            try:
                assert await _snapshot(con) == await _snapshot(reference)
            finally:
                await reference.close()
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))

    async def test_0035_replaces_the_search_functions_on_the_workers(
        self, cluster: CitusCluster
    ) -> None:
        """Migration 0035 on a distributed schema: every worker runs the new
        `stello_search_vector`, and the backfill's batches, each routed to the space's
        worker (multi-shard statements refused but its look for work), make a record
        written before it found by its tag word."""
        dsn = await cluster.create_database()
        con = await asyncpg.connect(dsn)
        try:
            await migrate(con, until="0034_router_appends")
            assert await distribute(con, shard_count=SHARDS)
            space = await _old_tagged_record(con)
            assert (await migrate(con))[0] == "0035_search_tags"
            answers = await con.fetch(
                "SELECT success, result FROM run_command_on_workers("
                "$$SELECT stello_search_vector('<thinking>x</thinking>')::text$$)"
            )
            assert [(a["success"], "think" in a["result"]) for a in answers] == [(True, True)] * 2
            assert not await con.fetchval(TAGGED, space)
            async with asyncpg.create_pool(
                dsn, min_size=1, max_size=1, server_settings=ROUTER_ONLY
            ) as pool:
                assert await SearchBackfill(Database(pool), 10, 3600).run_once() == 1
            assert await con.fetchval(TAGGED, space)
        finally:
            await con.close()
            await cluster.drop_database(database_of(dsn))


TAGGED = """
SELECT count(*) FROM records
WHERE space_id = $1 AND search_vector @@ to_tsquery('english', 'thinking')
"""


async def _old_tagged_record(con: asyncpg.Connection) -> uuid.UUID:
    """A space with a session and a record `<thinking>old</thinking>`; the space."""
    principal, space, session = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await con.execute("INSERT INTO principals (id, name) VALUES ($1, 'old')", principal)
    await con.execute(
        "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, 'old')", space, principal
    )
    await con.execute(
        "INSERT INTO sessions (space_id, id, root_id, sibling_index, label) "
        "VALUES ($1, $2, $2, 0, 'old')",
        space,
        session,
    )
    await con.execute(
        "INSERT INTO records (space_id, session_id, seq, role, content, token_estimate, "
        "token_cumulative) "
        "VALUES ($1, $2, 1, 'user', '<thinking>old</thinking>', 1, 1)",
        space,
        session,
    )
    return space


async def _until_waiting(con: asyncpg.Connection) -> None:
    """Until another backend of the database waits for a lock."""
    for _ in range(1000):
        waiting = await con.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if waiting:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the distribution never waited for the write's lock")


def _stello(*argv: str) -> subprocess.CompletedProcess[str]:
    """The `stello` command (python -m stello_cli), its output kept (without the tests'
    asyncio debug mode, whose slow-callback lines would join its stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONASYNCIODEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "stello_cli", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


class TestCommand:
    async def test_migrate_distribute_then_again(
        self, cluster: CitusCluster, distributed: Distributed
    ) -> None:
        """`stello migrate --distribute` migrates and distributes a fresh coordinator database as
        distribute does; run again it changes nothing and says so."""
        dsn = await cluster.create_database()
        try:
            first = _stello(
                "migrate", "--distribute", "--shard-count", str(SHARDS), "--database-url", dsn
            )
            assert first.returncode == 0, first.stderr
            lines = first.stdout.splitlines()
            assert lines[0].startswith("applied: 0001_init")
            assert lines[1] == "distributed: "
            assert "  create_distributed_table('sessions', 'space_id')" in lines
            con = await asyncpg.connect(dsn)
            reference = await asyncpg.connect(distributed.dsn)
            try:
                assert await _snapshot(con) == await _snapshot(reference)
            finally:
                await con.close()
                await reference.close()
            again = _stello("migrate", "--distribute", "--database-url", dsn)
            assert again.returncode == 0, again.stderr
            assert again.stdout.splitlines() == [
                "applied: nothing (up to date)",
                "distributed: nothing (already as planned)",
            ]
            other = _stello("migrate", "--distribute", "--shard-count", "8", "--database-url", dsn)
            assert other.stdout.splitlines()[-1].startswith(
                "--shard-count 8: not applied, the shard count stays as it was set"
            )
        finally:
            await cluster.drop_database(database_of(dsn))

    async def test_plain_migrate_sets_the_session_defaults(self, cluster: CitusCluster) -> None:
        """Plain `stello migrate` on a coordinator not distributed yet sets the database's
        session defaults the services need (explore5 F2: without them a cold start of the
        services missed the gateway's deadlines, each new connection's type introspection
        taking ~350 ms), says so, and says nothing of them the next time."""
        dsn = await cluster.create_database()
        try:
            first = _stello("migrate", "--database-url", dsn)
            assert first.returncode == 0, first.stderr
            lines = first.stdout.splitlines()
            assert lines[0].startswith("applied: 0001_init")
            assert lines[1] == "session defaults (the citus extension is installed):"
            assert any("citus.show_shards_for_app_name_prefixes = 'stello'" in x for x in lines)
            con = await asyncpg.connect(dsn)
            try:
                defaults = set(await con.fetchval(DATABASE_DEFAULTS))
                assert not await is_distributed(con)
            finally:
                await con.close()
            assert {"jit=off", "citus.show_shards_for_app_name_prefixes=stello"} <= defaults
            again = _stello("migrate", "--database-url", dsn)
            assert again.stdout.splitlines() == ["applied: nothing (up to date)"]
        finally:
            await cluster.drop_database(database_of(dsn))

    async def test_a_deadlock_with_a_write_is_tried_again(
        self, cluster: CitusCluster, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A distribution that deadlocks with a service's write (the write holds the last
        table the distribution converts and then waits for one it converted: explore5 F3,
        a raw "deadlock detected" that changed nothing) is tried again and distributes."""
        dsn = await cluster.create_database()
        con = await asyncpg.connect(dsn)
        writer = await asyncpg.connect(dsn)
        try:
            await migrate(con)
            write = writer.transaction()
            await write.start()
            last = distribution_plan.DISTRIBUTED_TABLES[-1]
            await writer.execute(f"LOCK TABLE {last} IN ROW EXCLUSIVE MODE")
            job = asyncio.ensure_future(
                distribution_runs.distribute_in_use(con, shard_count=SHARDS)
            )
            await _until_waiting(writer)
            with contextlib.suppress(asyncpg.DeadlockDetectedError):
                await writer.execute("LOCK TABLE sessions IN ROW EXCLUSIVE MODE")
            await write.rollback()
            steps = await asyncio.wait_for(job, 120)
            assert "create_distributed_table('sessions', 'space_id')" in steps
            assert await is_distributed(con)
            assert "distribution: deadlocked with a write (try 1); nothing changed" in [
                r.getMessage() for r in caplog.records
            ]
        finally:
            await writer.close()
            await con.close()
            await cluster.drop_database(database_of(dsn))

    @pytest.mark.parametrize("refusal", ["no worker", "no citus extension"])
    async def test_refused_with_nothing_changed(self, cluster: CitusCluster, refusal: str) -> None:
        """Without a worker, or without the citus extension, `stello migrate --distribute` exits 1
        with one line saying what to do, and leaves the database unmigrated."""
        if refusal == "no worker":
            dsn = await cluster.create_database(register_workers=False)
        else:
            dsn = cluster.dsn("stello_plain_command")
            admin = await asyncpg.connect(cluster.dsn())
            try:
                await admin.execute('CREATE DATABASE "stello_plain_command"')
            finally:
                await admin.close()
        try:
            done = _stello("migrate", "--distribute", "--database-url", dsn)
            assert done.returncode == 1
            assert done.stdout == ""
            lines = done.stderr.splitlines()
            assert len(lines) == 1, done.stderr
            expected = "no active worker" if refusal == "no worker" else "citus extension"
            assert expected in lines[0] and "cannot distribute" in lines[0], lines[0]
            con = await asyncpg.connect(dsn)
            try:
                assert await con.fetchval("SELECT to_regclass('schema_migrations')") is None
            finally:
                await con.close()
        finally:
            await cluster.drop_database(database_of(dsn))
