"""Migration 0013 converts the segment lists forks wrote before it (issue #34): on a schema
of the release before (through 0012), a chain of 40 forks of forks each listing every
holder (0009's flattened lists: the source's segments plus one), then the migration: no
session has more than `SEGMENT_CAP` segments and every session shows the same records."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from stello.db.migrate import migrate
from storage_service.models import MAX_SEQ
from storage_service.records.lineage import SEGMENT_CAP
from storage_service.records.repository import LIST_RECORDS_OLDEST
from tests.support.database import create_test_database, drop_test_database
from tests.support.history import append_one

pytestmark = pytest.mark.sql

SESSION = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label)
VALUES ($1::uuid, $2::uuid, $3::uuid, COALESCE($3::uuid, $2::uuid),
        CASE WHEN $3::uuid IS NULL THEN 0 ELSE 1 END, $4::integer, 'old')
"""

# Migration 0009's Fork INHERIT of every record of source $3 into new session $2.
OLD_INHERIT = """
WITH source AS (
    SELECT s.last_seq, s.token_total, COALESCE(l.until_seq, 0) AS own_after
    FROM sessions s
    LEFT JOIN session_lineages l ON l.space_id = s.space_id AND l.session_id = s.id
    WHERE s.space_id = $1 AND s.id = $3
), child AS (
    UPDATE sessions SET last_seq = source.last_seq, token_total = source.token_total
    FROM source
    WHERE space_id = $1 AND id = $2
    RETURNING source.last_seq AS cut, source.own_after
), lineage AS (
    INSERT INTO session_lineages (space_id, session_id, source_id, until_seq)
    SELECT $1, $2, $3, cut FROM child
)
INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
SELECT $1::uuid, $2::uuid, g.from_seq, g.to_seq, g.holder_id
FROM record_segments g
WHERE g.space_id = $1 AND g.session_id = $3
UNION ALL
SELECT $1::uuid, $2::uuid, child.own_after + 1, child.cut, $3::uuid
FROM child WHERE child.own_after < child.cut
"""

WIDEST = """
SELECT max(n) FROM (SELECT count(*) AS n FROM record_segments WHERE space_id = $1
                    GROUP BY session_id) c
"""


async def views(
    con: asyncpg.Connection, space: uuid.UUID, sessions: list[uuid.UUID]
) -> dict[uuid.UUID, list[tuple[object, ...]]]:
    shown = {}
    for sid in sessions:
        rows = await con.fetch(
            LIST_RECORDS_OLDEST, space, sid, -MAX_SEQ, MAX_SEQ, None, 0, 1000, 10**9
        )
        shown[sid] = [tuple(row) for row in rows]
    return shown


@asynccontextmanager
async def older_schema(admin_dsn: str, until: str) -> AsyncIterator[asyncpg.Connection]:
    """A database of its own migrated through `until` (an older release's schema), dropped
    afterwards."""
    dsn = await create_test_database(admin_dsn, until)
    con = await asyncpg.connect(dsn)
    try:
        yield con
    finally:
        await con.close()
        await drop_test_database(admin_dsn, dsn)


async def old_space(con: asyncpg.Connection) -> uuid.UUID:
    """A principal and a space of it, written as the older schema holds them."""
    principal, space = uuid.uuid4(), uuid.uuid4()
    await con.execute("INSERT INTO principals (id, name) VALUES ($1, 'old')", principal)
    await con.execute(
        "INSERT INTO spaces (id, principal_id, name) VALUES ($1, $2, 'old')", space, principal
    )
    return space


@pytest.mark.plain_postgres("migrates a database of its own from an older schema")
async def test_migration_0013_compacts_the_deep_lists_of_older_forks(admin_dsn: str) -> None:
    async with older_schema(admin_dsn, "0012_background_jobs") as con:
        space, root = await old_space(con), uuid.uuid4()
        await con.execute(SESSION, space, root, None, None)
        for _ in range(3):
            await append_one(con, space, root)
        chain = [root]
        for level in range(40):
            child = uuid.uuid4()
            await con.execute(SESSION, space, child, root, level)
            await con.execute(OLD_INHERIT, space, child, chain[-1])
            await append_one(con, space, child)
            chain.append(child)
        assert await con.fetchval(WIDEST, space) == 40
        before = await views(con, space, chain)
        assert len(before[chain[-1]]) == 43
        assert "0013_fork_depth" in await migrate(con)
        assert await con.fetchval(WIDEST, space) <= SEGMENT_CAP
        assert await views(con, space, chain) == before


@pytest.mark.plain_postgres("migrates a database of its own from an older schema")
async def test_migration_0024_starts_every_segment_at_a_row(admin_dsn: str) -> None:
    """Forks of trimmed sources wrote segments over trimmed seqs (0023's INHERIT): after
    0024 each starts at its first row or is gone, and every page of the children, at any
    size, shows what the child did at one page of all."""
    async with older_schema(admin_dsn, "0023_release_in_one_order") as con:
        space = await old_space(con)
        children = []
        for index, kept in enumerate((0, 2)):
            source, child = uuid.uuid4(), uuid.uuid4()
            await con.execute(SESSION, space, source, None, None)
            for _ in range(6):
                await append_one(con, space, source)
            # A trim of a source no fork reads: its rows below the cut go.
            await con.execute(
                "DELETE FROM records WHERE space_id = $1 AND session_id = $2 AND seq <= $3",
                space, source, 6 - kept,
            )  # fmt: skip
            await con.execute(SESSION, space, child, source, index)
            await con.execute(OLD_INHERIT, space, child, source)
            await append_one(con, space, child)
            children.append(child)
        whole = await views(con, space, children)
        assert [len(whole[c]) for c in children] == [1, 3]
        assert await first_page(con, space, children[0]) == []  # the bug: seqs 1-6 ahead
        assert "0024_segments_from_their_first_row" in await migrate(con)
        segments = await con.fetch(
            "SELECT session_id, from_seq, to_seq FROM record_segments WHERE space_id = $1",
            space,
        )
        assert [(r["session_id"], r["from_seq"], r["to_seq"]) for r in segments] == [
            (children[1], 5, 6)
        ]
        assert await views(con, space, children) == whole
        for child in children:
            assert await first_page(con, space, child) == [r[:-1] for r in whole[child][:1]]


async def first_page(con: asyncpg.Connection, space: uuid.UUID, sid: uuid.UUID) -> list[object]:
    """The first record of `sid`'s view, oldest first, in a page of one (without the
    count of records walked, the page's own)."""
    rows = await con.fetch(LIST_RECORDS_OLDEST, space, sid, -MAX_SEQ, MAX_SEQ, None, 0, 1, 10**9)
    return [tuple(row)[:-1] for row in rows if row["seq"] is not None]
