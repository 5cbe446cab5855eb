"""A page of ListSessions filtered by status reads its matches, not the space (STYLE §17).

Its statement said `($2::text IS NULL OR status = $2)`: a plan that knows no parameter (a
pooler's long-lived connection, `force_generic_plan`) cannot take the index on status for
that, and walked the space's sessions by creation, filtering: a page of the 10 archived
sessions read every one of 2,000 active ones. Nor could it take the page's position (`($3
IS NULL OR (created_at, id) > ...)`) as the bound of its walk: the last page of a listing
read the pages before it. Under generic plans, 430 and 420 tuples of `sessions` beside
200, 4,030 and 4,020 beside 2,000; one statement for each combination of conditions
now: 20 and 20 beside 2,000. Tuples read are counted in PostgreSQL's statistics (pg_stat),
not time.
"""

from __future__ import annotations

import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.support.fresh import LONE_ROOTS, FreshDatabase

pytestmark = [
    pytest.mark.sql,
    pytest.mark.plain_postgres(
        "counts the tuples read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    ),
]

ARCHIVED = 10
ARCHIVE = """
UPDATE sessions SET status = 'archived', archived_at = now()
WHERE space_id = $1 AND id IN (SELECT id FROM sessions WHERE space_id = $1 LIMIT $2)
"""


async def test_an_archived_page_reads_the_same_beside_200_or_2000_active(
    fresh: FreshDatabase,
) -> None:
    """A page of the 10 archived sessions beside 2,000 active ones reads a few tuples of
    `sessions` per session answered."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        await con.execute(LONE_ROOTS, space, ARCHIVED)
        await con.execute(ARCHIVE, space, ARCHIVED)
    storage = await fresh.start(storage_app)
    request = storage_pb2.ListSessionsRequest(
        space_id=fresh.space.sid, status=common_pb2.SESSION_STATUS_ARCHIVED
    )
    reads = []
    async with storage.channel(fresh.space.key) as channel:
        stub = storage_pb2_grpc.SessionStorageStub(channel)

        async def page() -> int:
            return len((await stub.ListSessions(request)).sessions)

        for active in (200, 1_800):
            async with fresh.pool.acquire() as con:
                await con.execute(LONE_ROOTS, space, active)
                await con.execute("ANALYZE sessions")
            read, found = await fresh.reads("sessions", page, warm=True)
            assert found == ARCHIVED
            reads.append(read)
    small, large = reads
    assert large <= 5 * ARCHIVED, (
        f"{small} tuples of sessions read beside 200, {large} beside 2,000"
    )


# $2 sessions of space $1 created after every other (the listing's last page).
LATE = """
INSERT INTO sessions (space_id, id, root_id, sibling_index, label, created_at)
SELECT $1, g.id, g.id, 0, 'late', now() + interval '1 day'
FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, $2)) g
"""


async def test_the_last_page_reads_the_same_after_200_or_2000(fresh: FreshDatabase) -> None:
    """The last page of the listing (10 sessions) after 2,000 reads a few tuples of
    `sessions` per session answered."""
    space = fresh.space.id
    storage = await fresh.start(storage_app)
    reads = []
    async with storage.channel(fresh.space.key) as channel:
        stub = storage_pb2_grpc.SessionStorageStub(channel)

        async def token_after(count: int) -> str:
            token = ""
            for _ in range(count // 200):
                request = storage_pb2.ListSessionsRequest(
                    space_id=fresh.space.sid, page_size=200, page_token=token
                )
                token = (await stub.ListSessions(request)).next_page_token
            return token

        for before in (200, 2_000):
            async with fresh.pool.acquire() as con:
                await con.execute("DELETE FROM sessions WHERE space_id = $1", space)
                await con.execute(LONE_ROOTS, space, before)
                await con.execute(LATE, space, ARCHIVED)
                await con.execute("ANALYZE sessions")
            last = storage_pb2.ListSessionsRequest(
                space_id=fresh.space.sid,
                page_size=ARCHIVED + 1,
                page_token=await token_after(before),
            )

            async def page(last: storage_pb2.ListSessionsRequest = last) -> list[str]:
                return [m.label for m in (await stub.ListSessions(last)).sessions]

            read, labels = await fresh.reads("sessions", page, warm=True)
            assert labels == ["late"] * ARCHIVED
            reads.append(read)
    small, large = reads
    assert large <= 5 * ARCHIVED, f"{small} tuples of sessions read after 200, {large} after 2,000"
