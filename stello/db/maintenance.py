"""Maintenance transactions: the bounds of their statements, and the spaces a round goes over.

The maintenance work (sweeps, erasure, purges, backfills) runs in transactions of its own:
across spaces where one statement serves every space (`across_spaces`; multi-shard on
Citus), or pinned to one space (`bounded`, `within_space`), each statement bounded so that a
node that stops answering ends the round instead of holding it (`MAINTENANCE_TIMEOUT_S`).
A round done space by space reads the spaces, and on Citus their nodes, with `space_ids`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from stello.db.pool import in_transaction

# Citus: a request statement is routed whole to its space's worker, and a connection may
# refuse any other (`citus.multi_task_query_log_level = 'error'`: the Citus test pass's
# databases do, and an operator may too, docs/scaling.md). The maintenance statements
# across spaces are multi-shard by design: their transaction allows it for itself
# (`across_spaces`), and gives the refusal back where per-space statements follow
# (`within_space`). On plain PostgreSQL both set a placeholder that nothing reads.
#
# A maintenance transaction's statements are bounded (`MAINTENANCE_TIMEOUT_S`): a node that
# stops answering with its connections open (a frozen worker, a partition without a reset)
# would otherwise hold the round, and its pool connection, for as long as it lasts.
# `across_spaces` sets the bound with its settings (no statement more); a maintenance
# transaction pinned to one space sets it with `bounded`.
MAINTENANCE_TIMEOUT_S = 60
"""The statement timeout of the maintenance transactions (sweeps, erasure, purges): their
statements are batches that take milliseconds, so the bound only ends a round stuck on a node
that does not answer (the round counts as an outage and is tried again). A constant, not a
setting: no deployment needs another value, since nothing but a stuck node comes near it.
On Citus it does not end a statement whose coordinator session already holds a connection
to a frozen worker (the coordinator waits on that worker past its statement timeout):
docs/scaling.md "Maintenance paths across spaces"."""
BOUNDED = f"SET LOCAL statement_timeout = '{MAINTENANCE_TIMEOUT_S}s'"
ACROSS_SPACES = (
    "SET LOCAL citus.multi_task_query_log_level = 'off';"
    " SET LOCAL citus.max_intermediate_result_size = -1;"
    f" {BOUNDED}"
)
WITHIN_SPACE = (
    "SET LOCAL citus.multi_task_query_log_level TO DEFAULT;"
    " SET LOCAL citus.max_intermediate_result_size TO DEFAULT"
)


async def across_spaces(con: asyncpg.Connection) -> None:
    """In the caller's transaction: let the maintenance statements that follow run across
    spaces (multi-shard on Citus) until `within_space` or the transaction's end, each
    bounded by `MAINTENANCE_TIMEOUT_S` until the transaction's end."""
    await con.execute(ACROSS_SPACES)


BULK_TIMEOUT_S = 600
"""The statement timeout of a maintenance purge across spaces (expired events, expired
request keys): one DELETE of whatever expired since the last round, which after a long
stop of the service can be millions of rows. Under `MAINTENANCE_TIMEOUT_S` such a backlog
would time out every round and never shrink; this bound still ends a round stuck on a node
that does not answer."""
BULK = f"SET LOCAL statement_timeout = '{BULK_TIMEOUT_S}s'"


async def bulk(con: asyncpg.Connection) -> None:
    """In the caller's transaction, after `across_spaces`: its next statements (a purge's
    one DELETE across spaces) time out after `BULK_TIMEOUT_S`."""
    await con.execute(BULK)


async def bounded(con: asyncpg.Connection) -> None:
    """In the caller's transaction (a maintenance one pinned to a space): its statements
    time out after `MAINTENANCE_TIMEOUT_S` (`across_spaces` sets the same bound)."""
    await con.execute(BOUNDED)


async def within_space(con: asyncpg.Connection) -> None:
    """In the caller's transaction, after `across_spaces`: statements are the connection's
    to check again (on Citus, routed to one worker or refused where it says so)."""
    await con.execute(WITHIN_SPACE)


SPACES = "SELECT id FROM spaces ORDER BY id"

# On Citus, the node of each space ($1) holds: its `sessions` shard's placement, read from the
# coordinator's own metadata (no distributed table in the statement). A space's node is null
# where there is no such shard.
SPACE_NODES = """
SELECT u.id, p.nodename || ':' || p.nodeport AS node
FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
LEFT JOIN pg_dist_shard_placement p
  ON p.shardid = get_shard_id_for_distribution_column('sessions', u.id)
ORDER BY u.n
"""
CITUS = "SELECT to_regclass('pg_dist_shard_placement') IS NOT NULL"


@dataclass(frozen=True, slots=True)
class SpaceNode:
    """A space, and on Citus the node (host:port) that holds its shards (None: not known)."""

    id: uuid.UUID
    node: str | None = None


async def space_ids(pool: asyncpg.Pool) -> list[SpaceNode]:
    """Every space, with its node on Citus, bounded as maintenance is: what a maintenance
    round done space by space goes over (`stello.db.periodic.Periodic.by_space`, which skips a
    node's other spaces once one was out of reach). `spaces` is a reference table: on Citus
    the coordinator's placement answers while a worker is out of reach."""

    async def read(con: asyncpg.Connection) -> list[SpaceNode]:
        await bounded(con)
        ids = [row["id"] for row in await con.fetch(SPACES)]
        if not ids or not await con.fetchval(CITUS):
            return [SpaceNode(i) for i in ids]
        try:
            async with con.transaction():  # a role that may not read the metadata: no nodes
                rows = await con.fetch(SPACE_NODES, ids)
        except asyncpg.InsufficientPrivilegeError:
            return [SpaceNode(i) for i in ids]
        return [SpaceNode(r["id"], r["node"]) for r in rows]

    return await in_transaction(pool, read)
