"""A client that leaves during its turn's commit (DESIGN §4.2).

A cancel before the commit writes nothing (test_lease.py, test_busy.py); once the
commit is sent it ends as storage decides, whatever the client does meanwhile:
the turn is stored, said in the gateway's log, and a replay of its request_id
answers it. Before, the client's cancel cut the gateway's Transact (and, through
it, storage's) mid-commit: whether the turn was stored depended on how far
PostgreSQL had got, while both services logged the calls CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

import asyncpg
import grpc
import pytest

from tests.gateway.conftest import StackMaker
from tests.gateway.turns_support import SpyProvider, cancel_reached, send

pytestmark = pytest.mark.sql

LOCK_SESSION = "SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2 FOR UPDATE"
WAITING = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def _until_waiting(pool: asyncpg.Pool) -> None:
    """Until a statement waits for a row lock (the commit, behind the test's)."""
    for _ in range(500):
        if await pool.fetchval(WAITING):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the commit never reached the session's row lock")


async def _until_said(caplog: pytest.LogCaptureFixture, words: str) -> str:
    """The gateway's log line holding `words`, once it is written."""
    for _ in range(500):
        for line in (r.getMessage() for r in caplog.records):
            if words in line:
                return line
        await asyncio.sleep(0.01)
    raise AssertionError(f"never logged: {words}")


class TestLeavingDuringTheCommit:
    async def test_the_commit_under_way_is_stored_and_said(
        self, make_stack: StackMaker, pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The client cancels while the turn's Transact waits for the session's row (held
        by the test): the commit goes on when the row is free, the turn is stored once, the
        gateway logs that its caller left and that it was stored, and a replay of the
        request_id answers the stored turn."""
        gate = asyncio.Event()
        spy = SpyProvider(gate=gate)
        stack = await make_stack(spy)
        root = await stack.root()
        turn = asyncio.ensure_future(send(stack, root.id, "stay", request_id="left-mid-commit"))
        await spy.started.wait()
        with caplog.at_level(logging.DEBUG, logger="agent_gateway.turns.commit"):
            async with pool.acquire() as holder, holder.transaction():
                await holder.execute(LOCK_SESSION, stack.space.id, uuid.UUID(root.id))
                gate.set()
                await _until_waiting(pool)
                turn.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await turn
                await cancel_reached(stack)
            line = await _until_said(caplog, "left during its commit")
        assert line.endswith("the turn was stored"), line
        assert "left-mid-commit" in line
        # Routine (a Stop button, a short deadline): DEBUG, where `stello up` stays quiet
        # (explore15 F2: INFO filled its log at 20 KB a minute under a UI's load).
        levels = {r.levelno for r in caplog.records if "left during its commit" in r.getMessage()}
        assert levels == {logging.DEBUG}
        records = await stack.records(root.id)
        assert [(r.seq, r.content) for r in records] == [(1, "stay"), (2, "echo: stay")]
        replay = await send(stack, root.id, "stay", request_id="left-mid-commit")
        assert (replay.assistant.seq, replay.assistant.content) == (2, "echo: stay")
        assert len(spy.turns) == 1
