"""The runs of a distribution that `stello migrate` makes on a database URL, and the
probe whether a database is distributed.

`migrate_on_any_dsn` is plain `stello migrate` (and, where the citus extension is
installed, the database's session defaults); `migrate_and_distribute_dsn` is
`stello migrate --distribute`, which refuses a database that is no coordinator
with a worker before it changes anything; `distribute_in_use` tries
`stello.distribution.apply.distribute` again when it deadlocked with the services'
writes (it rolled back whole).
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from stello.db.migrate import CITUS_INSTALLED, migrate
from stello.db.pool import connecting
from stello.distribution.apply import _set_session_defaults, distribute, refuse_unless_coordinator
from stello.distribution.plan import DEFAULT_SHARD_COUNT
from stello.errors import FailedPrecondition

log = logging.getLogger(__name__)

DISTRIBUTE_TRIES = 3
"""Tries of a distribution that met a deadlock with the services' writes."""
DEADLOCK_PAUSE_S = 1.0


async def distribute_in_use(
    con: asyncpg.Connection, *, shard_count: int = DEFAULT_SHARD_COUNT
) -> list[str]:
    """`distribute`, tried again when it deadlocked with the services' writes (a table's
    conversion takes its strongest lock after they took theirs; the transaction rolled
    back whole); FailedPrecondition saying what to do when it keeps doing so."""
    for attempt in range(1, DISTRIBUTE_TRIES + 1):
        try:
            return await distribute(con, shard_count=shard_count)
        except asyncpg.DeadlockDetectedError:
            log.warning("distribution: deadlocked with a write (try %d); nothing changed", attempt)
            if attempt == DISTRIBUTE_TRIES:
                break
            await asyncio.sleep(DEADLOCK_PAUSE_S * attempt)
    raise FailedPrecondition(
        f"the distribution deadlocked with the services' writes {DISTRIBUTE_TRIES} times and "
        "changed nothing: stop the services (or their writes) for it, then run it again"
    )


async def migrate_on_any_dsn(dsn: str) -> tuple[list[str], list[str]]:
    """Plain `stello migrate`: apply pending migrations; where the citus extension is
    installed (a coordinator, distributed or not yet), also set the database's session
    defaults, which the services need from their first connection (SESSION_DEFAULTS:
    without them each new connection's type introspection took ~350 ms, and a cold start
    missed the gateway's deadlines). (migrations applied, defaults set)."""
    con = await connecting(asyncpg.connect(dsn, statement_cache_size=0), dsn)
    try:
        applied = await migrate(con)
        if not await con.fetchval(CITUS_INSTALLED):
            return applied, []
        async with con.transaction():
            return applied, await _set_session_defaults(con)
    finally:
        await con.close()


async def migrate_and_distribute_dsn(
    dsn: str, *, shard_count: int = DEFAULT_SHARD_COUNT
) -> tuple[list[str], list[str]]:
    """`stello migrate --distribute`: on the coordinator at `dsn` (a direct URL), refuse
    unless it is one with a worker (nothing changed), migrate, then distribute.

    Returns (the migrations applied, the distribution's steps); both empty when
    the schema is current and distributed. Idempotent.
    """
    con = await asyncpg.connect(dsn, statement_cache_size=0)
    try:
        await refuse_unless_coordinator(con)
        applied = await migrate(con)
        return applied, await distribute_in_use(con, shard_count=shard_count)
    finally:
        await con.close()


async def is_distributed(con: asyncpg.Connection) -> bool:
    """Whether `sessions` is a distributed table here (False on plain PostgreSQL)."""
    if not await con.fetchval(CITUS_INSTALLED):
        return False
    return bool(
        await con.fetchval(
            "SELECT true FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass"
        )
    )
