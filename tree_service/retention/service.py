"""Retention (issue #38): a space's sessions expire by its policy, a root's subtree at a time.

A root's subtree is judged as a whole, from facts each one index probe away
(`tree_service.retention.repository`), never by walking it: a pinned session keeps it; a
subtree idle (no turn nor unarchive in any session) for `archive_after_days` has
its active sessions archived; one whose sessions are all archived, the newest for
`delete_after_days`, is deleted through DeleteSubtree's own path (hidden with
its SUBTREE_DELETED events in the batch's transaction, then erased by the
erasure job: nothing of it is left). An active child therefore keeps its
ancestors, and archiving comes before deleting.

The sweep walks a space's roots in (created_at, id) order in batches of at
most `batch_roots` roots and `batch_sessions` archived sessions, each batch one
transaction that also saves where the sweep stands in the policy row, which it
holds locked (`SELECT ... FOR UPDATE`, pinned by space): a sweep killed between
batches goes on from its cursor, and two replicas never judge the same batch
(the periodic `RetentionSweeper` skips a space another holds: once per
deployment). Time is the batch transaction's `now()`, read with the lock and
passed on as a parameter; tests move it by writing timestamps, never by
sleeping.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

import asyncpg

from stello.db.maintenance import SpaceNode, across_spaces, bounded, space_ids
from stello.db.periodic import Periodic
from stello.db.pool import in_transaction
from stello.errors import FailedPrecondition, session_not_found
from stello.reasons import NO_RETENTION_POLICY
from stello.rules.retention_days import MAX_DAYS
from stello.stored.events import Event, Outbox
from tree_service.retention.repository import (
    Cursor,
    LockedPolicy,
    Policy,
    RetentionStatements,
    RootFacts,
)
from tree_service.unit import TreeTx

log = logging.getLogger(__name__)

Kind = Literal["archive", "delete"]
DRY_RUN_PAGE = 100


@dataclass(frozen=True, slots=True)
class Action:
    """What retention did (or would do) to one root's subtree."""

    root: RootFacts
    kind: Kind
    session_ids: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class Applied:
    """A run's actions; `done` when the pass reached the last root; `next_page`: a dry run's
    cursor for the next page (None: the last)."""

    actions: tuple[Action, ...]
    done: bool
    next_page: Cursor | None = None


def utc_day(moment: datetime) -> date:
    """The UTC day of `moment`."""
    return moment.astimezone(UTC).date()


def judge(policy: Policy, root: RootFacts, now: datetime) -> Kind | None:
    """What the policy does to a root's subtree at `now` (None: nothing). Idleness is
    counted in whole UTC days (the index holds the day of the last turn): a subtree is
    archived once its newest turn's day is before the day `archive_after_days` ago, so
    never early, at most a day late."""
    if root.pinned:
        return None
    days = policy.delete_after_days
    if days is not None and not root.active and root.archived_at is not None:
        if root.archived_at <= now - timedelta(days=days):
            return "delete"
    days = policy.archive_after_days
    if days is not None and root.active and root.last_active < utc_day(now - timedelta(days=days)):
        return "archive"
    return None


class RetentionService:
    """A space's policy, its application in batches, and the pinned flag."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        batch_roots: int,
        batch_sessions: int,
        on_hidden: Callable[[], None] = lambda: None,
    ) -> None:
        self._pool = pool
        self._batch_roots = batch_roots
        self._batch_sessions = batch_sessions
        self._on_hidden = on_hidden

    async def policy(self, space_id: uuid.UUID) -> Policy | None:
        """The space's policy; None when none was set."""
        return await RetentionStatements(self._pool).policy(space_id)

    async def put_policy(self, space_id: uuid.UUID, policy: Policy) -> Policy:
        """Set the space's policy (the sweep's cursor stays), with its event."""

        async def work(con: asyncpg.Connection) -> Policy:
            outbox = Outbox()
            stored = await RetentionStatements(con).put_policy(outbox, space_id, policy)
            await outbox.flush(con)
            return stored

        return await in_transaction(self._pool, work)

    async def set_pinned(self, space_id: uuid.UUID, session_id: uuid.UUID, pinned: bool) -> bool:
        """Pin or unpin a session, with its event when the flag changed; the flag as stored.

        Raises:
            NotFound: the session is not visible in the space.
        """

        async def work(con: asyncpg.Connection) -> bool:
            outbox = Outbox()
            found = await RetentionStatements(con).set_pinned(outbox, space_id, session_id, pinned)
            if outbox.pending:
                await outbox.flush(con)
            return found

        if not await in_transaction(self._pool, work):
            raise session_not_found(session_id)
        return pinned

    async def dry_run(self, space_id: uuid.UUID, after: Cursor | None) -> Applied:
        """What a sweep would do to the next page of roots after `after`; changes nothing."""

        async def read(con: asyncpg.Connection) -> Applied:
            statements = RetentionStatements(con)
            policy = await statements.policy(space_id)
            if policy is None:
                raise _no_policy(space_id)
            if not policy.expires:
                return Applied((), True)
            now: datetime = await con.fetchval("SELECT now()")
            roots = await statements.roots(space_id, after, DRY_RUN_PAGE)
            actions = tuple(
                Action(root, kind)
                for root in roots
                if (kind := judge(policy, root, now)) is not None
            )
            more = len(roots) == DRY_RUN_PAGE
            return Applied(actions, not more, roots[-1].cursor if more else None)

        return await in_transaction(self._pool, read)

    async def apply(self, space_id: uuid.UUID, max_batches: int = 0) -> Applied:
        """Run the space's sweep now, batch by batch, until its pass ends (or `max_batches`
        batches ran, when not 0); what it did.

        Raises:
            FailedPrecondition: reason NO_RETENTION_POLICY.
        """
        actions: list[Action] = []
        batches = 0
        while True:
            batch = await self.batch(space_id, skip_locked=False)
            if batch is None:
                raise _no_policy(space_id)
            actions.extend(batch.actions)
            batches += 1
            if batch.done or (max_batches and batches >= max_batches):
                return Applied(tuple(actions), batch.done)

    async def spaces(self) -> list[SpaceNode]:
        """Every space: what a round done space by space goes over (`RetentionSweeper`)."""
        return await space_ids(self._pool)

    async def sweep(self) -> int:
        """One round over every space with a policy (those another replica holds skipped);
        how many subtrees it archived or deleted."""
        changed = 0

        async def spaces(con: asyncpg.Connection) -> list[uuid.UUID]:
            await across_spaces(con)  # every space's policy: multi-shard
            return await RetentionStatements(con).policy_spaces()

        for space_id in await in_transaction(self._pool, spaces):
            changed += await self.sweep_space(space_id)
        if changed:
            log.info("retention archived or deleted %d subtrees", changed)
        return changed

    async def sweep_space(self, space_id: uuid.UUID) -> int:
        """The space's sweep to the end of its pass, unless another replica holds it (then
        it is that one's); how many subtrees it archived or deleted."""
        changed = 0
        while True:
            batch = await self.batch(space_id, skip_locked=True)
            if batch is None:
                return changed
            changed += len(batch.actions)
            if batch.done:
                return changed

    async def batch(self, space_id: uuid.UUID, *, skip_locked: bool) -> Applied | None:
        """One batch of the space's sweep in one transaction; None when the space has no
        policy (or, with `skip_locked`, another replica holds it)."""

        async def work(con: asyncpg.Connection) -> Applied | None:
            await bounded(con)  # a maintenance transaction: a node that never answers ends it
            tx = TreeTx(con)
            statements = RetentionStatements(con)
            locked = await statements.lock_policy(space_id, skip_locked=skip_locked)
            if locked is None:
                return None
            if not locked.policy.expires:  # nothing to judge: no root read, no cursor moved
                return Applied((), True)
            applied = await self._judge_batch(tx, statements, space_id, locked)
            if tx.outbox.pending:
                await tx.outbox.flush(con)
            return applied

        applied = await in_transaction(self._pool, work)
        if applied is not None and any(a.kind == "delete" for a in applied.actions):
            self._on_hidden()
        return applied

    async def _judge_batch(
        self,
        tx: TreeTx,
        statements: RetentionStatements,
        space_id: uuid.UUID,
        locked: LockedPolicy,
    ) -> Applied:
        """Judge and change the next roots after the cursor; save the cursor."""
        roots = await statements.roots(space_id, locked.cursor, self._batch_roots)
        cursor, budget, actions = locked.cursor, self._batch_sessions, []
        finished = True
        for root in roots:
            kind = judge(locked.policy, root, locked.now)
            if kind == "archive":
                ids = await statements.archive_some(space_id, root.id, locked.now, budget)
                for session_id in ids:
                    tx.outbox.add(space_id, Event("session_archived", session_id))
                actions.append(Action(root, kind, tuple(ids)))
                budget -= len(ids)
                if budget <= 0:  # its subtree may hold more: the next batch goes on with it
                    finished = False
                    break
            elif kind == "delete":
                locked_ids = await tx.subtrees.lock_subtree(space_id, root.id)
                if locked_ids:
                    hidden = await tx.subtrees.hide_subtree(space_id, root.id, locked_ids)
                    actions.append(Action(root, kind, tuple(hidden)))
            cursor = root.cursor
        done = finished and len(roots) < self._batch_roots
        await statements.save_cursor(space_id, None if done else cursor, locked.now)
        return Applied(tuple(actions), done)


def validate_days(value: int | None, name: str) -> str | None:
    """Why a policy's days are refused (None: fine)."""
    if value is not None and not 1 <= value <= MAX_DAYS:
        return f"{name} must be within 1..{MAX_DAYS} days, got {value}"
    return None


def _no_policy(space_id: uuid.UUID) -> FailedPrecondition:
    return FailedPrecondition(
        f"space {space_id} has no retention policy; set one first (PutRetention)",
        reason=NO_RETENTION_POLICY,
    )


class RetentionSweeper(Periodic):
    """The periodic sweep of every space's retention policy (one replica per space)."""

    task_name = "stello-tree-retention"
    what = "retention sweep"

    def __init__(self, service: RetentionService, interval_s: float) -> None:
        super().__init__(interval_s)
        self._service = service
        self._rounds = 0

    async def run_once(self) -> int:
        """One round over the spaces with a policy; how many subtrees changed (space by space
        when the read across spaces fails for a node out of reach). The first
        round is one interval after start: a restart does not sweep (a sweep a crash
        stopped goes on from its cursor at the next round)."""
        self._rounds += 1
        if self._rounds == 1:
            return 0
        service = self._service  # a node out of reach: space by space, those on it skipped
        return await self.whole_or_by_space(service.sweep, service.spaces, service.sweep_space)
