"""Long histories written straight into the database, and the rows a call reads from them.

`seed_history` COPYs records (never 100,000 RPCs) with their token
columns, so the seeded rows hold what an append would have written.
`RowReads` counts the tuples PostgreSQL read from a table between two points
(pg_stat_user_tables and pg_stat_user_indexes): rows read, not rows
answered, and not time.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import asyncpg
import asyncpg.pool

from stello.db.migrate import CITUS_INSTALLED
from stello.rules.tokens import record_tokens
from storage_service.records.lineage import LineageRepository

COLUMNS = [
    "space_id",
    "session_id",
    "seq",
    "role",
    "content",
    "created_at",
    "token_estimate",
    "token_cumulative",
]


def alternating(index: int) -> tuple[str, str]:
    """User and assistant records of 200 characters, in turn (the issue's measure)."""
    role = "user" if index % 2 == 0 else "assistant"
    text = f"{role} message {index} "
    return role, (text * (200 // len(text) + 1))[:200]


async def seed_history(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    space_id: uuid.UUID,
    session_id: uuid.UUID,
    count: int,
    record: Callable[[int], tuple[str, str]] = alternating,
    *,
    recount: bool = False,
) -> None:
    """Append `count` records (role, content from `record(i)`) after the session's last seq.

    The token columns are counted by `stello.rules.tokens` as the rows are written
    (the twin of the SQL rule, tests/storage/records/test_tokens.py); `recount` has
    ``stello_recount_tokens`` (the migration's backfill) count them instead.
    """
    row = await con.fetchrow(
        "SELECT last_seq, token_total FROM sessions WHERE space_id = $1 AND id = $2",
        space_id,
        session_id,
    )
    assert row is not None
    base, total = row["last_seq"], row["token_total"]
    now = datetime.now(UTC)
    rows: list[tuple[Any, ...]] = []
    for i in range(count):
        role, content = record(i)
        tokens = 0 if recount else record_tokens(content)
        total += tokens
        rows.append((space_id, session_id, base + i + 1, role, content, now, tokens, total))
    await con.copy_records_to_table("records", records=rows, columns=COLUMNS)
    await con.execute(
        "UPDATE sessions SET last_seq = $3, token_total = $4 WHERE space_id = $1 AND id = $2",
        space_id,
        session_id,
        base + count,
        total,
    )
    if recount:
        await con.execute("SELECT stello_recount_tokens($1, $2)", space_id, session_id)
    # As after any bulk load: statistics for the planner.
    await con.execute("ANALYZE records")


READS = """
SELECT COALESCE(t.seq_tup_read, 0) + COALESCE(t.idx_tup_fetch, 0) AS heap,
       (SELECT COALESCE(sum(i.idx_tup_read), 0) FROM pg_stat_user_indexes i
        WHERE i.relid = t.relid) AS index
FROM pg_stat_user_tables t
WHERE t.relname = $1
"""

OTHER_BACKENDS = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
"""


WAITING_ON_A_LOCK = """
SELECT count(*) FROM {activity}
WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def activity_view(con: asyncpg.Connection | asyncpg.Pool) -> str:
    """The view of the database's backends to look for a wait in: on Citus every node's
    (`citus_stat_activity`): a statement routed to a worker waits for its lock there, and
    its coordinator backend waits for the worker's answer, not a lock."""
    return "citus_stat_activity" if await con.fetchval(CITUS_INSTALLED) else "pg_stat_activity"


async def waiting_on_a_lock(con: asyncpg.Connection | asyncpg.Pool) -> int:
    """Backends of the database that wait for a lock (a call a test holds back), on every
    node (`activity_view`: the tests that looked only at the coordinator waited their whole
    bound on Citus)."""
    return int(await con.fetchval(WAITING_ON_A_LOCK.format(activity=await activity_view(con))))


BUSY_BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend' AND state IS DISTINCT FROM 'idle'
"""


ON_CITUS = """
The rows are counted in the statistics of the node the counter connects to: on
Citus the workers' shards read and write them, not the coordinator, so the count
would be nothing. Mark the test plain_postgres (docs/scaling.md).
"""


async def _refuse_citus(con: asyncpg.Connection) -> None:
    """A count on a Citus coordinator would be vacuous: fail instead of passing."""
    assert not await con.fetchval(CITUS_INSTALLED), ON_CITUS


OPENING = frozenset(
    {
        asyncpg.pool.PoolConnectionHolder.connect.__code__,
        asyncpg.pool.Pool._maintain_min_size.__code__,  # type: ignore[attr-defined]
    }
)
"""Where a pool opens a connection: a connect of one of its holders (an acquire's, or its
floor's: the connect and the pool's `init`), and its restoring its floor (`min_size`)
after connections of it closed, also while it waits to retry; `self` is the holder or
the pool."""

SETTLE_ROUNDS = 1000
"""How many times (10 ms apart) a count waits for this process's connections."""


async def end_other_backends(con: asyncpg.Connection) -> None:
    """End every other client backend of the database (they flush their statistics as they
    exit; the services' pools reconnect, as after a database restart), then read fresh
    statistics on `con`.

    They are ended once all are idle (up to 2 s): a backend ended mid-statement (a server's
    health ping, a pool's reset) fails its client's call, which the event loop reports.
    None of this process's pools with connections to them is opening one then (one ended
    in its startup fails the pool's reconnect, retried a second later). The count returns
    once those pools have let go of the connections it ended (a backend leaves
    pg_stat_activity a moment before its socket closes, and the client's cleanup comes
    after that) and have opened their floor again: a pool closed (or a health ping
    cancelled) while it still connects leaves asyncpg's pending SSL negotiation failed with
    nobody awaiting it (over TCP, "Future exception was never retrieved:
    ConnectionError('unexpected connection_lost() call')")."""
    for _ in range(200):
        if not await con.fetchval(BUSY_BACKENDS):
            break
        await asyncio.sleep(0.01)
    pools = _pools_of(_open_to({row["pid"] for row in await con.fetch(OTHER_BACKENDS)}))
    await _until_none(lambda: _opening(pools), "pools still opening connections")
    pids = [row["pid"] for row in await con.fetch(OTHER_BACKENDS)]
    ours = _open_to(set(pids))
    pools = _pools_of(ours)
    await con.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", pids)
    for _ in range(500):
        alive = await con.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids
        )
        if not alive:
            break
        await asyncio.sleep(0.01)
    await con.execute("SELECT pg_stat_clear_snapshot()")
    await _until_none(lambda: _pools_of(ours), "ended connections their pools still hold")
    await _until_none(lambda: _opening(pools), "pools still opening connections")


async def _until_none(find: Callable[[], list[Any]], what: str) -> None:
    """Return once `find()` finds nothing (every 10 ms, up to 10 s; else fail with `what`)."""
    found = find()
    for _ in range(SETTLE_ROUNDS):
        if not found:
            return
        await asyncio.sleep(0.01)
        found = find()
    raise AssertionError(f"{what} after 10 s: {found}")


def _open_to(pids: set[int]) -> list[asyncpg.Connection]:
    """This loop's open connections (not pool proxies) to the backends `pids`: among what
    refers to the loop (a connection holds it), found by the collector in C; a scan of
    every object in Python took a quarter of a second in a long run's heap, twice per count
    (8% of the gateway's sessions and turns suites under a profiler)."""
    loop = asyncio.get_running_loop()
    return [
        found
        for found in gc.get_referrers(loop)
        if asyncpg.Connection in type(found).__mro__
        and found._loop is loop
        and not found.is_closed()
        and found.get_server_pid() in pids
    ]


def _pools_of(connections: list[asyncpg.Connection]) -> list[asyncpg.Pool]:
    """The pools that hold `connections` (a pool's holder names it until the connection's
    end is cleaned up: its holder let go and the pool told to restore its floor)."""
    refs = [getattr(c, "_pool_holder", None) for c in connections]
    holders = [ref() for ref in refs if ref is not None]
    return list({id(h._pool): h._pool for h in holders if h is not None}.values())


def _opening(pools: list[asyncpg.Pool]) -> list[asyncio.Task[Any]]:
    """The tasks of this loop in which one of `pools` opens a connection (`OPENING`)."""
    return [task for task in asyncio.all_tasks() if any(_opens(task, pool) for pool in pools)]


def _opens(task: asyncio.Task[Any], pool: asyncpg.Pool) -> bool:
    """Whether `task` is suspended in `pool`'s opening of a connection (`OPENING`)."""
    for frame in _awaiting(task):
        if frame.f_code in OPENING:
            owner = frame.f_locals.get("self")
            if owner is pool or getattr(owner, "_pool", None) is pool:
                return True
    return False


def _awaiting(task: asyncio.Task[Any]) -> Iterator[FrameType]:
    """The frame of each coroutine `task` is suspended in, outermost first."""
    awaited: Any = task.get_coro()
    while getattr(awaited, "cr_frame", None) is not None:
        yield awaited.cr_frame
        awaited = awaited.cr_await


class RowReads:
    """Tuples read from one table by every other connection to the database.

    Each backend flushes its table counters when it exits; `count` ends every
    other client backend of the database (the services' pools reconnect, as
    they do after a database restart) and then reads the counters, so what a
    call read is the difference of two counts around it.
    """

    def __init__(self, con: asyncpg.Connection, table: str) -> None:
        self._con = con
        self._table = table

    async def count(self) -> int:
        """Heap tuples plus index entries read from the table so far."""
        await _refuse_citus(self._con)
        await end_other_backends(self._con)
        row = await self._con.fetchrow(READS, self._table)
        assert row is not None
        return int(row["heap"]) + int(row["index"])


class RowInserts:
    """Rows inserted into one table by every other connection (as `RowReads` counts)."""

    def __init__(self, con: asyncpg.Connection, table: str) -> None:
        self._con = con
        self._table = table

    async def count(self) -> int:
        """`n_tup_ins` of the table so far."""
        await _refuse_citus(self._con)
        await end_other_backends(self._con)
        found = await self._con.fetchval(
            "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = $1", self._table
        )
        return int(found or 0)


class RowUpdates:
    """Rows updated in one table by every other connection (as `RowReads` counts), and how
    many of those were HOT (no index entry written: no indexed column changed, and the new
    version fitted the page)."""

    def __init__(self, con: asyncpg.Connection, table: str) -> None:
        self._con = con
        self._table = table

    async def count(self) -> tuple[int, int]:
        """(`n_tup_upd`, `n_tup_hot_upd`) of the table so far."""
        await _refuse_citus(self._con)
        await end_other_backends(self._con)
        row = await self._con.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1",
            self._table,
        )
        assert row is not None
        return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


CHAIN_SESSION = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label, status)
SELECT $1, $2, p.id, p.root_id, p.depth + 1, $3, 'chain', 'active'
FROM sessions p
WHERE p.space_id = $1 AND p.id = $4
"""

CHAIN_CHILDREN = "SELECT count(*) FROM sessions WHERE space_id = $1 AND parent_id = $2"

CHAIN_RECORD = """
WITH s AS (
    UPDATE sessions SET last_seq = last_seq + 1, token_total = token_total + $3
    WHERE space_id = $1 AND id = $2
    RETURNING last_seq, token_total
)
INSERT INTO records (space_id, session_id, seq, role, content, created_at, token_estimate,
                     token_cumulative)
SELECT $1, $2, s.last_seq, CASE WHEN s.last_seq % 2 = 1 THEN 'user' ELSE 'assistant' END,
       $4, now(), $3, s.token_total
FROM s
"""

CHAIN_TEXT = "a record of the chain, forty characters."


async def append_one(con: asyncpg.Connection, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
    """One record (`CHAIN_TEXT`) after the session's last, with its token columns."""
    await con.execute(CHAIN_RECORD, space_id, session_id, record_tokens(CHAIN_TEXT), CHAIN_TEXT)


SMALL_SESSIONS = """
WITH made AS (
    INSERT INTO sessions (space_id, id, root_id, sibling_index, label, last_seq, token_total)
    SELECT $1, g.id, g.id, 0, 'small', $3::integer, 2 * $3::integer
    FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, $2)) g
    RETURNING id
)
INSERT INTO records (space_id, session_id, seq, role, content, created_at, token_estimate,
                     token_cumulative)
SELECT $1, made.id, k, 'user', 'small', now(), 2, 2 * k
FROM made, generate_series(1, $3::integer) k
"""


async def small_sessions(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    space_id: uuid.UUID,
    sessions: int,
    records: int,
) -> None:
    """`sessions` roots of `records` records each in one statement: the table of a database
    that many tests (or tenants) share, in which the planner's statistics make every
    session look a few rows long."""
    await con.execute(SMALL_SESSIONS, space_id, sessions, records)


async def fork_chain(
    con: asyncpg.Connection, space_id: uuid.UUID, start: uuid.UUID, depth: int
) -> uuid.UUID:
    """`depth` forks of forks from `start` (children of `start` in the tree), each
    inheriting all of its source's records with storage's own fork statement
    (`LineageRepository.inherit`, its compaction included) and adding one record; the
    last one. No RPC: 2,000 levels take seconds."""
    siblings = int(await con.fetchval(CHAIN_CHILDREN, space_id, start))
    tip = start
    for level in range(depth):
        child = uuid.uuid4()
        async with con.transaction():
            await con.execute(CHAIN_SESSION, space_id, child, siblings + level, start)
            await LineageRepository(con).inherit(space_id, child, tip, None)
            await append_one(con, space_id, child)
        tip = child
    return tip
