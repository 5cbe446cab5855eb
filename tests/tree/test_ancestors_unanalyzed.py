"""GetAncestors and ListAncestors read O(depth), not O(space), whatever the statistics say.

A space of 60,000 sessions bulk-loaded by COPY into a database of its own that
was never analyzed (autovacuum off, no statistics: asserted), with a
1,500-deep chain beside a crowd of other sessions. The tuples PostgreSQL read
from `sessions` (pg_stat counters, not time) stay within a few per ancestor:
the walk goes by primary key, carries the columns it answers (no join back to
`sessions`), and no plan may scan the space.
"""

from __future__ import annotations

import pytest

from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    FreshDatabase,
    chain_with_crowd,
)
from tests.tree.seed import COLUMNS
from tree_service.app import create_app

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(GENERIC_PLAN_READS),
]

DEPTH = 1_500
CROWD = 58_500
PAGE = 100


class TestUnanalyzedSpace:
    async def test_ancestors_read_the_chain_not_the_space(self, fresh: FreshDatabase) -> None:
        """GetAncestors of a 1,500-deep leaf, and a ListAncestors page of 100 from deep in
        the chain, read a few tuples per ancestor, not the 60,000 sessions of the space."""
        chain, rows = chain_with_crowd(fresh.space.id, DEPTH, CROWD)
        async with fresh.pool.acquire() as con:
            await con.copy_records_to_table("sessions", records=rows, columns=COLUMNS)
        await fresh.never_analyzed(["sessions"])
        tree = await fresh.start(create_app)
        leaf, sid = str(chain[-1]), fresh.space.sid
        async with tree.channel(fresh.space.key) as channel:
            stub = tree_pb2_grpc.SessionTreeStub(channel)
            whole, reply = await fresh.reads(
                "sessions",
                lambda: stub.GetAncestors(
                    tree_pb2.GetAncestorsRequest(space_id=sid, session_id=leaf)
                ),
            )
            token = ""
            for _ in range(8):  # pages deep in the chain
                page = await stub.ListAncestors(
                    tree_pb2.ListAncestorsRequest(
                        space_id=sid, session_id=leaf, page_size=PAGE, page_token=token
                    )
                )
                token = page.next_page_token
            paged, page = await fresh.reads(
                "sessions",
                lambda: stub.ListAncestors(
                    tree_pb2.ListAncestorsRequest(
                        space_id=sid, session_id=leaf, page_size=PAGE, page_token=token
                    )
                ),
            )
        await fresh.never_analyzed(["sessions"])
        assert [n.id for n in reply.nodes] == [str(s) for s in reversed(chain[:-1])]
        first = DEPTH - 2 - 8 * PAGE
        assert [n.id for n in page.nodes] == [str(chain[i]) for i in range(first, first - PAGE, -1)]
        # An index entry and a heap tuple per row: each ancestor once for the walk, and for
        # GetAncestors its one child once more; nothing else.
        said = f"GetAncestors read {whole} tuples for {DEPTH - 1}; a page {paged} for {PAGE}"
        assert whole <= 4 * DEPTH + 20 and paged <= 2 * PAGE + 20, said
