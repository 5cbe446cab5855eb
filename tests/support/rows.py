"""A read-only dump of everything a space owns, to prove a failed call changed nothing.

Every table with a ``space_id`` column is found in the catalog (so a table a
later migration adds is covered without touching this file) and read whole for
the space, in a stable order, in one statement (the fuzz tests dump the space
around every call).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from stello.db.maintenance import across_spaces

TABLES = """
SELECT c.table_name
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND c.column_name = 'space_id'
  AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name
"""

SpaceRows = dict[str, list[str]]
_DUMPS: dict[int, str] = {}


async def _dump_query(con: Any) -> str:
    """One statement reading every per-space table as JSON rows (table names from the
    catalog, never from a caller)."""
    tables = [r["table_name"] for r in await con.fetch(TABLES)]
    parts = ", ".join(
        f"'{t}', (SELECT coalesce(json_agg(row_to_json(x)::text ORDER BY row_to_json(x)::text), "
        f"'[]') FROM \"{t}\" x WHERE x.space_id = $1)"
        for t in tables
    )
    return f"SELECT json_build_object({parts})::text"


async def space_rows(pool: asyncpg.Pool, space_id: uuid.UUID) -> SpaceRows:
    """Every row of every per-space table for `space_id`, by table, in a stable order.

    A test's read, not a request's: on Citus its subqueries (one per table, reference
    tables among them) are planned recursively, which the Citus pass allows only so."""
    async with pool.acquire() as con, con.transaction(readonly=True):
        await across_spaces(con)  # type: ignore[arg-type]
        query = _DUMPS.get(id(pool))
        if query is None:
            query = _DUMPS[id(pool)] = await _dump_query(con)
        text = await con.fetchval(query, space_id)
    dump: dict[str, list[str]] = json.loads(text)
    return dump
