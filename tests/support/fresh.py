"""A database of its own, freshly migrated and never analyzed, with real servers over it.

The run's database is shared by every test, and autovacuum analyzes its tables
as they fill, so the planner's statistics there describe whatever ran before.
A test that must prove a read does not depend on statistics creates its own
database (`create_test_database`), turns autovacuum off for its tables, COPYs
its rows and asks PostgreSQL (`never_analyzed`) that no statistics exist.
Servers over it are the production app factories on loopback ports, as
`tests/support/fixtures.py` starts them; everything is stopped and the
database dropped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import asyncpg
import pytest

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from stello.auth import KeyStore
from stello.db.pool import create_pool
from stello.serving.runner import AppFactory
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from storage_service.app import create_app as storage_app
from tests.support.database import create_test_database, drop_test_database
from tests.support.fixtures import RunningServer, TestSpace, new_space
from tests.support.history import READS, end_other_backends
from tree_service.app import create_app as tree_app

GENERIC_PLAN_READS = (
    "counts the tuples read in the statistics of the database it connects to (on Citus "
    "the coordinator reads none, the workers' shards do) under PostgreSQL's generic "
    "plans, which Citus cannot route (force_generic_plan: could not create distributed "
    "plan)"
)
"""The `plain_postgres` reason of the unanalyzed-space tests (`chain_with_crowd`): the
tree's ancestors and the gateway's lineage."""

T = TypeVar("T")
WARM_RUNS = 6
"""Runs that take a prepared statement past its custom plans (PostgreSQL plans the first five
custom; from the sixth it may keep a generic one)."""

UNANALYZED = """
SELECT relname FROM pg_stat_user_tables
WHERE relname = ANY($1::text[])
  AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL
       OR EXISTS (SELECT FROM pg_statistic WHERE starelid = relid))
"""


@dataclass(slots=True)
class FreshDatabase:
    """A database of its own: its DSN, a pool, a space with its key, servers started on it."""

    dsn: str
    settings: StelloSettings
    pool: asyncpg.Pool
    keys: KeyStore
    space: TestSpace
    servers: list[RunningServer] = field(default_factory=list)

    async def start(self, factory: AppFactory) -> RunningServer:
        """A real server of `factory` over this database, on 127.0.0.1:0."""
        app = factory(self.settings, self.pool, self.keys)
        server, port = await create_server(app, "127.0.0.1:0")
        await server.start()
        running = RunningServer(app, server, port)
        self.servers.append(running)
        return running

    async def start_gateway(self) -> RunningServer:
        """Storage and tree servers over this database and a gateway over them; the gateway."""
        storage = await self.start(storage_app)
        tree = await self.start(tree_app)
        config = GatewaySettings(storage_address=storage.address, tree_address=tree.address)
        return await self.start(partial(gateway_app, config=config))

    async def in_transaction(self, call: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`call` in a transaction of a new connection (custom plans first under `auto`,
        generic ones at once under `force_generic_plan`), closed after."""
        con = await asyncpg.connect(self.dsn)
        try:
            async with con.transaction():
                return await call(con)
        finally:
            await con.close()

    async def reads(
        self, table: str, call: Callable[[], Awaitable[T]], *, warm: bool = False
    ) -> tuple[int, T]:
        """The tuples read from `table` while `call()` ran, and its result (`reads_of`)."""
        counts, result = await self.reads_of((table,), call, warm=warm)
        return counts[table], result

    async def reads_of(
        self, tables: Sequence[str], call: Callable[[], Awaitable[T]], *, warm: bool = False
    ) -> tuple[dict[str, int], T]:
        """The tuples read from each of `tables` while `call()` ran (heap and index, as
        `RowReads` counts them), and its result; `call` starts once the first count is taken.
        With `warm`, `call()` runs WARM_RUNS times first, uncounted: past the custom plans of
        a prepared statement.

        Counting ends every other backend of the database (they flush their counters as
        they exit); the servers' pools reconnect, as after a database restart, before a
        count returns (`end_other_backends`).
        """
        for _ in range(WARM_RUNS if warm else 0):
            await call()
        counter = await asyncpg.connect(self.dsn)
        try:
            before = await _counts(counter, tables)
            result = await call()
            after = await _counts(counter, tables)
            return {t: after[t] - before[t] for t in tables}, result
        finally:
            await counter.close()

    async def plan_with(self, plan_cache_mode: str) -> None:
        """Make this database's new connections plan as `plan_cache_mode` says (`plan_as`);
        the next count (`reads_of`) ends the connections open now."""
        con = await asyncpg.connect(self.dsn)
        try:
            await plan_as(con, self.dsn, plan_cache_mode)
        finally:
            await con.close()

    async def never_analyzed(self, tables: Sequence[str]) -> None:
        """Assert that PostgreSQL holds no statistics of `tables` (never analyzed)."""
        # A connection of its own: the pool's may have been ended by a count.
        con = await asyncpg.connect(self.dsn)
        try:
            analyzed = await con.fetch(UNANALYZED, list(tables))
        finally:
            await con.close()
        assert not analyzed, f"analyzed: {[r['relname'] for r in analyzed]}"


# $1: a space; $2 other spaces of its principal, $3 lone roots each.
CROWD = """
WITH spaces AS (
    INSERT INTO spaces (id, principal_id, name)
    SELECT gen_random_uuid(), s.principal_id, 'crowd ' || i
    FROM spaces s, generate_series(1, $2) i
    WHERE s.id = $1
    RETURNING id
)
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
SELECT spaces.id, g.id, g.id, 0, 'crowd'
FROM spaces, LATERAL (SELECT gen_random_uuid() AS id FROM generate_series(1, $3)) g
"""

# $2 lone roots in space $1, their ids.
LONE_ROOTS = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label)
SELECT $1, g.id, g.id, 0, 'root' FROM (SELECT gen_random_uuid() AS id
                                       FROM generate_series(1, $2)) g
RETURNING id
"""


# $4 more children of the root $2 in space $1 (after its $3 first), as forks would have left them.
CHILDREN = """
INSERT INTO sessions (space_id, id, parent_id, root_id, depth, sibling_index, label)
SELECT $1, gen_random_uuid(), $2, $2, 1, $3 + i, 'kid' FROM generate_series(0, $4 - 1) i
"""


async def grown_after_analyze(
    con: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, space_id: uuid.UUID, grown: int
) -> None:
    """Statistics that call the space small, as a space that grew since the last ANALYZE:
    2,000 other spaces of 5 sessions beside it, `sessions` analyzed, then `grown` lone roots
    added to the space (the caller's database keeps autovacuum off for `sessions`)."""
    await con.execute(CROWD, space_id, 2_000, 5)
    await con.execute("ANALYZE sessions")
    await con.execute(LONE_ROOTS, space_id, grown)


async def _counts(counter: asyncpg.Connection, tables: Sequence[str]) -> dict[str, int]:
    """Tuples read from each table so far, every other backend's counters flushed."""
    await end_other_backends(counter)
    counts = {}
    for table in tables:
        row = await counter.fetchrow(READS, table)
        assert row is not None
        counts[table] = int(row["heap"]) + int(row["index"])
    return counts


PLAN_MODES = ("auto", "force_generic_plan")
"""The plan choices a fresh database's connections may be given (`plan_as`)."""


async def plan_as(con: asyncpg.Connection, dsn: str, plan_cache_mode: str) -> None:
    """Make the new connections of the database of `dsn` plan prepared statements as
    `plan_cache_mode` (one of PLAN_MODES) says; those open keep their choice."""
    if plan_cache_mode not in PLAN_MODES:
        raise ValueError(f"plan_cache_mode: one of {PLAN_MODES}, not {plan_cache_mode!r}")
    name = dsn.partition("?")[0].rpartition("/")[2]
    await con.execute(f'ALTER DATABASE "{name}" SET plan_cache_mode = {plan_cache_mode}')


@asynccontextmanager
async def fresh_database(
    admin_dsn: str,
    settings: StelloSettings,
    *,
    unanalyzed: Sequence[str] = (),
    plan_cache_mode: str = "auto",
) -> AsyncIterator[FreshDatabase]:
    """A new migrated database with autovacuum off for `unanalyzed` (none analyzes them),
    whose connections plan prepared statements as `plan_cache_mode` says (auto: custom
    plans first, then a generic one when it looks no worse; force_generic_plan: a plan
    that knows no parameter value, as a long-lived connection ends up using)."""
    dsn = await create_test_database(admin_dsn)
    try:
        con = await asyncpg.connect(dsn)
        try:
            for table in unanalyzed:
                await con.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = off)')
            await plan_as(con, dsn, plan_cache_mode)
        finally:
            await con.close()
        local = settings.model_copy(update={"database_url": dsn, "database_direct_url": dsn})
        async with create_pool(dsn, local) as pool:
            keys = KeyStore(pool, cache_ttl_s=0)
            fresh = FreshDatabase(dsn, local, pool, keys, await new_space(keys))
            try:
                yield fresh
            finally:
                for running in reversed(fresh.servers):
                    await shutdown(running.app, running.server, 0)
    finally:
        await drop_test_database(admin_dsn, dsn)


def chain_with_crowd(
    space_id: uuid.UUID, depth: int, crowd: int
) -> tuple[list[uuid.UUID], list[tuple[object, ...]]]:
    """Sessions of a `depth`-long chain (root first), and `crowd` more under another root
    (ten children each, breadth first): the chain's ids and every row, as
    `tests.tree.seed.COLUMNS` orders them."""
    chain = [uuid.uuid4() for _ in range(depth)]
    rows: list[tuple[object, ...]] = [
        (space_id, sid, chain[i - 1] if i else None, chain[0], i, 0, f"c{i}")
        for i, sid in enumerate(chain)
    ]
    others = [uuid.uuid4() for _ in range(crowd)]
    depths = [0] * crowd
    for i, sid in enumerate(others):
        parent = None if i == 0 else (i - 1) // 10
        depths[i] = 0 if parent is None else depths[parent] + 1
        index = 0 if parent is None else (i - 1) % 10
        rows.append(
            (
                space_id,
                sid,
                None if parent is None else others[parent],
                others[0],
                depths[i],
                index,
                f"o{i}",
            )
        )
    return chain, rows


PLAN_CHOICES = tuple(os.environ.get("STELLO_TEST_PLANS", ",".join(PLAN_MODES)).split(","))
"""The plan choices the `fresh` tests run under: both, unless STELLO_TEST_PLANS names fewer
(scripts/test: the PgBouncer pass on PostgreSQL 15 counts under generic plans, those of the
long-lived connections a pooler keeps; the embedded pass counts under both)."""
if not set(PLAN_CHOICES) <= set(PLAN_MODES):
    raise ValueError(f"STELLO_TEST_PLANS: auto and/or force_generic_plan, not {PLAN_CHOICES}")


@pytest.fixture(name="fresh", params=PLAN_CHOICES)
async def _fresh(
    admin_dsn: str, settings: StelloSettings, request: pytest.FixtureRequest
) -> AsyncIterator[FreshDatabase]:
    """A database of its own whose `sessions` only the test analyzes (or the tables its
    module names in `UNANALYZED`), planning prepared statements with the custom plans of a
    new connection or the generic plans of an old one."""
    unanalyzed = getattr(request.module, "UNANALYZED", ("sessions",))
    async with fresh_database(
        admin_dsn, settings, unanalyzed=unanalyzed, plan_cache_mode=request.param
    ) as fresh:
        yield fresh
