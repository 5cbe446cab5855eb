"""A read-only dump of everything a space owns, to prove a failed call changed nothing.

Every table with a ``space_id`` column is found in the catalog (so a table a
later migration adds is covered without touching this file) and read whole for
the space, in a stable order.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

TABLES = """
SELECT c.table_name
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND c.column_name = 'space_id'
  AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name
"""

SpaceRows = dict[str, list[tuple[Any, ...]]]


async def space_rows(pool: asyncpg.Pool, space_id: uuid.UUID) -> SpaceRows:
    """Every row of every per-space table for `space_id`, by table, sorted."""
    async with pool.acquire() as con, con.transaction(readonly=True):
        tables = [r["table_name"] for r in await con.fetch(TABLES)]
        dump: SpaceRows = {}
        for table in tables:
            # Table names come from the catalog, never from a caller.
            rows = await con.fetch(f'SELECT * FROM "{table}" WHERE space_id = $1', space_id)
            dump[table] = sorted((tuple(r.values()) for r in rows), key=repr)
    return dump
