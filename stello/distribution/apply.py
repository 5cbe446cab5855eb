"""`distribute(con)`: the schema distributed on Citus as `stello.distribution.plan` says.

`distribute(con)` applies the plan on a Citus coordinator after `stello migrate`
(`stello migrate --distribute` runs both: `stello.distribution.runs`), in one
transaction, in the order Citus accepts: the foreign keys between
tenant tables are read and dropped, the reference tables created, `sessions`
distributed, then the tables co-located with it, the keys re-added exactly as
they were, functions the conversion dropped recreated from their definitions,
and the functions distributed. Last, the database's session defaults that the
services need on Citus (`SESSION_DEFAULTS`). It is idempotent: on a distributed schema it
changes nothing and returns no step. A listed table that does not exist yet
is left out; the migration that creates it distributes it itself (its guard
checks that `sessions` is distributed).
"""

from __future__ import annotations

import logging

import asyncpg

from stello.db.migrate import CITUS_INSTALLED, LOCK_KEY
from stello.distribution.plan import (
    COLOCATE_WITH,
    DEFAULT_SHARD_COUNT,
    DISTRIBUTED_TABLES,
    DISTRIBUTION_COLUMN,
    FUNCTIONS,
    PREFIXES,
    REFERENCE_TABLES,
    SESSION_DEFAULTS,
    TABLE_FUNCTIONS,
)
from stello.errors import FailedPrecondition

log = logging.getLogger(__name__)

# This database's own defaults (any role), as `name=value` strings.
DATABASE_DEFAULTS = """
SELECT coalesce(s.setconfig, '{}') FROM pg_database d
LEFT JOIN pg_db_role_setting s ON s.setdatabase = d.oid AND s.setrole = 0
WHERE d.datname = current_database()
"""

ACTIVE_WORKERS = "SELECT count(*) FROM citus_get_active_worker_nodes()"

# What each public table is to Citus now: 'reference', 'distributed' (with its
# column and co-location group), 'local' (added to the metadata), or NULL.
TABLE_STATES = """
SELECT c.relname AS name,
       CASE WHEN p.partmethod = 'h' THEN 'distributed'
            WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 'reference'
            WHEN p.partmethod IS NOT NULL THEN 'local' END AS kind,
       CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END
           AS column_name,
       p.colocationid
FROM pg_class c
LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
"""

# Foreign keys between two tenant tables, with their exact definitions.
TENANT_FOREIGN_KEYS = """
SELECT t.relname AS table_name, r.relname AS referenced, con.conname AS name,
       pg_get_constraintdef(con.oid) AS definition
FROM pg_constraint con
JOIN pg_class t ON t.oid = con.conrelid
JOIN pg_class r ON r.oid = con.confrelid
WHERE con.contype = 'f' AND t.relnamespace = 'public'::regnamespace
  AND t.relname = ANY ($1::text[]) AND r.relname = ANY ($1::text[])
ORDER BY t.relname, con.conname
"""

# Every function of the public schema, with its definition (to recreate it).
PUBLIC_FUNCTIONS = """
SELECT p.oid::regprocedure::text AS signature, pg_get_functiondef(p.oid) AS definition
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'
"""

# How a function is distributed now: no row (only on this node), a row with
# no argument (created on every node) or with the argument's index and group.
FUNCTION_STATE = """
SELECT o.distribution_argument_index AS argument, o.colocationid
FROM pg_dist_object o
WHERE o.classid = 'pg_proc'::regclass AND o.objid = $1::regprocedure
"""

# The first version whose schema Citus can keep and migrate on: 0004 removed the last
# sequence and the SET NULL key (docs/scaling.md "The rules the schema keeps"), and 0006's
# backfill (a SQL-bodied function over every space) cannot run on a distributed schema, so a
# schema distributed at 0004 or 0005 could never be migrated on.
CITUS_READY_SINCE = "0006_bounded_turns"

SCHEMA_VERSION = """
SELECT to_regclass('public.sessions') IS NOT NULL
   AND EXISTS (SELECT FROM schema_migrations WHERE version >= $1)
"""

ARGUMENT_INDEX = """
SELECT array_position(p.proargnames, $2::text) - 1
FROM pg_proc p WHERE p.oid = $1::regprocedure
"""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def refuse_unless_coordinator(con: asyncpg.Connection) -> None:
    """A Citus coordinator with at least one active worker here, or a FailedPrecondition.

    `stello migrate --distribute` checks it before migrating, so a database
    that cannot be distributed is left as it was.
    """
    if not await con.fetchval(CITUS_INSTALLED):
        raise FailedPrecondition(
            "cannot distribute the schema: the citus extension is not installed in this "
            "database (on the coordinator: CREATE EXTENSION citus; it must be in "
            "shared_preload_libraries)",
            reason="CITUS_MISSING",
        )
    if not await con.fetchval(ACTIVE_WORKERS):
        raise FailedPrecondition(
            "cannot distribute the schema: this Citus coordinator has no active worker in "
            "this database (register each with SELECT citus_add_node('host', port), after "
            "CREATE EXTENSION citus in the same database on the worker)",
            reason="CITUS_NO_WORKER",
        )


async def _refuse_unless_ready(con: asyncpg.Connection) -> None:
    """A coordinator with an active worker and a schema Citus can keep, or a FailedPrecondition."""
    await refuse_unless_coordinator(con)
    if not await con.fetchval(
        "SELECT to_regclass('public.schema_migrations') IS NOT NULL"
    ) or not await con.fetchval(SCHEMA_VERSION, CITUS_READY_SINCE):
        raise FailedPrecondition(
            f"cannot distribute the schema: it is older than migration {CITUS_READY_SINCE} "
            "(run stello migrate first)",
            reason="SCHEMA_TOO_OLD",
        )


def _sessions_group(states: dict[str, asyncpg.Record]) -> int | None:
    """The co-location group of sessions, None while it is not distributed (refuses a bad one)."""
    for name in DISTRIBUTED_TABLES:
        state = states.get(name)
        if state is None or state["kind"] != "distributed":
            continue
        if state["column_name"] != DISTRIBUTION_COLUMN:
            raise FailedPrecondition(
                f"cannot distribute the schema: {name} is distributed by "
                f"{state['column_name']}, not {DISTRIBUTION_COLUMN} (undistribute_table('{name}') "
                "first)",
                reason="CITUS_WRONG_DISTRIBUTION",
            )
    sessions = states.get(COLOCATE_WITH)
    group = sessions["colocationid"] if sessions and sessions["kind"] == "distributed" else None
    for name in DISTRIBUTED_TABLES:
        state = states.get(name)
        if group is not None and state is not None and state["kind"] == "distributed":
            if state["colocationid"] != group:
                raise FailedPrecondition(
                    f"cannot distribute the schema: {name} is not co-located with sessions "
                    f"(SELECT update_distributed_table_colocation('{name}', "
                    "colocate_with => 'sessions'))",
                    reason="CITUS_WRONG_DISTRIBUTION",
                )
    return int(group) if group is not None else None


async def _distribute_tables(
    con: asyncpg.Connection, states: dict[str, asyncpg.Record], shard_count: int
) -> list[str]:
    """Reference and distributed tables as planned; the steps taken."""
    steps: list[str] = []
    pending = [
        name
        for name in DISTRIBUTED_TABLES
        if name in states and states[name]["kind"] != "distributed"
    ]
    references = [
        name for name in REFERENCE_TABLES if name in states and states[name]["kind"] != "reference"
    ]
    if not pending and not references:
        return steps
    # A tenant key would chain the tables into Citus local tables, which cannot
    # be co-located: the keys go first and come back once every table is placed.
    keys = [
        key
        for key in await con.fetch(TENANT_FOREIGN_KEYS, list(DISTRIBUTED_TABLES))
        if key["table_name"] in pending or key["referenced"] in pending
    ]
    for key in keys:
        await con.execute(
            f"ALTER TABLE {_quote(key['table_name'])} DROP CONSTRAINT {_quote(key['name'])}"
        )
    for name in references:
        await con.execute("SELECT create_reference_table($1::regclass)", name)
        steps.append(f"create_reference_table('{name}')")
    for name in pending:
        if name == COLOCATE_WITH:
            await con.execute(
                "SELECT create_distributed_table($1::regclass, $2, shard_count => $3)",
                name,
                DISTRIBUTION_COLUMN,
                shard_count,
            )
            steps.append(f"create_distributed_table('{name}', '{DISTRIBUTION_COLUMN}')")
        else:
            await con.execute(
                "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)",
                name,
                DISTRIBUTION_COLUMN,
                COLOCATE_WITH,
            )
            steps.append(
                f"create_distributed_table('{name}', '{DISTRIBUTION_COLUMN}', "
                f"colocate_with => '{COLOCATE_WITH}')"
            )
    for key in keys:
        await con.execute(
            f"ALTER TABLE {_quote(key['table_name'])} "
            f"ADD CONSTRAINT {_quote(key['name'])} {key['definition']}"
        )
    return steps


async def _propagate_table_functions(con: asyncpg.Connection) -> list[str]:
    """The functions of TABLE_FUNCTIONS on every node (each once)."""
    steps: list[str] = []
    for signature in TABLE_FUNCTIONS:
        if await con.fetchval("SELECT to_regprocedure($1)", signature) is None:
            continue
        if await con.fetchrow(FUNCTION_STATE, signature) is not None:
            continue
        await con.execute("SELECT create_distributed_function($1::regprocedure)", signature)
        steps.append(f"create_distributed_function('{signature}')")
    return steps


async def _distribute_functions(con: asyncpg.Connection, group: int) -> list[str]:
    """Each listed function on every node, by its space argument where it has one."""
    steps: list[str] = []
    for signature, argument in FUNCTIONS.items():
        if await con.fetchval("SELECT to_regprocedure($1)", signature) is None:
            continue  # not created yet: a later migration's CREATE FUNCTION propagates
        state = await con.fetchrow(FUNCTION_STATE, signature)
        if argument is None:
            if state is not None:
                continue
            await con.execute("SELECT create_distributed_function($1::regprocedure)", signature)
            steps.append(f"create_distributed_function('{signature}')")
            continue
        index = await con.fetchval(ARGUMENT_INDEX, signature, argument)
        if state is not None and state["argument"] == index and state["colocationid"] == group:
            continue
        await con.execute(
            "SELECT create_distributed_function($1::regprocedure, $2, colocate_with => $3)",
            signature,
            argument,
            COLOCATE_WITH,
        )
        steps.append(
            f"create_distributed_function('{signature}', '{argument}', "
            f"colocate_with => '{COLOCATE_WITH}')"
        )
    return steps


def _with_prefix(prefixes: str, prefix: str) -> str:
    """The comma-separated `prefixes` with `prefix` added, unless it (or `*`) is listed."""
    listed = [item.strip() for item in prefixes.split(",") if item.strip()]
    if prefix in listed or "*" in listed:
        return prefixes
    return ",".join([*listed, prefix])


async def _set_session_defaults(con: asyncpg.Connection) -> list[str]:
    """SESSION_DEFAULTS as this database's defaults, each set once (the prefixes an
    operator listed are kept, the services' added)."""
    current: dict[str, str] = {}
    for item in await con.fetchval(DATABASE_DEFAULTS):
        name, _, value = item.partition("=")
        current[name] = value
    database = _quote(await con.fetchval("SELECT current_database()"))
    steps: list[str] = []
    for name, wanted in SESSION_DEFAULTS.items():
        value = _with_prefix(current.get(name, ""), wanted) if name == PREFIXES else wanted
        if current.get(name) == value:
            continue
        # A literal: ALTER DATABASE takes no parameters.
        literal = "'" + value.replace("'", "''") + "'"
        step = f"ALTER DATABASE {database} SET {name} = {literal}"
        await con.execute(step)
        steps.append(step)
    return steps


async def distribute(
    con: asyncpg.Connection, *, shard_count: int = DEFAULT_SHARD_COUNT
) -> list[str]:
    """Distribute the migrated schema on the Citus coordinator of `con`; return the steps taken.

    `shard_count` is the number of shards of `sessions` (and of every table
    co-located with it); it counts only the first time. Idempotent: [] when the
    schema is already distributed as planned. Raises FailedPrecondition when the
    database has no citus extension or no active worker, or a table is
    distributed otherwise than planned. One transaction: nothing changes unless
    every step succeeds.
    """
    async with con.transaction():
        # The migrations' lock: a distribution and a migration never interleave.
        await con.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await _refuse_unless_ready(con)
        states = {r["name"]: r for r in await con.fetch(TABLE_STATES)}
        _sessions_group(states)
        functions = {r["signature"]: r["definition"] for r in await con.fetch(PUBLIC_FUNCTIONS)}
        steps = await _propagate_table_functions(con)
        steps += await _distribute_tables(con, states, shard_count)
        # Converting a table drops the SQL-bodied functions that depend on it.
        left = {r["signature"] for r in await con.fetch(PUBLIC_FUNCTIONS)}
        for signature in sorted(set(functions) - left):
            await con.execute(functions[signature])
            steps.append(f"recreated {signature}")
        states = {r["name"]: r for r in await con.fetch(TABLE_STATES)}
        group = _sessions_group(states)
        if group is not None:
            steps += await _distribute_functions(con, group)
        steps += await _set_session_defaults(con)
    for step in steps:
        log.info("distribution: %s", step)
    return steps
