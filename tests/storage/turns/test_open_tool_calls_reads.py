"""Whether a session waits for client tool results reads its last tool group, not its
history: tuples of `records` counted in PostgreSQL's statistics (`RowReads`), not time.

The check (`TurnRepository.open_tool_calls`, asked when a queued Send reaches a free
session) once ran "no tool record after the call answers it" as a NOT EXISTS, which the
planner made an anti join whose inner side read every tool record of the session.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.stored.events import Outbox
from storage_service.turns.repository import TurnRepository
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.history import RowReads

pytestmark = pytest.mark.sql

# $3 answered tool groups (a user record, an assistant's call g<i>, its tool result),
# then an assistant calling c1 and c2 with only c1 answered: the session waits.
GROUPS = """
WITH rows (seq, role, tool_calls, tool_call_id) AS (
    SELECT i, CASE i % 3 WHEN 1 THEN 'user' WHEN 2 THEN 'assistant' ELSE 'tool' END,
           CASE WHEN i % 3 = 2 THEN jsonb_build_array(jsonb_build_object('id', 'g' || i)) END,
           CASE WHEN i % 3 = 0 THEN 'g' || (i - 1) END
    FROM generate_series(1, 3 * $3) i
  UNION ALL
    VALUES (3 * $3 + 1, 'assistant', '[{"id": "c1"}, {"id": "c2"}]'::jsonb, NULL),
           (3 * $3 + 2, 'tool', NULL, 'c1')
), added AS (
    INSERT INTO records (space_id, session_id, seq, role, content, tool_calls, tool_call_id,
                         token_estimate, token_cumulative)
    SELECT $1, $2, seq, role, 'x', tool_calls, tool_call_id, 1, seq FROM rows
)
UPDATE sessions SET last_seq = 3 * $3 + 2 WHERE space_id = $1 AND id = $2
"""


async def seeded(
    pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession, groups: int
) -> uuid.UUID:
    """A session of `groups` answered tool groups and an open one, the table analyzed."""
    sid = await make_session()
    async with pool.acquire() as con:
        await con.execute(GROUPS, space.id, sid, groups)
        await con.execute("ANALYZE records")
    return sid


async def checked(dsn: str, space: TestSpace, sid: uuid.UUID) -> int:
    """Tuples of `records` read by one check of `sid`, which must find the open call."""
    counter = await asyncpg.connect(dsn)
    try:
        reads = RowReads(counter, "records")
        before = await reads.count()
        con = await asyncpg.connect(dsn)
        try:
            waits = await TurnRepository(con, Outbox()).open_tool_calls(space.id, sid)
        finally:
            await con.close()
        read = await reads.count() - before
    finally:
        await counter.close()
    assert waits
    return read


@pytest.mark.plain_postgres(
    "counts the rows read in the statistics of the database it connects to; on Citus the "
    "coordinator reads none, the workers' shards do"
)
async def test_the_check_reads_the_same_after_10000_groups(
    pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession, direct_database_url: str
) -> None:
    """The check of a session of 10,000 answered tool groups (30,002 records) reads about as
    many tuples of `records` as that of a session of 2: the newest call, then the tool
    records after it (one range of the key), never the session's other tool records."""
    small = await seeded(pool, space, make_session, 2)
    big = await seeded(pool, space, make_session, 10_000)
    few = await checked(direct_database_url, space, small)
    many = await checked(direct_database_url, space, big)
    assert many <= few + 5, f"{many} tuples for 10,000 groups, {few} for 2"
    assert few <= 20, few
