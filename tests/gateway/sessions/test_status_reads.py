"""Archive, Unarchive and UpdateLabel read the session, not its children (STYLE §17).

The gateway answers a SessionSummary, which names no child and no ref; the tree
answered each of these calls with the session's node, children and refs included,
which it read whole: Archive read 406 tuples of `sessions` on a session of 200
children, 4,006 on one of 2,000 (UpdateLabel 408 and 4,008). The gateway asks for the
node without them now (`without_links`): 6 and 6 (8 and 8). Tuples read are counted in
PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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


async def test_status_and_label_read_the_same_whatever_the_children(
    fresh: FreshDatabase,
) -> None:
    """Archive, Unarchive and UpdateLabel of a session of 200 children, then of 2,000, in a
    space of 5,000 more sessions (analyzed: no plan scans the table), read as many tuples
    of `sessions` (within a few)."""
    gateway = await fresh.start_gateway()
    sid = fresh.space.sid
    async with gateway.channel(fresh.space.key) as channel:
        stub = agent_pb2_grpc.AgentGatewayStub(channel)
        reply = await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=sid))
        session = str(reply.session.id)
        async with fresh.pool.acquire() as con:
            await con.execute(LONE_ROOTS, fresh.space.id, 5_000)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "archive": lambda: stub.Archive(
                agent_pb2.ArchiveRequest(space_id=sid, session_id=session)
            ),
            "unarchive": lambda: stub.Unarchive(
                agent_pb2.UnarchiveRequest(space_id=sid, session_id=session)
            ),
            "rename": lambda: stub.UpdateLabel(
                agent_pb2.UpdateLabelRequest(space_id=sid, session_id=session, label="renamed")
            ),
        }
        reads: dict[str, list[int]] = {name: [] for name in calls}
        for before, more in ((0, 200), (200, 1_800)):
            async with fresh.pool.acquire() as con:
                await con.execute(CHILDREN, fresh.space.id, uuid.UUID(session), before, more)
                await con.execute("ANALYZE sessions")
            for name, call in calls.items():
                await call()  # past the first connections' own reads
                reads[name].append((await fresh.reads("sessions", call))[0])
    grown = {name: large - small for name, (small, large) in reads.items()}
    assert all(more < 100 for more in grown.values()), reads
