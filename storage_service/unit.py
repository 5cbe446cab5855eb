"""The unit of work: one connection and one outbox, and the per-table repositories on them.

What one transaction does is what its work function does with the `UnitOfWork`
it is handed: every repository it reads from the unit runs on that connection,
and every event they queue goes to that outbox, written as the transaction's last
statement (DESIGN §4.6; `stello.stored.events`). `Database.statement` runs a single
self-contained statement without BEGIN/COMMIT (it is atomic on its own and saves
the round trips), so a change that queues an event cannot use it. A repository
is made on first use: most units touch one or two tables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from stello.db.maintenance import SpaceNode, space_ids
from stello.db.pool import in_statement, in_transaction
from stello.stored.events import Outbox
from storage_service.events.repository import EventRepository
from storage_service.guard.repository import GuardRepository
from storage_service.jobs.repository import JobRepository
from storage_service.keys.repository import KeyRepository
from storage_service.memory.repository import MemoryRepository
from storage_service.records.lineage import LineageRepository
from storage_service.records.repository import RecordRepository
from storage_service.search.backfill_repository import BackfillRepository
from storage_service.search.repository import SearchRepository
from storage_service.sessions.repository import SessionRepository
from storage_service.slots.caches import CacheRepository
from storage_service.slots.repository import SlotRepository
from storage_service.turns.repository import TurnRepository
from storage_service.turns.waiters import WaiterRepository

T = TypeVar("T")


class UnitOfWork:
    """The connection and the outbox of one transaction (or of one self-contained
    statement), and the repositories of the tables storage owns, on them."""

    __slots__ = (
        "_con",
        "_events",
        "_guard",
        "_jobs",
        "_keys",
        "_lineage",
        "_memory",
        "_records",
        "_sessions",
        "_slots",
        "_turns",
        "_waiters",
        "outbox",
    )

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con
        self.outbox = Outbox()
        """The events of this unit's changes, until its last statement writes them."""
        self._sessions: SessionRepository | None = None
        self._records: RecordRepository | None = None
        self._lineage: LineageRepository | None = None
        self._slots: SlotRepository | None = None
        self._turns: TurnRepository | None = None
        self._waiters: WaiterRepository | None = None
        self._memory: MemoryRepository | None = None
        self._guard: GuardRepository | None = None
        self._jobs: JobRepository | None = None
        self._keys: KeyRepository | None = None
        self._events: EventRepository | None = None

    @property
    def sessions(self) -> SessionRepository:
        """The sessions row's meta (label, status), its listing and Transact's lock."""
        if self._sessions is None:
            self._sessions = SessionRepository(self._con, self.outbox)
        return self._sessions

    @property
    def records(self) -> RecordRepository:
        """`records`: append, pages of the view, trims and the window's probes."""
        if self._records is None:
            self._records = RecordRepository(self._con, self.outbox)
        return self._records

    @property
    def lineage(self) -> LineageRepository:
        """`session_lineages` and `record_segments`: a fork's records by reference."""
        if self._lineage is None:
            self._lineage = LineageRepository(self._con)
        return self._lineage

    @property
    def search(self) -> SearchRepository:
        """Text search of `records` and session labels (migration 0019)."""
        return SearchRepository(self._con)

    @property
    def backfill(self) -> BackfillRepository:
        """`search_backfill`: the search backfill's passes over records (migration 0035)."""
        return BackfillRepository(self._con)

    @property
    def slots(self) -> SlotRepository:
        """`session_slots`: system prompt, insight and memory."""
        if self._slots is None:
            self._slots = SlotRepository(self._con, self.outbox)
        return self._slots

    @property
    def caches(self) -> CacheRepository:
        """`compression_caches`: the summaries of older records."""
        return CacheRepository(self._con)

    @property
    def turns(self) -> TurnRepository:
        """The sessions row's lease and turn columns, and BeginTurn's locked read."""
        if self._turns is None:
            self._turns = TurnRepository(self._con, self.outbox)
        return self._turns

    @property
    def waiters(self) -> WaiterRepository:
        """`turn_waiters`: the line of ENQUEUE turns of a session."""
        if self._waiters is None:
            self._waiters = WaiterRepository(self._con)
        return self._waiters

    @property
    def memory(self) -> MemoryRepository:
        """`shared_memory`: a space's entries."""
        if self._memory is None:
            self._memory = MemoryRepository(self._con, self.outbox)
        return self._memory

    @property
    def guard(self) -> GuardRepository:
        """The sessions row's fork guard counter."""
        if self._guard is None:
            self._guard = GuardRepository(self._con)
        return self._guard

    @property
    def jobs(self) -> JobRepository:
        """`background_jobs`: the gateway's job claims and their saved progress."""
        if self._jobs is None:
            self._jobs = JobRepository(self._con)
        return self._jobs

    @property
    def keys(self) -> KeyRepository:
        """`idempotency_keys`: request_id keys and callers' remembered results."""
        if self._keys is None:
            self._keys = KeyRepository(self._con)
        return self._keys

    @property
    def events(self) -> EventRepository:
        """`space_events` and `space_positions`, read and purged."""
        if self._events is None:
            self._events = EventRepository(self._con)
        return self._events


class Database:
    """Runs units of work on the pool: in a retried transaction, or as one atomic statement."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def spaces(self) -> list[SpaceNode]:
        """Every space: what a maintenance round done space by space goes over."""
        return await space_ids(self._pool)

    async def transaction(self, work: Callable[[UnitOfWork], Awaitable[T]]) -> T:
        """Run `work` in one transaction (retried on serialization failure or deadlock);
        the events of its changes are written as the last statement (DESIGN §4.6)."""

        async def run(con: asyncpg.Connection) -> T:
            uow = UnitOfWork(con)
            result = await work(uow)
            if uow.outbox.pending:
                await uow.outbox.flush(con)
            return result

        return await in_transaction(self._pool, run)

    async def statement(self, work: Callable[[UnitOfWork], Awaitable[T]]) -> T:
        """Run `work`, a single self-contained statement, outside an explicit transaction
        (retried like a transaction)."""

        async def run(con: asyncpg.Connection) -> T:
            uow = UnitOfWork(con)
            result = await work(uow)
            # A change writes its event in its own transaction: never use this for one.
            assert not uow.outbox.pending, "a write with events must use transaction()"
            return result

        return await in_statement(self._pool, run)
