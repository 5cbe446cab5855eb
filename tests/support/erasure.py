"""Where a text is still stored: every table of the schema searched for it, column by column.

The tables and columns come from the catalogue, so a table added later is searched
too without touching the tests. Text, JSON and array columns are searched as their
text form; bytea columns (remembered replies: encoded protobuf or JSON) for the
text's UTF-8 bytes. What erasure tests use to prove that nothing of a deleted
session is left anywhere (DESIGN §4.8).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

Con: TypeAlias = "asyncpg.Connection | PoolConnectionProxy[Any]"

COLUMNS = """
SELECT c.relname AS table_name, a.attname AS column_name, t.typname AS type_name
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum
"""

# Types whose text form cannot hold a chosen text (ids, numbers, times, flags).
_NEVER_TEXT = {
    "uuid",
    "int2",
    "int4",
    "int8",
    "float4",
    "float8",
    "numeric",
    "bool",
    "timestamptz",
    "timestamp",
    "_uuid",
    "_int8",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def searched_columns(catalogue: list[asyncpg.Record]) -> dict[str, list[tuple[str, str]]]:
    """Every public table of the catalogue's rows (`COLUMNS`) with its columns that may
    hold text, as (name, type)."""
    tables: dict[str, list[tuple[str, str]]] = {}
    for row in catalogue:
        columns = tables.setdefault(row["table_name"], [])
        if row["type_name"] not in _NEVER_TEXT:
            columns.append((row["column_name"], row["type_name"]))
    return tables


async def tables_holding(
    con: Con, texts: set[str], space_id: uuid.UUID | None = None
) -> dict[str, set[str]]:
    """For each table that still holds one of `texts` anywhere, the texts it holds.

    With `space_id`, the rows of tables keyed by space are searched in that space only
    (an index range, not the whole run's database; a text copied into another space is
    then not seen: search without it at least once, at the end).
    """
    if not texts:
        return {}
    found: dict[str, set[str]] = {}
    ordered = sorted(texts)
    catalogue = await con.fetch(COLUMNS)
    spaced = {r["table_name"] for r in catalogue if r["column_name"] == "space_id"}
    for table, columns in searched_columns(catalogue).items():
        if not columns:
            continue
        tests = [
            f"position(convert_to(m.text, 'UTF8') IN t.{_quote(name)}) > 0"
            if kind == "bytea"
            else f"strpos(t.{_quote(name)}::text, m.text) > 0"
            for name, kind in columns
        ]
        scoped = space_id is not None and table in spaced
        where = " OR ".join(tests)
        if scoped:
            where = f"t.space_id = $2 AND ({where})"
        rows = await con.fetch(
            f"SELECT DISTINCT m.text FROM {_quote(table)} t, unnest($1::text[]) AS m (text) "
            f"WHERE {where}",
            ordered,
            *([space_id] if scoped else []),
        )
        if rows:
            found[table] = {r["text"] for r in rows}
    return found
