"""The unit of work (`storage_service.unit`): one connection and one outbox per work function,
its events written as its transaction's last statement, never by a bare statement."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from storage_service.models import MetaUpdate
from storage_service.unit import Database, UnitOfWork
from tests.support.fixtures import MakeSession, TestSpace

pytestmark = pytest.mark.sql

EVENTS = """
SELECT kind, session_id FROM space_events WHERE space_id = $1 ORDER BY position
"""
LABEL = "SELECT label FROM sessions WHERE space_id = $1 AND id = $2"


class TestUnitOfWork:
    async def test_repositories_are_made_once_and_share_the_outbox(
        self, pool: asyncpg.Pool
    ) -> None:
        """Each repository is made on first use, then the same one; all queue to one outbox."""
        async with pool.acquire() as con:
            uow = UnitOfWork(con)  # type: ignore[arg-type]
            assert uow.sessions is uow.sessions
            assert uow.slots is uow.slots
            assert not uow.outbox.pending

    async def test_a_transaction_writes_its_events_last_in_order(
        self, pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Changes of two repositories in one transaction commit with their events, in order."""
        sid = await make_session()

        async def work(uow: UnitOfWork) -> None:
            await uow.sessions.put(space.id, MetaUpdate(sid, "renamed", "active"))
            await uow.slots.put(space.id, sid, "insight", "hint")
            assert uow.outbox.pending

        await Database(pool).transaction(work)
        rows = await pool.fetch(EVENTS, space.id)
        assert [(r["kind"], r["session_id"]) for r in rows] == [
            ("session_updated", sid),
            ("insight_put", sid),
        ]

    async def test_a_failed_transaction_leaves_no_change_and_no_event(
        self, pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A work that raises after a change rolls the change and its queued event back."""
        sid = await make_session(label="before")

        async def work(uow: UnitOfWork) -> None:
            await uow.sessions.put(space.id, MetaUpdate(sid, "after", "active"))
            raise LookupError("stop")

        with pytest.raises(LookupError, match="stop"):
            await Database(pool).transaction(work)
        assert await pool.fetchval(LABEL, space.id, sid) == "before"
        assert await pool.fetch(EVENTS, space.id) == []

    async def test_a_statement_refuses_a_change_with_an_event(
        self, pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession
    ) -> None:
        """statement() is for one self-contained statement: a change that queued an event fails."""
        sid = await make_session()
        with pytest.raises(AssertionError, match="must use transaction"):
            await Database(pool).statement(lambda uow: uow.slots.put(space.id, sid, "memory", "m"))

    async def test_a_statement_runs_a_read(
        self, pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A read through statement() answers as in a transaction, without BEGIN/COMMIT."""
        sid = await make_session(label="seen")
        meta = await Database(pool).statement(lambda uow: uow.sessions.get(space.id, sid))
        assert meta is not None and meta.label == "seen"
        assert (
            await Database(pool).statement(lambda uow: uow.sessions.get(space.id, uuid.uuid4()))
            is None
        )
