"""AddRef's checks read its two sessions and walk the chain by key, whatever the statistics.

Its ends (`REF_ENDS`, `id = ANY ($2)`) and the walk of "is one an ancestor of the other"
(`IS_ANCESTOR`, which joined each step to `sessions`) were planned, with statistics that
call the space small (analyzed with a handful of sessions among 2,000 small spaces, then
grown by 10,000: autovacuum off, as before the next analyze), as reads of every session of
the space: once for the ends, and once per level for the walk (a hash join). Tuples read
are counted in PostgreSQL's statistics (pg_stat), not time.
"""

from __future__ import annotations

import uuid

import grpc
import pytest

from stello.errors import error_info_reason
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    FreshDatabase,
    grown_after_analyze,
)
from tests.tree.seed import COLUMNS
from tree_service.app import create_app

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

DEPTH = 6


async def test_the_ancestor_check_reads_the_chain(fresh: FreshDatabase) -> None:
    """AddRef from the leaf of a 6-deep chain to its root (refused: an ancestor), in a space
    of 30,006 sessions that its statistics call small, reads a few tuples of `sessions` per
    level of the chain, not the space."""
    space = fresh.space.id
    made = [uuid.uuid4() for _ in range(DEPTH)]
    rows = [
        (space, sid, made[i - 1] if i else None, made[0], i, 0, f"c{i}")
        for i, sid in enumerate(made)
    ]
    async with fresh.pool.acquire() as con:
        await con.copy_records_to_table("sessions", records=rows, columns=COLUMNS)
        await grown_after_analyze(con, space, 10_000)
    tree = await fresh.start(create_app)
    request = tree_pb2.AddRefRequest(
        space_id=fresh.space.sid, from_id=str(made[-1]), to_id=str(made[0])
    )
    async with tree.channel(fresh.space.key) as channel:
        stub = tree_pb2_grpc.SessionTreeStub(channel)

        async def add() -> grpc.aio.AioRpcError:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.AddRef(request)
            return caught.value

        read, refused = await fresh.reads("sessions", add)
    assert error_info_reason(refused) == "REF_TO_ANCESTOR"
    assert read <= 4 * DEPTH + 20, f"{read} tuples of sessions read for a {DEPTH}-deep chain"
