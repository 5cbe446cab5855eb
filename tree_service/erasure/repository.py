"""DeleteSubtree's SQL: lock a visible subtree, hide it, and what other sessions show of it.

`SubtreeStatements` runs them on a unit of work's connection
(`tree_service.unit.TreeTx.subtrees`, used by DeleteSubtree and by retention's
deletes), the SUBTREE_DELETED events queued in its outbox.
"""

from __future__ import annotations

import uuid

import asyncpg

from stello.stored.events import Event, Outbox
from tree_service.sql import ERASING

# -- Erasure -------------------------------------------------------------------

# Row-locks the visible session and every descendant not already being erased
# (provisional ones included), and answers their ids: once held, no child can
# be created or committed under any of them (both need the parent's row lock).
# A child committed between this statement's snapshot and its lock is not in
# the set: `LOCK_MISSED` finds and locks it after the hide, in the same
# transaction, and it is hidden too.
#
# It reads the subtree, not the space, whatever the statistics: each session's
# children are one range of `sessions_parent` (LATERAL, OFFSET 0: not flattened
# into a join), then each is locked by one primary-key probe, in id order (the
# nested loop locks them in its outer side's order). As joins, when the
# statistics called the space small (a big space grown since the last ANALYZE),
# the planner hashed the whole space's sessions once per level and once for the
# lock (240,802 tuples to lock 100 three levels deep in a space of 30,000).
# The children of each of `parents` (`parent` its id), not being erased; the
# step of LOCK_SUBTREE's walk and the start of LOCK_MISSED's.
_CHILDREN_OF = f"""
    SELECT c.id
    FROM {{parents}}
    CROSS JOIN LATERAL (
        SELECT c.id FROM sessions c
        WHERE c.space_id = $1 AND c.parent_id = {{parent}}
          AND c.provisional_until IS DISTINCT FROM {ERASING}
        OFFSET 0
    ) c
"""
_SUBTREE_CHILDREN = _CHILDREN_OF.format(parents="subtree", parent="subtree.id")
# Each found session locked, unless a delete that held it first hid it: a lock that
# waited reads the row as that delete committed it (the condition is checked again on
# the newest version), so two deletes of one subtree at once hide it once (the second
# finds nothing: NOT_FOUND), and a delete of an ancestor leaves out what a delete below
# it hid first. Without the condition each answered every id and wrote its events.
_LOCK_FOUND = f"""
SELECT array_agg(locked.id)
FROM (
    SELECT l.id
    FROM (SELECT DISTINCT id FROM subtree ORDER BY id) f
    CROSS JOIN LATERAL (
        SELECT s.id FROM sessions s
        WHERE s.space_id = $1 AND s.id = f.id
          AND s.provisional_until IS DISTINCT FROM {ERASING}
        FOR UPDATE OF s
    ) l
) locked
"""
LOCK_SUBTREE = f"""
WITH RECURSIVE subtree (id) AS (
    SELECT s.id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2 AND s.provisional_until IS NULL
  UNION ALL
{_SUBTREE_CHILDREN}
)
{_LOCK_FOUND}"""

# Hides the locked set ($2) from every read and write at once; its ids by
# depth (the session first), then id, for DeleteSubtree's answer and its
# events (sorted here: 200,000 rows sort in Python in most of a second).
_HIDE = f"""
WITH hidden AS (
    UPDATE sessions s
    SET provisional_until = {ERASING}
    {{rows}}
    RETURNING s.id, s.depth
)
SELECT id, depth FROM hidden ORDER BY depth, id
"""

# A set of up to HIDE_PROBES_MAX: each row found by one primary-key probe
# (LATERAL) and updated by its tuple id, whatever the statistics. As a set
# condition (`id = ANY ($2)`) it was planned as a scan of the space's sessions
# when its statistics called the space small (a big space grown since the last
# ANALYZE: 60,000 tuples to hide 100 in a space of 30,000). The rows are
# locked, so their tuple ids hold.
HIDE_SUBTREE = _HIDE.format(
    rows="""FROM (
        SELECT l.ctid
        FROM unnest($2::uuid[]) AS h (id)
        CROSS JOIN LATERAL (
            SELECT v.ctid FROM sessions v WHERE v.space_id = $1 AND v.id = h.id OFFSET 0
        ) l
    ) t
    WHERE s.space_id = $1 AND s.ctid = t.ctid"""
)

# A bigger set as a set: the probes and the join back by tuple id cost a fifth
# more than the update itself at 200,000 sessions (bench/bench_delete.py:
# answered in 6.0 s, against 5.0 s), and a scan of the space, where stale
# statistics still choose one, is then a part of it.
HIDE_SUBTREE_SET = _HIDE.format(rows="WHERE s.space_id = $1 AND s.id = ANY ($2::uuid[])")
HIDE_PROBES_MAX = 10_000

# What other sessions show of the hidden set goes with the hide: their refs to
# it, and its id as their source (both one index probe per hidden session). The
# set's own refs and sources, and those of sessions another delete is erasing,
# are left to the erasure job: their sessions are hidden (`provisional_until` is
# ERASING, set just before), one probe by key per ref found. As `from_id <> ALL
# ($2)` the custom plan estimated each of the array's elements (0.2-0.25 s to plan
# a hide of 200,000, bench/bench_delete.py), and so it does `to_id = ANY ($2)` on
# `session_refs` (its ids repeat: most common values), so HIDE_REFS takes the set
# as an initplan's output, which the planner cannot see into (planned in 1 ms).
# UNSOURCE keeps a plain parameter: on Citus such a subquery in an UPDATE of
# `sessions` made its generic plan (a connection's sixth run) a multi-shard query,
# and its estimate of `sessions_source` is cheap (0.06 s at 200,000).
HIDE_REFS = f"""
DELETE FROM session_refs r
WHERE r.space_id = $1 AND r.to_id = ANY ((SELECT $2::uuid[])::uuid[])
  AND (SELECT f.provisional_until FROM sessions f WHERE f.space_id = $1 AND f.id = r.from_id)
      IS DISTINCT FROM {ERASING}
"""

# The children of the hidden set ($2) left out of it (committed while the set
# was being locked: their creates held a parent's lock first) and their
# descendants, row-locked as LOCK_SUBTREE does; their ids (NULL: none). One
# index probe per hidden session. A create that comes after the set's lock
# waits for it, then finds its parent gone; so each round finds only the
# children committed while the previous round's rows were being locked.
LOCK_MISSED = f"""
WITH RECURSIVE subtree (id) AS (
{_CHILDREN_OF.format(parents="unnest($2::uuid[]) AS p (id)", parent="p.id")}
  UNION ALL
{_SUBTREE_CHILDREN}
)
{_LOCK_FOUND}"""

# Sessions outside the set forked from one inside it lose their source (Citus
# allows no SET NULL key action on a key holding space_id): at the hide, and
# again for each batch (a fork made meanwhile of a hidden session cannot be,
# but the key needs none left). `IS NOT NULL`: `sessions_source` holds only
# the sessions that have a source (migration 0025), and a parameter array
# does not tell the planner so. Hidden sessions (the set's own, ERASING) are
# left to the erasure job (HIDE_REFS says why not by `id <> ALL ($2)`).
UNSOURCE = f"""
UPDATE sessions SET source_session_id = NULL
WHERE space_id = $1 AND source_session_id IS NOT NULL
  AND source_session_id = ANY ($2::uuid[])
  AND provisional_until IS DISTINCT FROM {ERASING}
"""


# The hidden set as the erasure job's work (`session_erasures`, migration 0050): one
# row per ERASE_CHUNK ids, by depth then id (`tree_service.erasure.job` takes them).
ERASURE_CHUNK = """
INSERT INTO session_erasures (space_id, root_id, chunk, min_depth, ids)
VALUES ($1, $2, $3, $4, $5::uuid[])
"""
ERASE_CHUNK = 1000

SUBTREE_EVENT_IDS = 1000
"""A SUBTREE_DELETED event names at most this many sessions: a larger subtree's deletion
writes several, with the same root, at consecutive positions (one transaction)."""


def erasure_chunks(
    space_id: uuid.UUID, session_id: uuid.UUID, rows: list[asyncpg.Record]
) -> list[tuple[uuid.UUID, uuid.UUID, int, int, list[uuid.UUID]]]:
    """`ERASURE_CHUNK`'s arguments for a hide of `session_id` whose hidden `rows` (id,
    depth) are sorted by depth, then id: ERASE_CHUNK ids each, with the first's depth."""
    starts = range(0, len(rows), ERASE_CHUNK)
    return [
        (space_id, session_id, n, rows[i]["depth"], [r["id"] for r in rows[i : i + ERASE_CHUNK]])
        for n, i in enumerate(starts)
    ]


class SubtreeStatements:
    """A subtree's lock and hide in one unit of work, on its connection and outbox."""

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self.outbox = outbox

    async def lock_subtree(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[uuid.UUID]:
        """Row-lock a visible session and its descendants not already being erased; their
        ids ([] = not visible)."""
        return list(await self._con.fetchval(LOCK_SUBTREE, space_id, session_id) or ())

    async def hide_subtree(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        locked: list[uuid.UUID],
        probes_max: int = HIDE_PROBES_MAX,
    ) -> list[uuid.UUID]:
        """Hide the locked subtree from every read and write, and leave it to the erasure
        job in chunks of its work; its ids by depth, the session first, named in
        SUBTREE_DELETED events. A round of
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
            hide = HIDE_SUBTREE if len(batch) <= probes_max else HIDE_SUBTREE_SET
            rows += await self._con.fetch(hide, space_id, batch)
            await self._con.execute(HIDE_REFS, space_id, batch)
            await self._con.execute(UNSOURCE, space_id, batch)
            batch = list(await self._con.fetchval(LOCK_MISSED, space_id, batch) or ())
            rounds += 1
        if rounds > 1:  # each round came sorted; sessions found late may be anywhere
            rows.sort(key=lambda r: (r["depth"], r["id"]))
        hidden = [r["id"] for r in rows]
        await self._con.executemany(ERASURE_CHUNK, erasure_chunks(space_id, session_id, rows))
        for start in range(0, len(hidden), SUBTREE_EVENT_IDS):
            chunk = tuple(hidden[start : start + SUBTREE_EVENT_IDS])
            self.outbox.add(space_id, Event("subtree_deleted", session_id, session_ids=chunk))
        return hidden
