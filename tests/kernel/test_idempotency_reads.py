"""A replay's look-up probes the sessions its key is linked to, whatever the statistics.

`idempotency.stored` answers an entry linked to a session being erased as erased. That
check joined the links to `sessions`, which the planner ran as a read of every hidden
session of the space when its statistics knew of none (analyzed with one session among
2,000 small spaces; 30,000 then added and hidden, as while a big DeleteSubtree is erased;
autovacuum off, as before the next analyze). Tuples read are counted in PostgreSQL's
statistics (pg_stat), not time.
"""

from __future__ import annotations

import pytest

from stello.stored import idempotency
from tests.support.fresh import (
    GENERIC_PLAN_READS,
    LONE_ROOTS,
    FreshDatabase,
    grown_after_analyze,
)

pytestmark = [pytest.mark.sql, pytest.mark.plain_postgres(GENERIC_PLAN_READS)]

SCOPE = "test.kernel"

HIDE_OTHERS = """
UPDATE sessions SET provisional_until = 'infinity' WHERE space_id = $1 AND id <> $2
"""

# A key ($2) with a response, linked to session $3.
LINKED_KEY = """
WITH k AS (
    INSERT INTO idempotency_keys (space_id, scope, request_id, request_hash, response)
    VALUES ($1, 'test.kernel', $2, '\\x01', '\\x02')
)
INSERT INTO idempotency_key_sessions (space_id, session_id, scope, request_id)
VALUES ($1, $3, 'test.kernel', $2)
"""


async def test_a_replay_probes_its_linked_session(fresh: FreshDatabase) -> None:
    """The look-up of a key linked to a visible session, in a space erasing 30,000 hidden
    sessions, reads a few tuples of `sessions` and answers the response; a key linked to
    a hidden one answers as erased."""
    space = fresh.space.id
    async with fresh.pool.acquire() as con:
        visible = (await con.fetch(LONE_ROOTS, space, 1))[0]["id"]
        await grown_after_analyze(con, space, 30_000)
        await con.execute(HIDE_OTHERS, space, visible)
        hidden = await con.fetchval(
            "SELECT id FROM sessions WHERE space_id = $1 AND id <> $2 LIMIT 1", space, visible
        )
        await con.execute(LINKED_KEY, space, "live", visible)
        await con.execute(LINKED_KEY, space, "gone", hidden)

    async def look_up(request_id: str) -> idempotency.Entry | None:
        return await fresh.in_transaction(
            lambda con: idempotency.stored(con, space, SCOPE, request_id)
        )

    read, live = await fresh.reads("sessions", lambda: look_up("live"))
    assert live is not None and not live.erased and live.response == b"\x02"
    assert read <= 10, f"{read} tuples of sessions read for one replay"
    gone = await look_up("gone")
    assert gone is not None and gone.erased
