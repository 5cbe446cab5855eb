"""The release of sessions about to go: their readers locked without waiting, and tries again.

The erasure job's batches and the provisional sweep's claimed sessions give up
their records before they are deleted; both lock the readers of those records
(`READERS`, SKIP LOCKED) and, when one is held by another, roll back and try again a
little later (`with_back_off`), so neither waits for a row lock while it holds rows
it releases. Both hold an advisory lock (`TRY_SWEEP_LOCK`, `WAIT_SWEEP_LOCK`): one
replica at a time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

# The sessions reading rows that the released ones ($2) hold, the others, in id
# order: each holder's segments one range of `record_segments_holder`, each
# reader one primary-key probe, whatever the statistics (a set condition, `id =
# ANY (...)`, let the planner scan the space when its statistics called it
# small: 30,000 sessions for a batch's readers). Stable while the released ones
# are locked (a fork adding a reader key-shares a holder).
_READER_IDS = """
SELECT DISTINCT g.session_id AS id
FROM unnest($2::uuid[]) AS h (id)
CROSS JOIN LATERAL (
    SELECT g.session_id FROM record_segments g
    WHERE g.space_id = $1 AND g.holder_id = h.id AND g.session_id <> ALL ($2::uuid[])
    OFFSET 0
) g
ORDER BY 1
"""

# The readers of a release (the erasure job's batch, the sweep's claimed
# sessions), locked as `stello_release_records` then finds them (FOR NO KEY
# UPDATE, in id order: the nested loop locks them in its outer side's order).
# SKIP LOCKED: the job never waits for a row lock while
# it holds its batch, so it closes no cycle of waits (a trim whose statement
# began before a session was hidden may still wait for it in the batch; a
# fork holding a batch session's key share may wait for a trim that holds its
# source); `UNLOCKED_READER` then tells whether one was skipped, and the
# release backs off and tries again. Its patient tries first lock the readers
# waiting (`READERS_WAITING`, of the chosen or due sessions), before they
# claim any: held by a trim whose statement waits for a batch row, a reader
# was waited for while the batch was held, and the two deadlocked (seen on
# Citus); the pass after the claim then only finds a reader a fork added
# meanwhile.
_READERS = f"""
SELECT l.id
FROM ({_READER_IDS}) r
CROSS JOIN LATERAL (
    SELECT s.id FROM sessions s
    WHERE s.space_id = $1 AND s.id = r.id
    FOR NO KEY UPDATE OF s {{wait}}
) l
"""
READERS = _READERS.format(wait="SKIP LOCKED")
READERS_WAITING = _READERS.format(wait="")

# Whether a reader of the released sessions ($2) is not among the locked ($3)
# (a segment's session is a session: its key cascades from `sessions`): the
# readers as `READERS` finds them, each holder's one range of
# `record_segments_holder`, then those not locked (as storage's
# `UNLOCKED_FOR_TRIM`). Not a `LIMIT 1` probe of each holder's segments for one
# that is not locked: there is none but when a fork came meanwhile, and the
# planner, which takes a holder for its table's rows over its distinct holders,
# expected one early in a scan of the table. Under statistics that called the
# holders of a space 40 (ANALYZE's sample of test_release_reads' space says 38
# to 50), its custom plan was that scan, and under 10 its generic one too: each
# batch read every segment of the space (81,418 tuples, in one CI run through
# PgBouncer) where the range reads the released sessions' readers' (50).
UNLOCKED_READER = f"""
SELECT EXISTS (SELECT FROM ({_READER_IDS}) r WHERE r.id <> ALL ($3::uuid[]))
"""


# The advisory locks by which one replica sweeps, or erases, at a time (`SWEEP_LOCK_KEY`,
# `ERASE_LOCK_KEY`).
TRY_SWEEP_LOCK = """
SELECT pg_try_advisory_xact_lock($1)
"""

WAIT_SWEEP_LOCK = """
SELECT pg_advisory_xact_lock($1)
"""


T = TypeVar("T")


RELEASE_TRIES = 12
"""Quick tries of an erasure batch, or of a sweep's space, whose row locks are held by
others: 11 back-offs of 20, 40, ... 220 ms (1.3 s in all) between them."""
RELEASE_BACKOFF_S = 0.02
PATIENT_TRIES = 20
"""Patient tries after the quick ones (each waits for the readers first, then the longest
back-off), before a background round gives up until its next one."""


class LocksBusy(Exception):
    """A release found a row it needs locked by another (skipped, not waited for): its
    transaction (or savepoint) rolls back and tries again a little later."""


async def lock_readers(
    con: asyncpg.Connection, space_id: uuid.UUID, released: list[uuid.UUID]
) -> None:
    """Lock the readers of `released` (locked already) in id order, skipping those another
    holds: LocksBusy when one was skipped (a patient try waited for them first)."""
    locked = [r["id"] for r in await con.fetch(READERS, space_id, released)]
    if await con.fetchval(UNLOCKED_READER, space_id, released, locked):
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
