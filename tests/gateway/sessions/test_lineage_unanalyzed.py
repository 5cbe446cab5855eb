"""GetLineage reads its page, not the space, whatever the planner's statistics say.

The gateway's lineage listing is one tree ListAncestors and one storage
BatchGetSlots per page. Over a space of 60,000 sessions, each with slots,
bulk-loaded by COPY into a database of its own that was never analyzed
(autovacuum off, no statistics: asserted), a page of 100 ancestors deep in a
1,500-long chain reads a few tuples per ancestor from `sessions` and
`session_slots` (pg_stat counters, not time), under custom and generic plans.
On PostgreSQL 15 with custom plans the page read all 60,000 sessions twice
(storage's `id = ANY($2)` lookup), before each id became a key lookup.
"""

from __future__ import annotations

import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    FreshDatabase,
    chain_with_crowd,
)
from tests.tree.seed import COLUMNS

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(GENERIC_PLAN_READS),
]

DEPTH = 1_500
CROWD = 58_500
PAGE = 100
TABLES = ["sessions", "session_slots"]
UNANALYZED = TABLES  # the `fresh` fixture leaves them to the test (tests/support/fresh.py)


class TestUnanalyzedSpace:
    async def test_a_lineage_page_reads_its_ancestors_not_the_space(
        self, fresh: FreshDatabase
    ) -> None:
        """A GetLineage page of 100 from deep in the chain reads a few tuples per ancestor
        from sessions and session_slots, not the 60,000 of each the space holds."""
        chain, rows = chain_with_crowd(fresh.space.id, DEPTH, CROWD)
        slots = [(row[0], row[1], f"memory {row[6]}", f"insight {row[6]}") for row in rows]
        async with fresh.pool.acquire() as con:
            await con.copy_records_to_table("sessions", records=rows, columns=COLUMNS)
            await con.copy_records_to_table(
                "session_slots",
                records=slots,
                columns=["space_id", "session_id", "memory", "insight"],
            )
        await fresh.never_analyzed(TABLES)
        gateway = await fresh.start_gateway()
        leaf, sid = str(chain[-1]), fresh.space.sid
        async with gateway.channel(fresh.space.key) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            token = ""
            for _ in range(8):  # pages deep in the chain
                page = await stub.GetLineage(
                    agent_pb2.GetLineageRequest(
                        space_id=sid, session_id=leaf, page_size=PAGE, page_token=token
                    )
                )
                token = page.next_page_token
            reads, page = await fresh.reads_of(
                TABLES,
                lambda: stub.GetLineage(
                    agent_pb2.GetLineageRequest(
                        space_id=sid, session_id=leaf, page_size=PAGE, page_token=token
                    )
                ),
            )
        await fresh.never_analyzed(TABLES)
        first = DEPTH - 2 - 8 * PAGE
        wanted = range(first, first - PAGE, -1)
        assert [a.id for a in page.ancestors] == [str(chain[i]) for i in wanted]
        assert [a.memory for a in page.ancestors] == [f"memory c{i}" for i in wanted]
        # An index entry and a heap tuple per row: each ancestor's session row once for the
        # tree's walk and once for storage's BatchGetSlots, its slots row once.
        assert reads["sessions"] <= 4 * PAGE + 20, reads
        assert reads["session_slots"] <= 2 * PAGE + 20, reads
