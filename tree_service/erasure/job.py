"""The erasure job's SQL: the hidden sessions of a space, deleted in batches, deepest first.

`erase_batch` erases one batch in the caller's transaction; `EraseRepository.erase_batch`
runs it in one of its own under the erasure's advisory lock, tried again a little later
while rows it needs are held by others (`tree_service.erasure.release`).
"""

from __future__ import annotations

import uuid
from functools import partial

import asyncpg

from stello.db.maintenance import across_spaces, bounded, within_space
from stello.db.pool import in_transaction
from stello.stored import reply_erasure
from tree_service.erasure import release
from tree_service.sql import ERASING

# -- The erasure job (spans spaces: maintenance) ---------------------------------

# A space with sessions being erased ($1 of them at most): one with a chunk of
# work the hides wrote (`session_erasures`, migration 0050).
ERASE_SPACES = """
SELECT DISTINCT d.space_id
FROM (SELECT space_id FROM session_erasures LIMIT $1) d
"""

# The next chunk of space $1: the one with the greatest smallest depth, the later of
# one hide's first (`session_erasures_deepest`, read backwards): no session being
# erased is below any of its ids but in it. Its last ids (a batch at most), the
# deepest, are the batch, erased deepest first. Only this job (one at a time) changes
# a chunk or a hidden row, so the chosen rows are still hidden when `ERASE_CLAIM`
# locks them.
ERASE_CHOOSE = """
SELECT e.root_id, e.chunk, e.ids
FROM session_erasures e
WHERE e.space_id = $1
ORDER BY e.min_depth DESC, e.chunk DESC
LIMIT 1
"""

# The chunk ($2, $3) without its erased tail ($4 the ids left), or gone with it. The
# ids left come whole from the job: Citus 13.2.2 crashes the backend (signal 11) on
# `SET ids = ids[1:$4]` in a statement routed to a shard.
ERASE_SHRINK = """
UPDATE session_erasures SET ids = $4::uuid[]
WHERE space_id = $1 AND root_id = $2 AND chunk = $3
"""
ERASE_DONE = """
DELETE FROM session_erasures WHERE space_id = $1 AND root_id = $2 AND chunk = $3
"""

# Of a batch's sessions ($2) that `ERASE_CLAIM` left out, those still hidden: held by
# another (roll back and try again). The others are gone already, and leave the chunk
# with the batch.
ERASE_HELD = f"""
SELECT count(*)
FROM unnest($2::uuid[]) AS b (id)
WHERE (SELECT true FROM sessions s
       WHERE s.space_id = $1 AND s.id = b.id
         AND s.provisional_until IS NOT DISTINCT FROM {ERASING}) IS NOT NULL
"""

# The chosen batch ($2), row-locked in id order: the order a Fork INHERIT
# locks its source and the holders of its segments in (storage's lineage,
# `LOCK_HOLDERS_BELOW`), some of which may be in the batch. A trim locks no
# hidden session (migration 0023; its statement may still meet one hidden
# after it began). SKIP LOCKED, as
# `READERS`: a row held by another is left out, and the job, finding fewer
# rows than it chose, rolls back and tries again a little later
# (`EraseRepository.erase_batch`); so it never waits while it holds a lock,
# and (unlike NOWAIT) no conflict is an ERROR in the server's log. Its
# patient tries wait for the readers (`READERS_WAITING`) BEFORE this claim,
# holding none of the batch; never for the batch itself.
#
# Each session of the batch ($2, sorted by id) is one primary-key probe whatever
# the statistics: a set condition (`id = ANY ($2)`) let the planner scan the
# space's sessions being erased when its statistics called the space small (a
# big space grown since the last ANALYZE), so every batch read all that waited
# behind it (30,000 for a batch of 100): an erasure quadratic in its size.
# "Being erased" is `IS NOT DISTINCT FROM` for the same reason (before migration
# 0050 `= 'infinity'` was the predicate of an index that offered a scan by space
# alone).
ERASE_CLAIM = f"""
SELECT c.id
FROM unnest($2::uuid[]) AS b (id)
CROSS JOIN LATERAL (
    SELECT s.id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = b.id AND s.provisional_until IS NOT DISTINCT FROM {ERASING}
    FOR UPDATE OF s SKIP LOCKED
) c
"""

# Before the DELETE, the batch gives up its records (storage's
# `stello_release_records`, migration 0009): rows that forks outside it still
# read through their lineage move, once, to one of them (DESIGN §4.4), and
# the batch's own segments and lineages go.
ERASE_RELEASE = """
SELECT stello_release_records($1, $2::uuid[], NULL)
"""

# The erasure job's form of `UNSOURCE`: every session forked from one of the
# claimed batch loses its source, the batch's own included: they then go one
# DELETE at a time (`ERASE_DELETE`), so no key among them may be left for the end
# of one statement to settle. `ERASE_FORKED` finds which of the batch ($2) are a
# source, each an index probe of `sessions_source` whatever the statistics (most
# are none); `ERASE_UNSOURCE` then runs for each that is ($2 one of them).
ERASE_FORKED = """
SELECT b.id
FROM unnest($2::uuid[]) AS b (id)
WHERE (SELECT true FROM sessions s WHERE s.space_id = $1 AND s.source_session_id = b.id
       LIMIT 1) IS NOT NULL
"""
ERASE_UNSOURCE = """
UPDATE sessions SET source_session_id = NULL
WHERE space_id = $1 AND source_session_id = $2
"""

# One session of the claimed batch ($2), by its primary key (run for each, deepest
# first, in one pipeline: `ERASE_CLAIM` says why not one set statement; a parent
# goes after its children, as its key is NO ACTION); records, slots, caches,
# configs, refs and the links of remembered replies follow by cascade.
ERASE_DELETE = f"""
DELETE FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NOT DISTINCT FROM {ERASING}
"""

# pg advisory lock key of the erasure job ("stelloer"): one replica erases at a time.
ERASE_LOCK_KEY = 0x7374656C6C6F6572


async def erase_batch(
    con: asyncpg.Connection, batch: int, *, wait: bool = True, space_id: uuid.UUID | None = None
) -> int:
    """In the caller's transaction (holding the erasure lock): erase up to `batch` of the
    deepest sessions being erased in one space (the tail of its deepest chunk of work),
    with what belongs to them; how many left the work (erased, or found gone already).

    It skips the batch's and its readers' rows that others hold and raises LocksBusy when
    it skipped one (roll back and try again); with `wait` it first waits for the readers,
    holding no row of the batch. So it never waits for a row lock while it holds one it
    releases (a trim whose statement began before a session was hidden may be waiting for
    it while holding a reader), and no conflict is an ERROR in the server's log. With
    `space_id` it erases in that space, every statement pinned to it (the fallback of a round
    whose look across spaces failed)."""
    if space_id is None:
        await across_spaces(con)  # a space with sessions being erased, of all: multi-shard
        spaces = await con.fetch(ERASE_SPACES, 1)
        if not spaces:
            return 0
        await within_space(con)
        space_id = spaces[0]["space_id"]
    else:
        await bounded(con)
    chunk = await con.fetchrow(ERASE_CHOOSE, space_id)
    if chunk is None:
        return 0
    kept, tail = _split(chunk["ids"], batch)
    chosen = list(reversed(tail))  # deepest first
    if wait:
        await con.fetch(release.READERS_WAITING, space_id, chosen)
    ids = [r["id"] for r in await con.fetch(ERASE_CLAIM, space_id, sorted(chosen))]
    claimed = set(ids)
    unclaimed = [i for i in chosen if i not in claimed]
    if unclaimed and await con.fetchval(ERASE_HELD, space_id, unclaimed):
        raise release.LocksBusy
    await release.lock_readers(con, space_id, ids)
    await con.execute(ERASE_RELEASE, space_id, ids)
    await reply_erasure.erase_linked(con, space_id, ids)
    forked = await con.fetch(ERASE_FORKED, space_id, ids)
    await con.executemany(ERASE_UNSOURCE, [(space_id, r["id"]) for r in forked])
    # Deepest first (as chosen): a parent goes after its children (its key is NO ACTION).
    await con.executemany(ERASE_DELETE, [(space_id, i) for i in chosen if i in claimed])
    await _shrink(con, space_id, chunk, kept)
    return len(chosen)


async def _shrink(
    con: asyncpg.Connection, space_id: uuid.UUID, chunk: asyncpg.Record, kept: list[uuid.UUID]
) -> None:
    """The chunk with only the ids it `kept` (ERASE_SHRINK), or gone when none are left."""
    key = (space_id, chunk["root_id"], chunk["chunk"])
    if kept:
        await con.execute(ERASE_SHRINK, *key, kept)
    else:
        await con.execute(ERASE_DONE, *key)


def _split(ids: list[uuid.UUID], batch: int) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """A chunk's ids as those it keeps and its last `batch` (the deepest)."""
    cut = max(len(ids) - batch, 0)
    return list(ids[:cut]), list(ids[cut:])


class EraseRepository:
    """The erasure job's transactions, on the pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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
                await con.execute(release.WAIT_SWEEP_LOCK, ERASE_LOCK_KEY)
            elif not await con.fetchval(release.TRY_SWEEP_LOCK, ERASE_LOCK_KEY):
                return None
            return await erase_batch(con, batch, wait=patient, space_id=space_id)

        # The batch's row locks skip rows others hold (`ERASE_CLAIM`, `release.READERS`):
        # when one was skipped the transaction rolls back and, a little later, tries
        # again; the patient tries first wait for the readers, holding none of the batch.
        return await release.with_back_off(
            lambda patient: in_transaction(self._pool, partial(work, patient=patient)),
            patient_tries=None if wait else release.PATIENT_TRIES,
        )
