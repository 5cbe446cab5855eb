"""Every RPC of the three services served from a Citus coordinator (DESIGN §4.7, §10).

On a fresh database of the cluster, migrated and distributed, storage, tree and
gateway run as in test_statements.py, and `drive_every_rpc` calls each RPC
they serve (each refusal it provokes answering its documented code). Then a
second space, one the other worker holds, runs the gateway's flows again:
turns, tools, forks of every kind, reads, import, shared memory, watch,
delete. The test then reads where the rows are: each space's rows of every
tenant table on its own worker's shards and none on the other's, and the two
workers different; and what the nodes logged while the services ran.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from stello.agent.v1 import agent_pb2_grpc
from stello.distribution import plan as distribution_plan
from tests.distribution.services import (
    Services,
    drive_every_rpc,
    drive_gateway,
    not_called,
    recorded_services,
)
from tests.support.bouncer import database_of
from tests.support.citus import CitusCluster, LoggedError, logged_errors
from tests.support.citus_pass import create_distributed_database, unexpected_errors

pytestmark = [pytest.mark.citus, pytest.mark.timeout(600)]

# The worker (its port) that holds the space's shard of sessions (and of every co-located table).
SPACE_NODE = """
SELECT p.nodeport FROM pg_dist_shard_placement p
WHERE p.shardid = get_shard_id_for_distribution_column('sessions', $1::uuid)
"""

SHARDS = """
SELECT table_name::text AS table_name, shard_name, nodeport FROM citus_shards
WHERE table_name::text = ANY ($1::text[])
"""

# Tables every space of the pass writes (the others may stay empty for one space).
WRITTEN = (
    "sessions",
    "records",
    "session_slots",
    "idempotency_keys",
    "space_positions",
    "space_events",
    "shared_memory",
)

OTHER_WORKER_TRIES = 64  # each new space lands on either worker: 2**-64 to miss


@dataclass(frozen=True, slots=True)
class Pass:
    """The services' pass: what was not called, the spaces and their workers, what was logged."""

    not_called: list[str]
    spaces: dict[str, int]
    """space id -> the port of the worker that holds it."""
    rows: dict[tuple[str, str, int], int]
    """(space id, table, worker port) -> rows of the space in that worker's shards."""
    errors: list[tuple[str, LoggedError]]


async def _space_on_another_worker(s: Services, con: asyncpg.Connection, taken: int) -> Services:
    """The pass's services as a new space that a worker other than `taken` holds."""
    for n in range(OTHER_WORKER_TRIES):
        key = await s.keys.create_key(space=f"other-worker-{n}", principal="recorded")
        assert key.space_id is not None
        if await con.fetchval(SPACE_NODE, key.space_id) != taken:
            gateway = s.stub("gateway", key.secret, agent_pb2_grpc.AgentGatewayStub)
            return dataclasses.replace(
                s, space_id=str(key.space_id), other_space_id=s.space_id, gw=gateway
            )
    raise AssertionError(f"no new space landed on another worker in {OTHER_WORKER_TRIES} tries")


async def _rows(
    cluster: CitusCluster, database: str, spaces: list[str]
) -> dict[tuple[str, str, int], int]:
    """Rows of each space in each tenant table's shards, read on the workers themselves."""
    con = await asyncpg.connect(cluster.dsn(database))
    try:
        shards = await con.fetch(SHARDS, list(distribution_plan.DISTRIBUTED_TABLES))
    finally:
        await con.close()
    counted: dict[tuple[str, str, int], int] = {}
    for worker in cluster.workers:
        there = await asyncpg.connect(worker.dsn(database))
        try:
            for shard in (r for r in shards if r["nodeport"] == worker.port):
                for space in spaces:
                    found = await there.fetchval(
                        f'SELECT count(*) FROM "{shard["shard_name"]}" WHERE space_id = $1',
                        uuid.UUID(space),
                    )
                    where = (space, shard["table_name"], worker.port)
                    counted[where] = counted.get(where, 0) + int(found)
        finally:
            await there.close()
    return counted


@pytest.fixture(name="served", scope="module")
async def _served(cluster: CitusCluster) -> AsyncIterator[Pass]:
    dsn = await create_distributed_database(cluster)
    database = database_of(dsn)
    logged = {node.name: len(node.log()) for node in cluster.nodes}
    try:
        async with recorded_services(dsn) as services:
            con = await asyncpg.connect(dsn)
            try:
                await drive_every_rpc(services)
                first = await con.fetchval(SPACE_NODE, uuid.UUID(services.space_id))
                second = await _space_on_another_worker(services, con, first)
                await drive_gateway(second)
                spaces = {
                    services.space_id: first,
                    second.space_id: await con.fetchval(SPACE_NODE, uuid.UUID(second.space_id)),
                }
            finally:
                await con.close()
            missing = not_called(services)
        errors = [
            (node.name, error)
            for node in cluster.nodes
            for error in unexpected_errors(logged_errors(node.log()[logged[node.name] :]))
            if error.database in ("", database)
        ]
        rows = await _rows(cluster, database, list(spaces))
        yield Pass(missing, spaces, rows, errors)
    finally:
        await cluster.drop_database(database)


class TestServedFromCitus:
    def test_every_rpc_was_called(self, served: Pass) -> None:
        """The pass reached each RPC of storage, tree and gateway, none answering INTERNAL."""
        assert served.not_called == []

    def test_the_spaces_live_on_both_workers(self, served: Pass, cluster: CitusCluster) -> None:
        """Each space's rows are in its worker's shards of every tenant table and in no other
        worker's, and the two spaces are on the two workers."""
        assert set(served.spaces.values()) == {w.port for w in cluster.workers}
        for space, port in served.spaces.items():
            for table in distribution_plan.DISTRIBUTED_TABLES:
                elsewhere = {
                    w.port: served.rows.get((space, table, w.port), 0)
                    for w in cluster.workers
                    if w.port != port
                }
                assert set(elsewhere.values()) == {0}, (space, table, elsewhere)
            for table in WRITTEN:
                assert served.rows.get((space, table, port), 0) > 0, (space, table)

    def test_no_node_logged_an_error(self, served: Pass) -> None:
        """While the services ran, no node logged an ERROR (a statement Citus refused shows
        here even when the service recovered from it)."""
        assert served.errors == []
