"""A maintenance round's statements are bounded (explore13 F4): a node that never answers
ends the round after `stello.db.maintenance.MAINTENANCE_TIMEOUT_S` (an outage, tried again),
never holds it, and its pool connection, for as long as the node stays silent.

The silent node is played by a lock the round needs, held by another transaction (a
frozen worker that keeps its connections open looks the same to the coordinator: a
statement that never answers). The bound is shortened to a second for the test.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from stello.db import maintenance
from stello.db.periodic import OUTAGES
from tree_service.app import create_eraser

pytestmark = pytest.mark.sql

BOUND_S = 1
HELD = "LOCK TABLE session_erasures, spaces IN ACCESS EXCLUSIVE MODE"


@pytest.fixture(name="short_bound")
def _short_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    bounded = f"SET LOCAL statement_timeout = '{BOUND_S}s'"
    monkeypatch.setattr(
        maintenance,
        "ACROSS_SPACES",
        maintenance.ACROSS_SPACES.replace(maintenance.BOUNDED, bounded),
    )
    monkeypatch.setattr(maintenance, "BOUNDED", bounded)


@pytest.mark.usefixtures("short_bound")
async def test_a_round_that_meets_no_answer_ends_within_the_bound(pool: asyncpg.Pool) -> None:
    """With what the erasure's look across spaces and its listing of the spaces read held by
    another, the round ends after the bound (twice: the look, then the fallback's listing)
    with an outage, not when the holder lets go."""
    eraser = create_eraser(pool)
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute(HELD)
        began = time.monotonic()
        with pytest.raises(OUTAGES) as raised:
            await asyncio.wait_for(eraser.run_once(), 10 * BOUND_S)
        took = time.monotonic() - began
    assert isinstance(raised.value, asyncpg.QueryCanceledError), raised.value
    assert took < 4 * BOUND_S, took
