"""A read count's end of the other backends (`end_other_backends`, tests/support/history.py)
returns once the pools of this process it emptied have opened their floor again.

A pool whose connections a count ended reconnects them in the background (asyncpg's
floor, `min_size`). A read-count test that ended right after its last count closed the
pool while it still connected; over TCP, asyncpg's SSL negotiation of that connection
then failed with nobody awaiting it, and the event loop reported "Future exception was
never retrieved: ConnectionError('unexpected connection_lost() call')" (an intermittent
error of the PgBouncer pass). The pool's `init` here runs a statement of 0.3 s, so the
floor is opened well after the ended backends are gone.
"""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.database import create_test_database, drop_test_database
from tests.support.history import end_other_backends

pytestmark = pytest.mark.sql

FLOOR = 2


async def test_a_count_returns_once_the_pools_it_emptied_are_whole(admin_dsn: str) -> None:
    """After the count the pool holds its floor again, each one opened once more, and
    closing it at once leaves nothing for the event loop to report (`loop_errors`)."""
    dsn = await create_test_database(admin_dsn)
    opened: list[int] = []

    async def slow_init(con: asyncpg.Connection) -> None:
        await con.execute("SELECT pg_sleep(0.3)")
        opened.append(con.get_server_pid())

    try:
        pool = await asyncpg.create_pool(dsn, min_size=FLOOR, max_size=4, init=slow_init)
        try:
            counter = await asyncpg.connect(dsn)
            try:
                await end_other_backends(counter)
            finally:
                await counter.close()
            assert pool.get_size() == FLOOR, f"{pool.get_size()} of {FLOOR} connections open"
            assert len(opened) == 2 * FLOOR, f"{len(opened)} connections opened"
        finally:
            await pool.close()
    finally:
        await drop_test_database(admin_dsn, dsn)
