"""The tree's unit of work: one transaction's connection, deadline and outbox, and each
room's statements on them; and the pool's reads, each room's.

`TreeRepository` runs single-statement reads on the pool (its rooms' `NodeReads`,
`TreeRowReads`, `SessionReads`, and the maintenance's `SweepRepository` and
`EraseRepository`) and units of work in one transaction (`transaction`), handing the
work a `TreeTx` whose rooms (`nodes`, `sessions`, `refs`, `subtrees`, each made on
first use) run one statement per method on that transaction's connection, their
events queued in its outbox and written as its last statement (DESIGN §4.6).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from stello.db.maintenance import SpaceNode, space_ids
from stello.db.pool import in_transaction
from stello.errors import DeadlineExceeded
from stello.stored import idempotency
from stello.stored.events import Outbox
from tree_service import sql
from tree_service.erasure.job import EraseRepository
from tree_service.erasure.repository import SubtreeStatements
from tree_service.nodes.repository import NodeReads, NodeStatements
from tree_service.refs.repository import RefStatements
from tree_service.sessions.repository import SessionReads, SessionStatements
from tree_service.sweep.repository import SweepRepository
from tree_service.trees.repository import TreeRowReads

T = TypeVar("T")

DEADLINE_SLACK_S = 0.05
"""A statement cancelled this close to its transaction's deadline was cancelled by it (the
bound is rounded up to whole milliseconds)."""


def deadline_passed() -> DeadlineExceeded:
    """The DEADLINE_EXCEEDED of a transaction whose caller's deadline passed before it
    committed (it was rolled back)."""
    return DeadlineExceeded(
        "the caller's deadline passed before the delete committed; nothing was deleted"
    )


class TreeRepository:
    """Reads on the pool (a room's each), and transactions handing out a `TreeTx`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.nodes = NodeReads(pool)
        """The topology reads."""
        self.trees = TreeRowReads(pool)
        """GetTree's reads."""
        self.sessions = SessionReads(pool)
        """A session's config."""
        self.sweeps = SweepRepository(pool)
        """The provisional sweep's transactions."""
        self.erasure = EraseRepository(pool)
        """The erasure job's transactions."""

    async def transaction(
        self, work: Callable[[TreeTx], Awaitable[T]], deadline: float | None = None
    ) -> T:
        """Run `work` in one transaction (retried on serialization failure or deadlock);
        the events of its changes are written as the last statement (DESIGN §4.6).

        With a `deadline` (a `time.monotonic()` time), every statement is bound by what is
        left of it (`TreeTx.bound`, first here, again where `work` asks): a statement the
        database cancels once it has passed (a row lock waited for) rolls the transaction
        back and its connection goes back to the pool.

        Raises:
            DeadlineExceeded: the deadline passed first (nothing was changed).
        """

        async def run(con: asyncpg.Connection) -> T:
            tx = TreeTx(con, deadline)
            await tx.bound()
            result = await work(tx)
            if tx.outbox.pending:
                await tx.outbox.flush(con)
            return result

        try:
            return await in_transaction(self._pool, run)
        except asyncpg.QueryCanceledError as exc:
            if deadline is None or time.monotonic() < deadline - DEADLINE_SLACK_S:
                raise  # not our bound: an operator's cancel, a server's timeout
            raise deadline_passed() from exc

    async def stored(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> idempotency.Entry | None:
        """The live idempotency entry under the key, or None."""

        async def work(con: asyncpg.Connection) -> idempotency.Entry | None:
            return await idempotency.stored(con, space_id, scope, request_id)

        return await in_transaction(self._pool, work)

    async def spaces(self) -> list[SpaceNode]:
        """Every space (the reference table `spaces`), for a round done space by space."""
        return await space_ids(self._pool)


class TreeTx(idempotency.KeyStatements):
    """One transaction's connection, deadline and outbox, and its rooms' statements on them;
    every method of those runs exactly one statement."""

    def __init__(self, con: asyncpg.Connection, deadline: float | None = None) -> None:
        self._con = con
        # The caller's deadline (`time.monotonic()`), None when unbounded.
        self._deadline = deadline
        # The changes' events, written last by `TreeRepository.transaction`.
        self.outbox = Outbox()
        self._nodes: NodeStatements | None = None
        self._sessions: SessionStatements | None = None
        self._refs: RefStatements | None = None
        self._subtrees: SubtreeStatements | None = None

    async def bound(self) -> None:
        """Bound the next statements by what is left of the caller's deadline (none
        without one).

        Raises:
            DeadlineExceeded: it has passed.
        """
        if self._deadline is None:
            return
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise deadline_passed()
        await self._con.execute(sql.statement_timeout(math.ceil(left * 1000)))

    @property
    def nodes(self) -> NodeStatements:
        """The node reads: a session's node, its visibility and parent, its children."""
        if self._nodes is None:
            self._nodes = NodeStatements(self._con)
        return self._nodes

    @property
    def sessions(self) -> SessionStatements:
        """Creation and commit, metadata, status, label and config."""
        if self._sessions is None:
            self._sessions = SessionStatements(self._con, self.outbox)
        return self._sessions

    @property
    def refs(self) -> RefStatements:
        """The refs: their ends, the ancestor test, insert and delete."""
        if self._refs is None:
            self._refs = RefStatements(self._con, self.outbox)
        return self._refs

    @property
    def subtrees(self) -> SubtreeStatements:
        """DeleteSubtree's lock and hide of a subtree."""
        if self._subtrees is None:
            self._subtrees = SubtreeStatements(self._con, self.outbox)
        return self._subtrees
