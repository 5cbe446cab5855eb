"""The tree's SQL access: statements from `tree_service.sql`, rows in, domain values out.

`TreeRepository` runs single-statement reads on the pool and units of work in
one transaction (`transaction`), handing the work a `TreeTx` whose methods
each run one statement on that transaction's connection. Foreign-key
violations (a session removed by a concurrent delete) become domain errors
here, with the asyncpg error as their cause.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from operator import itemgetter
from typing import Any, TypeVar, cast

import asyncpg

from stello import idempotency
from stello.db import (
    SpaceNode,
    across_spaces,
    bounded,
    fetch,
    in_transaction,
    space_ids,
    within_space,
)
from stello.errors import DeadlineExceeded, NotFound, Unavailable, session_not_found
from stello.events import Event, EventKind, Outbox
from tree_service import sql
from tree_service.listing import LISTING_PLANS, PAIR_MATCHES, list_statement
from tree_service.models import (
    ROW_ID,
    ROW_TOP_AT,
    STATUSES,
    Node,
    SessionFilter,
    SessionSpec,
    Status,
    Summary,
    SweptSession,
    TreeEntry,
    TreeReadTooLong,
    TreeRow,
    TreeRows,
)

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


SUBTREE_EVENT_IDS = 1000
"""A SUBTREE_DELETED event names at most this many sessions: a larger subtree's deletion
writes several, with the same root, at consecutive positions (one transaction)."""

PROBE_MIN_S = 1.0
"""The shortest bound of the probe that follows a GetTree read past its own (one row)."""

_STATUS: dict[str, Status] = {s: s for s in STATUSES}
JsonObject = dict[str, Any]


RELEASE_TRIES = 12
"""Quick tries of an erasure batch, or of a sweep's space, whose row locks are held by
others: 11 back-offs of 20, 40, ... 220 ms (1.3 s in all) between them."""
RELEASE_BACKOFF_S = 0.02
PATIENT_TRIES = 20
"""Patient tries after the quick ones (each waits for the readers first, then the longest
back-off), before a background round gives up until its next one."""

# pg advisory lock key of the sweep ("stellosw"): one replica sweeps at a time.
SWEEP_LOCK_KEY = 0x7374656C6C6F7377
# ... and of the erasure job ("stelloer"): one replica erases at a time.
ERASE_LOCK_KEY = 0x7374656C6C6F6572


def to_node(row: asyncpg.Record) -> Node:
    """A topology node from a row selected with the node columns."""
    return Node(
        id=row["id"],
        parent_id=row["parent_id"],
        children=tuple(row["children"]),
        refs=tuple(row["refs"]),
        depth=row["depth"],
        index=row["sibling_index"] or 0,
        label=row["label"],
        source_session_id=row["source_session_id"],
        status=_STATUS[row["status"]],
    )


def to_tree_rows(rows: list[asyncpg.Record]) -> TreeRows:
    """The tree statements' rows split into the tops by (created_at, id) and the rest (hot:
    100,000s of rows). Ids are text: their order is the uuid order PostgreSQL sorts by."""
    tops: list[TreeRow] = []
    below: list[TreeRow] = []
    # Positional access, records kept as they came (a Record reads as a TreeRow): this
    # loop runs once per node.
    for row in cast(list[TreeRow], rows):
        (below if row[ROW_TOP_AT] is None else tops).append(row)
    tops.sort(key=itemgetter(ROW_TOP_AT, ROW_ID))
    return TreeRows(tops, below)


def to_summary(row: asyncpg.Record) -> Summary:
    """A ListAll summary from a row of the listing statements."""
    return Summary(
        id=row["id"],
        parent_id=row["parent_id"],
        label=row["label"],
        status=_STATUS[row["status"]],
        turn_count=row["turn_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_active_at=row["last_active_at"],
        pinned=row["pinned"],
        metadata=row["metadata"] or {},
    )


class LocksBusy(Exception):
    """A release found a row it needs locked by another (skipped, not waited for): its
    transaction (or savepoint) rolls back and tries again a little later."""


async def _lock_readers(
    con: asyncpg.Connection, space_id: uuid.UUID, released: list[uuid.UUID]
) -> None:
    """Lock the readers of `released` (locked already) in id order, skipping those another
    holds: LocksBusy when one was skipped (a patient try waited for them first)."""
    locked = [r["id"] for r in await con.fetch(sql.READERS, space_id, released)]
    if await con.fetchval(sql.UNLOCKED_READER, space_id, released, locked):
        raise LocksBusy


async def with_back_off(
    attempt: Callable[[bool], Awaitable[T]], *, patient_tries: int | None = PATIENT_TRIES
) -> T | None:
    """`attempt(wait)` until it does not raise LocksBusy: RELEASE_TRIES - 1 quick tries
    that skip every row others hold, each after a longer back-off, then patient ones
    (`wait`), which wait for the readers first, holding no row they release, and still
    skip the rows they release: up to `patient_tries` of them (None: until one succeeds).
    None when every try found a row held (the caller's next round tries again)."""
    limit = None if patient_tries is None else RELEASE_TRIES - 1 + patient_tries
    tried = 0
    while True:
        try:
            return await attempt(tried >= RELEASE_TRIES - 1)
        except LocksBusy:
            tried += 1
        if limit is not None and tried >= limit:
            return None
        await asyncio.sleep(RELEASE_BACKOFF_S * min(tried, RELEASE_TRIES - 1))


async def _sweep_space(
    con: asyncpg.Connection, space_id: uuid.UUID, ids: list[uuid.UUID]
) -> list[SweptSession]:
    """Claim, release and delete one space's due sessions (in the sweep's transaction, a
    savepoint per try): their readers are locked SKIP LOCKED, and when one was held the
    space's work rolls back and is tried again a little later (`with_back_off`); none
    when every try found one held (the next sweep tries again)."""

    async def attempt(wait: bool) -> list[SweptSession]:
        async with con.transaction():
            return await _sweep_claimed(con, space_id, ids, wait=wait)

    return await with_back_off(attempt) or []


async def _sweep_claimed(
    con: asyncpg.Connection, space_id: uuid.UUID, ids: list[uuid.UUID], *, wait: bool
) -> list[SweptSession]:
    if wait:
        await con.fetch(sql.READERS_WAITING, space_id, ids)
    claimed = [r["id"] for r in await con.fetch(sql.SWEEP_CLAIM, space_id, ids)]
    if not claimed:
        return []
    await _lock_readers(con, space_id, claimed)
    await con.execute(sql.SWEEP_RELEASE, space_id, claimed)
    # Never visible: their request keys go whole, so a retried saga starts over.
    await idempotency.forget_linked(con, space_id, claimed)
    await con.executemany(sql.SWEEP_DELETE, [(space_id, i) for i in claimed])
    return [SweptSession(space_id, i) for i in claimed]


async def erase_batch(
    con: asyncpg.Connection, batch: int, *, wait: bool = True, space_id: uuid.UUID | None = None
) -> int:
    """In the caller's transaction (holding the erasure lock): erase up to `batch` of the
    deepest sessions being erased in one space, with what belongs to them; how many went.

    It skips the batch's and its readers' rows that others hold and raises LocksBusy when
    it skipped one (roll back and try again); with `wait` it first waits for the readers,
    holding no row of the batch. So it never waits for a row lock while it holds one it
    releases (a trim whose statement began before a session was hidden may be waiting for
    it while holding a reader), and no conflict is an ERROR in the server's log. With
    `space_id` it erases in that space, every statement pinned to it (the fallback of a round
    whose look across spaces failed)."""
    if space_id is None:
        await across_spaces(con)  # a space with sessions being erased, of all: multi-shard
        spaces = await con.fetch(sql.ERASE_SPACES, 1)
        if not spaces:
            return 0
        await within_space(con)
        space_id = spaces[0]["space_id"]
    else:
        await bounded(con)
    chosen = [r["id"] for r in await con.fetch(sql.ERASE_CHOOSE, space_id, batch)]
    if not chosen:
        return 0
    if wait:
        await con.fetch(sql.READERS_WAITING, space_id, chosen)
    ids = [r["id"] for r in await con.fetch(sql.ERASE_CLAIM, space_id, sorted(chosen))]
    if len(ids) < len(chosen):
        raise LocksBusy
    await _lock_readers(con, space_id, ids)
    await con.execute(sql.ERASE_RELEASE, space_id, ids)
    await idempotency.erase_linked(con, space_id, ids)
    forked = await con.fetch(sql.ERASE_FORKED, space_id, ids)
    await con.executemany(sql.ERASE_UNSOURCE, [(space_id, r["id"]) for r in forked])
    # Deepest first (as chosen): a parent goes after its children (its key is NO ACTION).
    await con.executemany(sql.ERASE_DELETE, [(space_id, i) for i in chosen])
    return len(ids)


class TreeRepository:
    """Reads on the pool, and transactions handing out a `TreeTx`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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

    async def node(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node | None:
        """A visible session's node, or None."""
        rows = await fetch(self._pool, sql.GET_NODE, space_id, session_id)
        return to_node(rows[0]) if rows else None

    async def node_with_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[Node, Any, dict[str, str]] | None:
        """A visible session's node, its stored config JSON (None when never written) and
        its metadata, or None, in one statement."""
        rows = await fetch(self._pool, sql.GET_NODE_WITH_CONFIG, space_id, session_id)
        if not rows:
            return None
        return to_node(rows[0]), rows[0]["config"], rows[0]["metadata"] or {}

    async def roots(self, space_id: uuid.UUID) -> list[Node]:
        """Every visible root, by (created_at, id)."""
        return [to_node(r) for r in await fetch(self._pool, sql.LIST_ROOTS, space_id)]

    async def ancestry(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Node]:
        """The visible session then its ancestors nearest first; [] when not visible."""
        rows = await self._walk(sql.ANCESTRY, space_id, session_id)
        return [to_node(r) for r in rows]

    async def _walk(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """The rows of a walk up a chain, planned under WALK_PLANS (see tree_service.sql)."""

        async def walk(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await con.execute(sql.WALK_PLANS)
            return list(await con.fetch(query, *args))

        return await in_transaction(self._pool, walk)

    async def visible(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Whether the session is visible (one probe of its key)."""
        return bool(await fetch(self._pool, sql.VISIBLE_PARENT, space_id, session_id))

    async def token_key(self) -> bytes:
        """The key page tokens are signed with (migration 0031: one per deployment)."""
        rows = await fetch(self._pool, sql.TOKEN_KEY)
        if not rows:  # the row is made by the migration that makes the table
            raise RuntimeError("token_keys has no 'page_tokens' row: run `stello migrate`")
        return cast(bytes, rows[0]["secret"])

    async def ancestor_page(
        self, space_id: uuid.UUID, session_id: uuid.UUID, start: uuid.UUID, limit: int
    ) -> list[TreeEntry] | None:
        """`start` then up to `limit` of its ancestors, nearest first; None when the session
        is not visible, or `start` is not it nor a visible session of its tree above it."""
        rows = await self._walk(sql.ANCESTOR_PAGE, space_id, start, limit, session_id)
        if not rows:
            return None
        return [
            TreeEntry(
                r["id"],
                r["parent_id"],
                r["depth"],
                r["sibling_index"] or 0,
                r["label"],
                _STATUS[r["status"]],
                r["turn_count"],
                r["source_session_id"],
            )
            for r in rows
        ]

    async def summaries(
        self,
        space_id: uuid.UUID,
        status: Status | None,
        filters: SessionFilter,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None,
    ) -> list[Summary]:
        """Up to `limit` visible sessions that pass `status` and `filters`, by (created_at,
        id), after the key `after` (tree_service.listing: each filter an index range)."""
        if len(filters.metadata) > 1:
            filters = await self._rarest_first(space_id, filters, 2 * limit)
        query, args = list_statement(space_id, status, filters, limit, after)
        if status is None and filters == SessionFilter():
            rows = await fetch(self._pool, query, *args)
        else:

            async def planned(con: asyncpg.Connection) -> list[asyncpg.Record]:
                await con.execute(LISTING_PLANS)
                return list(await con.fetch(query, *args))

            rows = await in_transaction(self._pool, planned)
        return [to_summary(r) for r in rows]

    async def _rarest_first(
        self, space_id: uuid.UUID, filters: SessionFilter, cap: int
    ) -> SessionFilter:
        """`filters` with its metadata pairs ordered by how many sessions hold each (counted
        up to `cap`), the rarest first: the listing is driven by the first."""
        counts = []
        for key, value in filters.metadata:
            rows = await fetch(self._pool, PAIR_MATCHES, space_id, key, value, cap)
            counts.append(int(rows[0][0]))
        order = sorted(range(len(counts)), key=counts.__getitem__)
        return replace(filters, metadata=tuple(filters.metadata[i] for i in order))

    async def by_prefix(
        self, space_id: uuid.UUID, low: uuid.UUID, high: uuid.UUID, limit: int
    ) -> list[Summary]:
        """Up to `limit` visible sessions with ids in [low, high], by id."""
        rows = await fetch(self._pool, sql.RESOLVE_PREFIX, space_id, low, high, limit)
        return [to_summary(r) for r in rows]

    async def tree_rows(
        self,
        space_id: uuid.UUID,
        root_id: uuid.UUID | None,
        max_depth: int | None,
        cap: int,
        *,
        timeout_s: float,
    ) -> TreeRows:
        """Up to `cap` rows of the forest (or of `root_id`'s subtree).

        Raises:
            TreeReadTooLong: the read ran past `timeout_s`.
        """

        async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await con.execute(sql.tree_settings(max(1, int(timeout_s * 1000))))
            if max_depth is None:  # all of it: one read, no walk (sql.FOREST)
                if root_id is None:
                    return list(await con.fetch(sql.FOREST, space_id, cap))
                whole = await con.fetch(sql.ROOT_TREE, space_id, cap, root_id)
                if whole:
                    return list(whole)
            if root_id is not None:  # not a root, or a depth limit: walk down from the top
                return list(await con.fetch(sql.SUBTREE, space_id, max_depth, cap, root_id))
            return list(await con.fetch(sql.FOREST_TO_DEPTH, space_id, max_depth, cap))

        try:
            rows = await in_transaction(self._pool, work)
        except asyncpg.QueryCanceledError as exc:
            probe_s = max(timeout_s, PROBE_MIN_S)
            if not await self._answers(space_id, probe_s):
                raise Unavailable(
                    f"the database did not answer a read of this space within {probe_s:g} s "
                    "(a database node slow or out of reach, or the table locked); "
                    "retry the call"
                ) from exc
            raise TreeReadTooLong(str(exc)) from exc
        return to_tree_rows(rows)

    async def _answers(self, space_id: uuid.UUID, timeout_s: float) -> bool:
        """Whether one row of the space's sessions is read within `timeout_s`."""

        async def probe(con: asyncpg.Connection) -> None:
            await con.execute(sql.statement_timeout(int(timeout_s * 1000)))
            await con.fetchval(sql.PROBE_SPACE, space_id)

        try:
            await in_transaction(self._pool, probe)
        except (asyncpg.QueryCanceledError, Unavailable):
            return False
        return True

    async def stored(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> idempotency.Entry | None:
        """The live idempotency entry under the key, or None."""

        async def work(con: asyncpg.Connection) -> idempotency.Entry | None:
            return await idempotency.stored(con, space_id, scope, request_id)

        return await in_transaction(self._pool, work)

    async def config(self, space_id: uuid.UUID, session_id: uuid.UUID) -> tuple[bool, Any]:
        """(visible, stored config JSON or None)."""
        rows = await fetch(self._pool, sql.GET_CONFIG, space_id, session_id)
        return (True, rows[0]["config"]) if rows else (False, None)

    async def spaces(self) -> list[SpaceNode]:
        """Every space (the reference table `spaces`), for a round done space by space."""
        return await space_ids(self._pool)

    async def sweep(
        self,
        older_than_s: float,
        batch: int,
        *,
        wait: bool,
        space_id: uuid.UUID | None = None,
    ) -> list[SweptSession] | None:
        """Delete one batch of due provisional sessions, all spaces; None if another sweeps.

        With `wait` it queues behind a running sweep instead of giving up. The
        due sessions are read across spaces, then claimed and deleted space by
        space (statements pinned to one space, as Citus needs for row locks);
        one a CommitSession holds is skipped, so a batch may come back short. A space
        whose readers another holds is tried again a little later (`_sweep_space`). With
        `space_id`, that space's alone, every statement pinned to it (the fallback of a round
        whose read across spaces failed).
        """

        async def work(con: asyncpg.Connection) -> list[SweptSession] | None:
            if wait:
                await con.execute(sql.WAIT_SWEEP_LOCK, SWEEP_LOCK_KEY)
            elif not await con.fetchval(sql.TRY_SWEEP_LOCK, SWEEP_LOCK_KEY):
                return None
            due: dict[uuid.UUID, list[uuid.UUID]] = {}
            if space_id is None:
                await across_spaces(con)  # the due sessions of every space: multi-shard
                rows = await con.fetch(sql.SWEEP_DUE, older_than_s, batch)
                await within_space(con)
            else:
                await bounded(con)
                rows = await con.fetch(sql.SWEEP_DUE_IN_SPACE, older_than_s, batch, space_id)
            for row in rows:
                due.setdefault(row["space_id"], []).append(row["id"])
            swept: list[SweptSession] = []
            for space, ids in due.items():
                swept += await _sweep_space(con, space, ids)
            return swept

        return await in_transaction(self._pool, work)

    async def due(self, older_than_s: float, limit: int) -> list[SweptSession]:
        """The provisional sessions a sweep would remove now (dry run)."""

        async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
            await across_spaces(con)  # every space's: multi-shard
            return list(await con.fetch(sql.SWEEP_DUE, older_than_s, limit))

        rows = await in_transaction(self._pool, work)
        return [SweptSession(r["space_id"], r["id"]) for r in rows]

    async def erase_batch(
        self, batch: int, *, wait: bool, space_id: uuid.UUID | None = None
    ) -> int | None:
        """Erase up to `batch` of the deepest sessions being erased in one space, with
        everything that belongs to them and the replies remembered for them, in one
        transaction; how many went (0: none left), None when another replica erases or
        the batch's rows stayed held by others through every try (the next round goes on).

        With `wait` it queues behind a running erasure, and tries until the batch is erased,
        instead of giving up. With `space_id`, in that space alone (`erase_batch`).
        """

        async def work(con: asyncpg.Connection, patient: bool) -> int | None:
            if wait:
                await con.execute(sql.WAIT_SWEEP_LOCK, ERASE_LOCK_KEY)
            elif not await con.fetchval(sql.TRY_SWEEP_LOCK, ERASE_LOCK_KEY):
                return None
            return await erase_batch(con, batch, wait=patient, space_id=space_id)

        # The batch's row locks skip rows others hold (`sql.ERASE_CLAIM`, `sql.READERS`):
        # when one was skipped the transaction rolls back and, a little later, tries
        # again; the patient tries first wait for the readers, holding none of the batch.
        return await with_back_off(
            lambda patient: in_transaction(self._pool, partial(work, patient=patient)),
            patient_tries=None if wait else PATIENT_TRIES,
        )

    async def purge_idempotency_keys(self) -> None:
        """Drop request_id keys past their 24 h (all spaces), with the sweep."""

        async def work(con: asyncpg.Connection) -> None:
            if await con.fetchval(sql.TRY_SWEEP_LOCK, SWEEP_LOCK_KEY):
                await idempotency.purge_expired(con)

        await in_transaction(self._pool, work)


class TreeTx(idempotency.KeyStatements):
    """One transaction's statements; every method runs exactly one of them."""

    def __init__(self, con: asyncpg.Connection, deadline: float | None = None) -> None:
        self._con = con
        # The caller's deadline (`time.monotonic()`), None when unbounded.
        self._deadline = deadline
        # The changes' events, written last by `TreeRepository.transaction`.
        self.outbox = Outbox()

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

    def _changed(self, space_id: uuid.UUID, kind: EventKind, session_id: uuid.UUID) -> None:
        self.outbox.add(space_id, Event(kind, session_id))

    async def lock_parent(self, space_id: uuid.UUID, parent_id: uuid.UUID) -> bool:
        """Row-lock and bump a visible parent; False when there is none."""
        return await self._con.fetchrow(sql.LOCK_PARENT, space_id, parent_id) is not None

    async def create_session(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        spec: SessionSpec,
    ) -> Node:
        """Insert a session and its config in one statement; its new node.

        Raises:
            NotFound: the parent or the source is not a visible session of the space.
        """
        try:
            row = await self._con.fetchrow(
                sql.CREATE_SESSION,
                space_id,
                session_id,
                spec.parent_id,
                spec.label,
                spec.source_id,
                spec.provisional_ttl_s,
                spec.config,
            )
        except asyncpg.ForeignKeyViolationError as exc:
            raise NotFound("the parent or source session was just deleted") from exc
        assert row is not None
        if not row["parent_found"]:
            raise session_not_found(spec.parent_id, "parent session")
        if not row["source_found"]:
            raise session_not_found(spec.source_id, "source session")
        if spec.metadata:
            await self._con.execute(
                sql.INSERT_METADATA,
                space_id,
                session_id,
                list(spec.metadata),
                list(spec.metadata.values()),
            )
        if spec.provisional_ttl_s is None:  # visible at once: committed as it is born
            self._changed(space_id, "session_committed", session_id)
        return Node(
            id=row["id"],
            parent_id=row["parent_id"],
            children=(),
            refs=(),
            depth=row["depth"],
            index=row["sibling_index"] or 0,
            label=row["label"],
            source_session_id=row["source_session_id"],
            status=_STATUS[row["status"]],
        )

    async def metadata(self, space_id: uuid.UUID, session_id: uuid.UUID) -> dict[str, str]:
        """A session's metadata pairs."""
        rows = await self._con.fetch(sql.METADATA, space_id, session_id)
        return {r["key"]: r["value"] for r in rows}

    async def lock_metadata(self, space_id: uuid.UUID, session_id: uuid.UUID) -> bool:
        """Row-lock a visible session before its metadata changes; False when absent."""
        return await self._con.fetchval(sql.LOCK_METADATA, space_id, session_id) is not None

    async def change_metadata(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        written: dict[str, str],
        removed: list[str],
    ) -> None:
        """Write and remove a locked session's pairs, bump it, and say so (one event)."""
        if written:
            await self._con.execute(
                sql.UPSERT_METADATA, space_id, session_id, list(written), list(written.values())
            )
        if removed:
            await self._con.execute(sql.DELETE_METADATA, space_id, session_id, removed)
        await self._con.execute(sql.TOUCH, space_id, session_id)
        self._changed(space_id, "metadata_changed", session_id)

    async def lock_for_commit(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool, dict[str, str]] | None:
        """Row-lock a session and, if provisional, its parent, in id order; (provisional?,
        its metadata), None when absent."""
        rows = await self._con.fetch(sql.LOCK_FOR_COMMIT, space_id, session_id)
        target = next((r for r in rows if r["target"]), None)
        if target is None:
            return None
        return bool(target["provisional"]), target["metadata"] or {}

    async def touch(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Bump updated_at (and take the row lock)."""
        await self._con.execute(sql.TOUCH, space_id, session_id)

    async def commit_session(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node:
        """Give a locked provisional session its index and make it visible."""
        row = await self._con.fetchrow(sql.COMMIT_SESSION, space_id, session_id)
        assert row is not None
        self._changed(space_id, "session_committed", session_id)
        return to_node(row)

    async def node(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Node | None:
        """A visible session's node, or None."""
        row = await self._con.fetchrow(sql.GET_NODE, space_id, session_id)
        return to_node(row) if row else None

    async def visible_parent(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[bool, uuid.UUID | None]:
        """(visible, parent_id) of a session."""
        row = await self._con.fetchrow(sql.VISIBLE_PARENT, space_id, session_id)
        return (True, row["parent_id"]) if row else (False, None)

    async def children(
        self, space_id: uuid.UUID, parent_id: uuid.UUID, without: uuid.UUID | None = None
    ) -> list[Node]:
        """The visible children of a session by index, `without` left out."""
        rows = await self._con.fetch(sql.LIST_CHILDREN, space_id, parent_id, without)
        return [to_node(r) for r in rows]

    async def ref_ends(
        self, space_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, tuple[uuid.UUID, int]]:
        """(root_id, depth) of each visible session among `ids`."""
        rows = await self._con.fetch(sql.REF_ENDS, space_id, list(ids))
        return {r["id"]: (r["root_id"], r["depth"]) for r in rows}

    async def is_ancestor(
        self, space_id: uuid.UUID, session_id: uuid.UUID, candidate: uuid.UUID
    ) -> bool:
        """Whether `candidate` is an ancestor of `session_id`."""
        return bool(await self._con.fetchval(sql.IS_ANCESTOR, space_id, session_id, candidate))

    async def lock_ref_source(self, space_id: uuid.UUID, from_id: uuid.UUID) -> bool:
        """Row-lock a visible from-session (serialising its ref order); False when absent."""
        return await self._con.fetchval(sql.LOCK_REF_SOURCE, space_id, from_id) is not None

    async def insert_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> bool:
        """Add the ref last in the from-session's order unless present; whether it was added.

        The caller holds the from-session's row lock (`lock_ref_source`).
        """
        try:
            position = await self._con.fetchval(sql.INSERT_REF, space_id, from_id, to_id)
        except asyncpg.ForeignKeyViolationError as exc:
            raise NotFound("a session of the ref was just deleted") from exc
        if position is None:
            return False
        self.outbox.add(space_id, Event("ref_added", from_id, other_id=to_id))
        return True

    async def delete_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> bool:
        """Remove the ref if present; whether it was there."""
        if await self._con.fetchval(sql.DELETE_REF, space_id, from_id, to_id) is None:
            return False
        self.outbox.add(space_id, Event("ref_removed", from_id, other_id=to_id))
        return True

    async def set_status(self, space_id: uuid.UUID, session_id: uuid.UUID, status: Status) -> None:
        """Set a visible session's status (no bump and no event when unchanged)."""
        done = await self._con.execute(
            sql.SET_STATUS, space_id, session_id, status, datetime.now(UTC)
        )
        if done.rpartition(" ")[2] != "0":
            kind: EventKind = "session_archived" if status == "archived" else "session_unarchived"
            self._changed(space_id, kind, session_id)

    async def lock_status(self, space_id: uuid.UUID, session_id: uuid.UUID) -> Status | None:
        """Row-lock a visible session; its status, or None."""
        return cast(
            "Status | None", await self._con.fetchval(sql.LOCK_STATUS, space_id, session_id)
        )

    async def set_label(self, space_id: uuid.UUID, session_id: uuid.UUID, label: str) -> Node:
        """Replace a locked session's label; its node."""
        row = await self._con.fetchrow(sql.SET_LABEL, space_id, session_id, label)
        assert row is not None
        self._changed(space_id, "session_updated", session_id)
        return to_node(row)

    async def put_config(
        self, space_id: uuid.UUID, session_id: uuid.UUID, config: JsonObject
    ) -> JsonObject | None:
        """Overwrite a visible session's config; the stored JSON, or None if not visible."""
        try:
            rows = await self._con.fetch(sql.PUT_CONFIG, space_id, session_id, config)
        except asyncpg.ForeignKeyViolationError as exc:
            raise session_not_found(session_id) from exc
        if not rows:
            return None
        self._changed(space_id, "config_put", session_id)
        return cast("JsonObject", rows[0]["config"])

    async def lock_subtree(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[uuid.UUID]:
        """Row-lock a visible session and its descendants not already being erased; their
        ids ([] = not visible)."""
        return list(await self._con.fetchval(sql.LOCK_SUBTREE, space_id, session_id) or ())

    async def hide_subtree(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        locked: list[uuid.UUID],
        probes_max: int = sql.HIDE_PROBES_MAX,
    ) -> list[uuid.UUID]:
        """Hide the locked subtree from every read and write (the erasure job deletes it);
        its ids by depth, the session first, named in SUBTREE_DELETED events. A round of
        up to `probes_max` sessions finds each by key (`HIDE_SUBTREE`), a bigger one as
        a set (`HIDE_SUBTREE_SET`).

        A child committed under the subtree while it was being locked (its create held
        the parent's lock first) is locked and hidden with it, and so on down: a create
        under a locked session waits for this transaction, then finds its parent gone.
        """
        rows: list[asyncpg.Record] = []
        rounds = 0
        batch = locked
        while batch:
            hide = sql.HIDE_SUBTREE if len(batch) <= probes_max else sql.HIDE_SUBTREE_SET
            rows += await self._con.fetch(hide, space_id, batch)
            await self._con.execute(sql.HIDE_REFS, space_id, batch)
            await self._con.execute(sql.UNSOURCE, space_id, batch)
            batch = list(await self._con.fetchval(sql.LOCK_MISSED, space_id, batch) or ())
            rounds += 1
        if rounds > 1:  # each round came sorted; sessions found late may be anywhere
            rows.sort(key=lambda r: (r["depth"], r["id"]))
        hidden = [r["id"] for r in rows]
        for start in range(0, len(hidden), SUBTREE_EVENT_IDS):
            chunk = tuple(hidden[start : start + SUBTREE_EVENT_IDS])
            self.outbox.add(space_id, Event("subtree_deleted", session_id, session_ids=chunk))
        return hidden
