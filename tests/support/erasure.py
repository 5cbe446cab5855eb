"""Where a text is still stored: every table of the schema searched for it, column by column.

The tables and columns come from the catalogue, so a table added later is searched
too without touching the tests. Text, JSON and array columns are searched as their
text form; bytea columns (remembered replies: encoded protobuf or JSON) for the
text's UTF-8 bytes. Generated columns (a record's search vector) are left out: each is
computed from its row's other columns, which are searched. What erasure tests use to
prove that nothing of a deleted session is left anywhere (DESIGN §4.8).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import asyncpg

from stello.db.maintenance import across_spaces

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

Con: TypeAlias = "asyncpg.Connection | PoolConnectionProxy[Any]"

COLUMNS = """
SELECT c.relname AS table_name, a.attname AS column_name, t.typname AS type_name
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
  AND a.attgenerated = ''
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
    if space_id is None:  # across spaces: on Citus a multi-shard read, allowed by name
        async with con.transaction():
            await across_spaces(cast(asyncpg.Connection, con))
            return await _holding(con, texts, None)
    return await _holding(con, texts, space_id)


async def _holding(con: Con, texts: set[str], space_id: uuid.UUID | None) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    ordered = sorted(texts)
    catalogue = await con.fetch(COLUMNS)
    spaced = {r["table_name"] for r in catalogue if r["column_name"] == "space_id"}
    for table, columns in searched_columns(catalogue).items():
        if not columns:
            continue
        scoped = space_id is not None and table in spaced
        scope = "t.space_id = $1" if scoped else "true"
        args = [space_id] if scoped else []
        texts_in = [name for name, kind in columns if kind != "bytea"]
        bytes_in = [name for name, kind in columns if kind == "bytea"]
        held: set[str] = set()
        if texts_in:
            held |= await _held_in_text(con, table, texts_in, scope, ordered, args)
        if bytes_in:
            held |= await _held_in_bytes(con, table, bytes_in, scope, ordered, args)
        if held:
            found[table] = held
    return found


def _like(text: str) -> str:
    """A LIKE pattern matching any value that contains `text`."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def _held_in_text(
    con: Con, table: str, columns: list[str], scope: str, texts: list[str], args: list[Any]
) -> set[str]:
    """The `texts` some row of `table` holds in its text-like `columns`: each row's columns
    are cast and joined once, and matched against every text (`LIKE ANY`); only the rows
    that match are then asked which texts they hold."""
    blob = "concat_ws(chr(1), " + ", ".join(f"t.{_quote(c)}::text" for c in columns) + ")"
    rows = await con.fetch(
        f"WITH hit AS MATERIALIZED (SELECT b.blob FROM (SELECT {blob} AS blob FROM "
        f"{_quote(table)} t WHERE {scope} OFFSET 0) b WHERE b.blob LIKE ANY(${len(args) + 1})) "
        f"SELECT DISTINCT m.text FROM hit, unnest(${len(args) + 2}::text[]) AS m (text) "
        f"WHERE strpos(hit.blob, m.text) > 0",
        *args, [_like(t) for t in texts], texts,
    )  # fmt: skip
    return {r["text"] for r in rows}


async def _held_in_bytes(
    con: Con, table: str, columns: list[str], scope: str, texts: list[str], args: list[Any]
) -> set[str]:
    """The `texts` some row of `table` holds, as UTF-8 bytes, in its bytea `columns`."""
    tests = " OR ".join(
        f"position(convert_to(m.text, 'UTF8') IN t.{_quote(c)}) > 0" for c in columns
    )
    rows = await con.fetch(
        f"SELECT DISTINCT m.text FROM {_quote(table)} t, "
        f"unnest(${len(args) + 1}::text[]) AS m (text) WHERE {scope} AND ({tests})",
        *args, texts,
    )  # fmt: skip
    return {r["text"] for r in rows}
