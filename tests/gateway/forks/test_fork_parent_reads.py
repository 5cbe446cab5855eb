"""A fork placed under a topology parent reads the parent, not its children (STYLE §17).

The gateway checks that the parent exists before anything is written (NOT_FOUND
before any LLM call). It asked the tree for the parent's node, whose children and
refs GetNode answers: a fork under a parent of 2,000 children read 4,053 tuples of
`sessions`, one under a parent of 200 449. It asks for the parent's config now (two key
probes): 45 and 45. Tuples read are counted in PostgreSQL's statistics (pg_stat), not
time.
"""

from __future__ import annotations

import uuid

import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from tests.support.fresh import CHILDREN, LONE_ROOTS, FreshDatabase

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "counts the tuples read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    ),
]


async def test_a_fork_under_a_parent_reads_the_same_whatever_its_children(
    fresh: FreshDatabase,
) -> None:
    """Forks under a parent of 200 children, then of 2,000, in a space of 5,000 more
    sessions (analyzed: no plan scans the table), read as many tuples of `sessions`
    (within a few)."""
    gateway = await fresh.start_gateway()
    sid = fresh.space.sid
    async with gateway.channel(fresh.space.key) as channel:
        stub = agent_pb2_grpc.AgentGatewayStub(channel)

        async def root() -> str:
            reply = await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=sid))
            return str(reply.session.id)

        source, parent = await root(), await root()
        async with fresh.pool.acquire() as con:
            await con.execute(LONE_ROOTS, fresh.space.id, 5_000)

        async def fork() -> str:
            request = agent_pb2.ForkRequest(
                space_id=sid, source_session_id=source, topology_parent_id=parent, label="kid"
            )
            return str((await stub.Fork(request)).session.parent_id)

        reads = []
        for before, more in ((0, 200), (200, 1_800)):
            async with fresh.pool.acquire() as con:
                await con.execute(CHILDREN, fresh.space.id, uuid.UUID(parent), before, more)
                await con.execute("ANALYZE sessions")
            await fork()  # past the first connections' own reads
            read, under = await fresh.reads("sessions", fork)
            assert under == parent
            reads.append(read)
    small, large = reads
    assert large - small < 100, f"{small} tuples of sessions at 200 children, {large} at 2,000"
