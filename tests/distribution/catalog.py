"""Citus readiness read from the live catalog: each check returns its violations, [] when none.

The rules are docs/scaling.md's ("The rules the schema keeps"): tenant tables
are distributed by space_id, so their keys and indexes lead with it and their
foreign keys carry it; nothing orders rows across tenants.
"""

from __future__ import annotations

import asyncpg

from tests.distribution.plan import CitusPlan

# Indexes that serve cross-space maintenance, allowed without space_id in front
# (non-unique: Citus keeps one per shard; docs/scaling.md "Maintenance paths").
INDEX_EXCEPTIONS = {
    "sessions_sweep": "the sweeper finds due provisional sessions of every space",
    "idempotency_keys_created": "the purge drops request_id keys past 24 h in every space",
    "background_jobs_orphaned": "the runner's takeover finds jobs left without a gateway",
}

TABLES = """
SELECT c.relname
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY 1
"""

# Every index, the key and unique constraints' included, with its first column.
INDEXES = """
SELECT i.indexrelid::regclass::text AS name, t.relname AS table_name,
       i.indisunique AS is_unique, a.attname AS first_column
FROM pg_index i
JOIN pg_class t ON t.oid = i.indrelid
LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
WHERE t.relnamespace = 'public'::regnamespace
ORDER BY 1
"""

FOREIGN_KEYS = """
SELECT con.conname, t.relname AS table_name, r.relname AS referenced, con.confdeltype::text,
       con.confupdtype::text,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k (num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num
             ORDER BY k.ord) AS columns,
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k (num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num
             ORDER BY k.ord) AS referenced_columns
FROM pg_constraint con
JOIN pg_class t ON t.oid = con.conrelid
JOIN pg_class r ON r.oid = con.confrelid
WHERE con.contype = 'f' AND t.relnamespace = 'public'::regnamespace
ORDER BY 1
"""

SEQUENCES = """
SELECT c.relname AS name FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'S'
UNION ALL
SELECT table_name || '.' || column_name FROM information_schema.columns
WHERE table_schema = 'public'
  AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')
ORDER BY 1
"""

SPACE_ID_COLUMNS = """
SELECT table_name FROM information_schema.columns
WHERE table_schema = 'public' AND column_name = 'space_id' AND is_nullable = 'NO'
"""

# pg_constraint.confdeltype / confupdtype: n = SET NULL, d = SET DEFAULT.
_SETTING_ACTIONS = {"n": "SET NULL", "d": "SET DEFAULT"}


async def unplanned_tables(con: asyncpg.Connection, plan: CitusPlan) -> list[str]:
    """Tables in neither list of the plan, and listed tables that do not exist."""
    tables = {r["relname"] for r in await con.fetch(TABLES)}
    listed = plan.distributed | plan.reference
    missing = [f"{t}: in docs/scaling.md but not in the schema" for t in sorted(listed - tables)]
    return [
        f"{t}: neither distributed nor a reference table in docs/scaling.md"
        for t in sorted(tables - listed)
    ] + missing


async def tenant_tables_without_space_id(con: asyncpg.Connection, plan: CitusPlan) -> list[str]:
    """Distributed tables with no NOT NULL space_id column, or not co-located with sessions."""
    having = {r["table_name"] for r in await con.fetch(SPACE_ID_COLUMNS)}
    gaps = [f"{t}: no NOT NULL space_id" for t in sorted(plan.distributed - having)]
    gaps += [
        f"{t}: not co-located with sessions"
        for t in sorted(plan.distributed - {"sessions"})
        if plan.colocated_with.get(t) != "sessions"
    ]
    return gaps


async def indexes_not_led_by_space_id(con: asyncpg.Connection, plan: CitusPlan) -> list[str]:
    """Indexes of tenant tables whose first column is not space_id (exceptions aside)."""
    return [
        f"{r['name']} on {r['table_name']} starts with {r['first_column'] or 'an expression'}"
        for r in await con.fetch(INDEXES)
        if r["table_name"] in plan.distributed
        and r["first_column"] != "space_id"
        and not (r["name"] in INDEX_EXCEPTIONS and not r["is_unique"])
    ]


async def foreign_keys_across_tenants(con: asyncpg.Connection, plan: CitusPlan) -> list[str]:
    """Foreign keys Citus could not keep on one shard."""
    gaps: list[str] = []
    for r in await con.fetch(FOREIGN_KEYS):
        name, source, target = r["conname"], r["table_name"], r["referenced"]
        if source in plan.reference and target in plan.distributed:
            gaps.append(f"{name}: reference table {source} references tenant table {target}")
        if source not in plan.distributed or target not in plan.distributed:
            continue
        columns, referenced = list(r["columns"]), list(r["referenced_columns"])
        if "space_id" not in columns or len(columns) < 2:
            gaps.append(f"{name}: not composite with space_id ({', '.join(columns)})")
        elif referenced[columns.index("space_id")] != "space_id":
            gaps.append(f"{name}: space_id does not reference {target}.space_id")
        for action in (r["confdeltype"], r["confupdtype"]):
            if action in _SETTING_ACTIONS:
                gaps.append(f"{name}: {_SETTING_ACTIONS[action]} on a key holding space_id")
    return gaps


async def sequences(con: asyncpg.Connection) -> list[str]:
    """Sequences, identity and serial columns: one counter for every tenant orders across them."""
    return [r["name"] for r in await con.fetch(SEQUENCES)]


async def missing_exceptions(con: asyncpg.Connection) -> list[str]:
    """Listed index exceptions that no longer exist (the list must stay true)."""
    names = {r["name"] for r in await con.fetch(INDEXES)}
    return sorted(set(INDEX_EXCEPTIONS) - names)


async def every_violation(con: asyncpg.Connection, plan: CitusPlan) -> list[str]:
    """All the checks above, in one list."""
    return [
        *await unplanned_tables(con, plan),
        *await tenant_tables_without_space_id(con, plan),
        *await indexes_not_led_by_space_id(con, plan),
        *await foreign_keys_across_tenants(con, plan),
        *await sequences(con),
        *(f"index exception {n} does not exist" for n in await missing_exceptions(con)),
    ]
