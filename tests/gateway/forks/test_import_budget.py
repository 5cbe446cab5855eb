"""ImportSession's write gets what is left of the saga's budget, not the per-call cap: its cost
grows with the records it imports (DESIGN §4.1; agent.proto ImportSession "Size")."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from stello.agent.v1 import agent_pb2
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    close_stack,
    open_stack,
    record,
)
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

CALL_CAP_S = 0.5
"""The gateway's per-call cap (STELLO_GATEWAY_CALL_TIMEOUT_S) in this test."""

PROVISIONAL = """
SELECT id FROM sessions WHERE space_id = $1 AND provisional_until IS NOT NULL FOR UPDATE
"""
BLOCKED_BY = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))"


class HoldTheSession:
    """At the saga's `fork.after_create`: lock the provisional session's row in `holder`'s
    transaction, so storage's Transact that fills it waits for it."""

    def __init__(
        self, holder: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], space: TestSpace
    ) -> None:
        self.holder, self.space = holder, space
        self.held = asyncio.Event()

    async def hit(self, point: str) -> None:
        """At the point, once: take the row."""
        if point == "fork.after_create" and not self.held.is_set():
            await self.holder.execute(PROVISIONAL, self.space.id)
            self.held.set()


async def test_a_fill_slower_than_the_call_cap_is_imported(
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
    pool: asyncpg.Pool,
) -> None:
    """The import's one Transact waits past the per-call cap (a row held, as a write of
    20,000 records takes that long on a busy machine): it is imported once the row is free,
    within the saga's budget. It answered DEADLINE_EXCEEDED "SessionStorage.Transact: did
    not answer within the deadline" at the cap, though the client set no deadline and the
    budget had most of its time left."""
    async with pool.acquire() as holder:
        holding = holder.transaction()
        await holding.start()
        faults = HoldTheSession(holder, space)
        gateway = await start_gateway(faults=faults, call_timeout_s=CALL_CAP_S)
        stack = await open_stack(backends, gateway, space, summarizer)
        try:
            request = agent_pb2.ImportSessionRequest(
                space_id=space.sid, label="big", records=[record("user", "hello")]
            )
            call: Any = asyncio.ensure_future(stack.gw.ImportSession(request))
            await faults.held.wait()
            pid = await holder.fetchval("SELECT pg_backend_pid()")
            for _ in range(500):  # until storage's Transact waits for the row
                if call.done() or await pool.fetchval(BLOCKED_BY, pid) > 0:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(3 * CALL_CAP_S)  # past the cap, well within the budget
            await holding.rollback()
            reply = await call
            listed = await stack.gw.ListRecords(
                agent_pb2.ListRecordsRequest(space_id=space.sid, session_id=reply.session.id)
            )
            assert [r.content for r in listed.records] == ["hello"]
        finally:
            await close_stack(stack)
