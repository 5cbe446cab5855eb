"""A fork and a Transact's lock read their sessions, not the space, whatever the statistics.

A fork must cost the same however big the space (DESIGN §4.4). Its row locks
(`LOCK_HOLDERS_BELOW`, `LOCK_SOURCE`, `LOCK_HOLDERS_REST`) and a Transact's
(`LOCK_SESSIONS`; a trim's `LOCK_FOR_TRIM` and its kin) name their sessions by
primary key; when the statistics of `sessions` call the space small (it grew by
10,000 since the last ANALYZE, as a big tenant among many small ones does), a set
condition (`id = ANY (...)`) was planned as a scan of the space's sessions. A trim finds
the readers of its trimmed sessions by holder; when the statistics of `record_segments`
called the space small too, its generic plan (`holder_id = ANY (...)`) read every
segment of the space. Tuples read are counted in PostgreSQL's statistics (pg_stat), not
time, under custom and generic plans.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from stello.stored.events import Outbox
from storage_service.records.lineage import LineageRepository
from storage_service.sessions.repository import SessionRepository
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    FreshDatabase,
    grown_after_analyze,
)
from tests.support.history import CHAIN_SESSION, append_one, fork_chain

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

GROWN = 10_000
"""Sessions added past the statistics: a read of the space reads at least that many, far past
every bound below (30,000 until CI's time asked for less: the seeding was most of the time)."""
TABLES = ["sessions", "record_segments"]
UNANALYZED = TABLES  # the `fresh` fixture leaves them to the test (tests/support/fresh.py)

# Every crowd session (`grown_after_analyze`) reads the records of another of its space:
# statistics of `record_segments` that know of 2,000 small spaces.
CROWD_SEGMENTS = """
INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
SELECT space_id, id, 1, 1, holder FROM (
    SELECT space_id, id, lead(id) OVER (PARTITION BY space_id ORDER BY id) AS holder
    FROM sessions WHERE label = 'crowd') c
WHERE holder IS NOT NULL
"""

# Every lone root of space $1 but those of $2 reads the records of the next one.
ROOT_SEGMENTS = """
INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
SELECT $1, id, 1, 1, holder FROM (
    SELECT id, lead(id) OVER (ORDER BY id) AS holder
    FROM sessions WHERE space_id = $1 AND label = 'root' AND id <> ALL ($2::uuid[])) r
WHERE holder IS NOT NULL
"""

# Session $2 of space $1 reads the records of session $3.
READS_FROM = """
INSERT INTO record_segments (space_id, session_id, from_seq, to_seq, holder_id)
VALUES ($1, $2, 1, 1, $3)
"""


async def forked_source(fresh: FreshDatabase) -> uuid.UUID:
    """A session of the grown space whose view is segments of several holders (a chain of
    forks of a root with records), once the statistics call the space small."""
    space = fresh.space.id
    con = await asyncpg.connect(fresh.dsn)
    try:
        await grown_after_analyze(con, space, GROWN)
        root = await con.fetchval(
            "SELECT id FROM sessions WHERE space_id = $1 AND label = 'root' LIMIT 1", space
        )
        for _ in range(3):
            await append_one(con, space, root)
        return await fork_chain(con, space, root, 6)
    finally:
        await con.close()


async def grown_roots(fresh: FreshDatabase, count: int) -> list[uuid.UUID]:
    """`count` lone roots of the space, once it has grown past what its statistics know."""
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, fresh.space.id, GROWN)
        rows = await con.fetch(
            "SELECT id FROM sessions WHERE space_id = $1 AND label = 'root' LIMIT $2",
            fresh.space.id,
            count,
        )
    return [r["id"] for r in rows]


async def test_a_fork_reads_its_source_and_holders_not_the_space(fresh: FreshDatabase) -> None:
    """A fork of a session with six holders, in a space of 10,000 more sessions than the
    statistics know of, reads a few tuples of `sessions` per session it locks."""
    space = fresh.space.id
    source = await forked_source(fresh)
    child = uuid.uuid4()
    async with fresh.pool.acquire() as con:
        await con.execute(CHAIN_SESSION, space, child, 99, source)

    async def fork(con: asyncpg.Connection) -> int:
        return await LineageRepository(con).inherit(space, child, source, None)

    read, cut = await fresh.reads("sessions", lambda: fresh.in_transaction(fork))
    assert cut == 9
    assert read <= 80, f"{read} tuples of sessions read by a fork"  # 50


async def test_a_transact_lock_reads_its_sessions_not_the_space(fresh: FreshDatabase) -> None:
    """A Transact's lock of ten sessions, in a space of 10,000 more sessions than the
    statistics know of, reads a few tuples of `sessions` per session."""
    space = fresh.space.id
    ids = await grown_roots(fresh, 10)

    async def lock(con: asyncpg.Connection) -> list[uuid.UUID]:
        return list(await SessionRepository(con, Outbox()).lock(space, ids))

    read, locked = await fresh.reads("sessions", lambda: fresh.in_transaction(lock))
    assert locked == sorted(ids)
    assert read <= 3 * len(ids), f"{read} tuples of sessions read to lock {len(ids)}"


@pytest.mark.parametrize("exclusive", [False, True], ids=["no-key", "checked"])
async def test_a_trim_lock_reads_its_sessions_not_the_space(
    fresh: FreshDatabase, exclusive: bool
) -> None:
    """A trim's lock of ten sessions (two trimmed; one checked FOR UPDATE or none), in a
    space of 10,000 more sessions than the statistics know of, reads a few tuples of
    `sessions` per session (it read the space twice, three times when one was checked)."""
    space = fresh.space.id
    ids = await grown_roots(fresh, 10)
    checked = ids[3:4] if exclusive else []

    async def lock(con: asyncpg.Connection) -> list[uuid.UUID]:
        repository = SessionRepository(con, Outbox())
        return list(await repository.lock_for_trim(space, ids, ids[:2], checked))

    read, locked = await fresh.reads("sessions", lambda: fresh.in_transaction(lock))
    assert sorted(locked) == sorted(ids)
    assert read <= 6 * len(ids), f"{read} tuples of sessions read to lock {len(ids)}"


async def trimmed_with_readers(
    fresh: FreshDatabase, named: int, readers: int
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """`named` lone roots of the grown space, and `readers` other roots reading the records
    of each of the first two (the trimmed ones), once the statistics of `sessions` and of
    `record_segments` call the space small (its 10,000 other roots each read another's)."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        await grown_after_analyze(con, space, GROWN)
        await con.execute(CROWD_SEGMENTS)
        await con.execute("ANALYZE record_segments")
        rows = await con.fetch(
            "SELECT id FROM sessions WHERE space_id = $1 AND label = 'root' LIMIT $2",
            space,
            named + 2 * readers,
        )
        ids = [r["id"] for r in rows]
        await con.execute(ROOT_SEGMENTS, space, ids)
        for i, reader in enumerate(ids[named:]):
            await con.execute(READS_FROM, space, reader, ids[i % 2])
    return ids[:named], ids[named:]


@pytest.mark.parametrize("exclusive", [False, True], ids=["no-key", "checked"])
async def test_a_trim_lock_reads_the_readers_not_the_space(
    fresh: FreshDatabase, exclusive: bool
) -> None:
    """A trim's lock of ten sessions, two of them trimmed with three readers each, in a space
    of 10,000 more sessions and segments than the statistics know of, reads a few tuples of
    `sessions` and `record_segments` per session it locks."""
    space = fresh.space.id
    ids, readers = await trimmed_with_readers(fresh, 10, 3)
    checked = ids[3:4] if exclusive else []

    async def lock(con: asyncpg.Connection) -> list[uuid.UUID]:
        repository = SessionRepository(con, Outbox())
        return list(await repository.lock_for_trim(space, ids, ids[:2], checked))

    reads, locked = await fresh.reads_of(TABLES, lambda: fresh.in_transaction(lock))
    assert sorted(locked) == sorted(ids)
    count = len(ids) + len(readers)
    assert reads["record_segments"] <= 4 * count, f"{reads} read to lock {count}"  # 24
    assert reads["sessions"] <= 6 * count, f"{reads} read to lock {count}"  # 32, 64
