"""The provisional sweep's SQL: the due sessions of every space, then per space their claim,
release and delete, in one transaction under the sweep's advisory lock."""

from __future__ import annotations

import uuid

import asyncpg

from stello.db.maintenance import across_spaces, bounded, within_space
from stello.db.pool import in_transaction
from stello.stored import idempotency, reply_erasure
from tree_service.erasure import release
from tree_service.models import SweptSession
from tree_service.sql import ERASING

# -- Sweep (spans spaces: admin maintenance) ------------------------------------

# The due provisional sessions of every space (unlocked): $1 older_than_s
# (0 = past provisional_until), $2 batch size. Sessions being erased are the
# erasure job's: their `sweep_at` is NULL (migration 0050), as a visible
# session's, so `sessions_sweep` holds the provisional ones only. The bound on
# `sweep_at` is a condition of its own, not a branch of the CASE, so a generic
# plan ends its range of the index at now() too: a CASE alone was a filter, and
# the scan read every provisional session of every space, those still being
# created included (2,100 index entries for 100 due).
_SWEEP_DUE = f"""
SELECT d.space_id, d.id
FROM sessions d
WHERE {{space}}d.sweep_at IS NOT NULL
  AND d.sweep_at < CASE WHEN $1::float8 > 0 THEN {ERASING}::timestamptz ELSE now() END
  AND CASE WHEN $1::float8 > 0
           THEN d.created_at < now() - make_interval(secs => $1::float8)
           ELSE true END
ORDER BY d.sweep_at, {{order}}d.id
LIMIT $2
"""
SWEEP_DUE = _SWEEP_DUE.format(space="", order="d.space_id, ")

# SWEEP_DUE in space $3 alone: a sweep's fallback when the read across spaces failed (a
# node out of reach: `stello.db.periodic.Periodic.by_space`), routed to the space's worker.
SWEEP_DUE_IN_SPACE = _SWEEP_DUE.format(space="d.space_id = $3\n  AND ", order="")

# The sweep goes space by space over the due pairs SWEEP_DUE read (unlocked):
# Citus locks rows only in a statement routed to one shard (DESIGN §4.7), so
# each space's due sessions are claimed, released and deleted by statements
# pinned to that space. Rows a CommitSession holds right now are skipped: it
# is making them visible (and a committed one is provisional no more). Then
# their readers are locked as the erasure job locks its batch's (`READERS`,
# SKIP LOCKED, `UNLOCKED_READER`): a sweep that finds one held rolls the
# space's work back to its savepoint and tries again a little later, so it
# never waits for a reader while it holds claimed rows (its patient tries
# wait for the readers before the claim). Each due session is one primary-key
# probe, in id order (the lock's order), whatever the statistics: as a set
# (`id = ANY ($2)`) the claim was planned on the sweep's index, reading every
# provisional session of every space for each space claimed (84,000 tuples to
# sweep 100 of 20 spaces beside 2,000 being created). The provisional test is a
# COALESCE of the row's own column, which no index holds.
SWEEP_CLAIM = f"""
SELECT l.id
FROM (SELECT DISTINCT c.id FROM unnest($2::uuid[]) AS c (id) ORDER BY 1) c
CROSS JOIN LATERAL (
    SELECT d.id FROM sessions d
    WHERE d.space_id = $1 AND d.id = c.id
      AND COALESCE(d.provisional_until, {ERASING}) <> {ERASING}
    FOR UPDATE OF d SKIP LOCKED
) l
"""

# The claimed sessions give up their records first (a provisional session can
# hold rows for forks: DESIGN §4.4, migration 0009); on Citus the call is
# delegated whole to the space's worker.
SWEEP_RELEASE = """
SELECT stello_release_records($1, $2::uuid[], NULL)
"""

# One claimed session ($2), by its primary key (run for each in one pipeline): a
# set condition (`id = ANY ($2)`) let the planner scan the space's sessions when
# its statistics called the space small (a big space grown since the last
# ANALYZE: 60,000 tuples to delete 100 in a space of 30,000). One at a time is
# the set's meaning: a provisional session is no parent and no source (a create
# or a fork needs a visible one), so no key among the claimed waits for the end
# of a statement; and each claimed row, locked and provisional, goes.
SWEEP_DELETE = """
DELETE FROM sessions s
WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NOT NULL
"""


# pg advisory lock key of the sweep ("stellosw"): one replica sweeps at a time.
SWEEP_LOCK_KEY = 0x7374656C6C6F7377


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

    return await release.with_back_off(attempt) or []


async def _sweep_claimed(
    con: asyncpg.Connection, space_id: uuid.UUID, ids: list[uuid.UUID], *, wait: bool
) -> list[SweptSession]:
    if wait:
        await con.fetch(release.READERS_WAITING, space_id, ids)
    claimed = [r["id"] for r in await con.fetch(SWEEP_CLAIM, space_id, ids)]
    if not claimed:
        return []
    await release.lock_readers(con, space_id, claimed)
    await con.execute(SWEEP_RELEASE, space_id, claimed)
    # Never visible: their request keys go whole, so a retried saga starts over.
    await reply_erasure.forget_linked(con, space_id, claimed)
    await con.executemany(SWEEP_DELETE, [(space_id, i) for i in claimed])
    return [SweptSession(space_id, i) for i in claimed]


class SweepRepository:
    """The sweep's transactions, on the pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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
                await con.execute(release.WAIT_SWEEP_LOCK, SWEEP_LOCK_KEY)
            elif not await con.fetchval(release.TRY_SWEEP_LOCK, SWEEP_LOCK_KEY):
                return None
            due: dict[uuid.UUID, list[uuid.UUID]] = {}
            if space_id is None:
                await across_spaces(con)  # the due sessions of every space: multi-shard
                rows = await con.fetch(SWEEP_DUE, older_than_s, batch)
                await within_space(con)
            else:
                await bounded(con)
                rows = await con.fetch(SWEEP_DUE_IN_SPACE, older_than_s, batch, space_id)
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
            return list(await con.fetch(SWEEP_DUE, older_than_s, limit))

        rows = await in_transaction(self._pool, work)
        return [SweptSession(r["space_id"], r["id"]) for r in rows]

    async def purge_idempotency_keys(self, space_id: uuid.UUID | None = None) -> None:
        """Drop request_id keys past their 24 h with the sweep (all spaces, or `space_id`'s
        alone: the fallback of a round whose read across spaces failed)."""

        async def work(con: asyncpg.Connection) -> None:
            if await con.fetchval(release.TRY_SWEEP_LOCK, SWEEP_LOCK_KEY):
                await idempotency.purge_expired(con, space_id)

        await in_transaction(self._pool, work)
