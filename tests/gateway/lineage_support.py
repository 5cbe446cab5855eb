"""Row checks for fork by reference: how many record rows a space holds, and which deleted
session ids any row still carries (DESIGN §4.4)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

# Every uuid column of every per-space table but the event log's (events carry ids
# only, by design: DESIGN §4.6), from the catalog, so later tables are covered too.
UUID_COLUMNS = """
SELECT c.table_name, c.column_name, c.data_type
FROM information_schema.columns c
JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
  AND c.column_name <> 'space_id' AND c.udt_name IN ('uuid', '_uuid')
  AND c.table_name <> 'space_events'
  AND EXISTS (SELECT FROM information_schema.columns s
              WHERE s.table_schema = c.table_schema AND s.table_name = c.table_name
                AND s.column_name = 'space_id')
ORDER BY c.table_name, c.column_name
"""


async def records_rows(con: Any, space_id: uuid.UUID) -> int:
    """How many rows the records table holds for the space."""
    count: int = await con.fetchval("SELECT count(*) FROM records WHERE space_id = $1", space_id)
    return count


async def ids_left(con: Any, space_id: uuid.UUID, ids: Iterable[str | uuid.UUID]) -> list[str]:
    """`table.column` of every row of the space still carrying one of `ids`."""
    wanted = [uuid.UUID(str(i)) for i in ids]
    if not wanted:
        return []
    found: list[str] = []
    for column in await con.fetch(UUID_COLUMNS):
        table, name = column["table_name"], column["column_name"]
        test = (
            f'"{name}" && $2::uuid[]'
            if column["data_type"] == "ARRAY"
            else f'"{name}" = ANY($2::uuid[])'
        )
        hits = await con.fetchval(
            f'SELECT count(*) FROM "{table}" WHERE space_id = $1 AND {test}', space_id, wanted
        )
        if hits:
            found.append(f"{table}.{name}")
    return found
