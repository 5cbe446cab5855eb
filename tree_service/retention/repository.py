"""SQL of retention (migration 0018): a space's policy, where its sweep stands, its roots' facts.

A subtree is every session with its root_id, and each fact of it is one index
probe (`sessions_root_activity`, `_archived`, `_pinned`): the newest activity
(the UTC day of the last turn, `last_active_day`, migration 0020: a day, so that
a turn's update of its session changes no indexed column and stays HOT),
whether a session is active, when the newest was archived, whether one is
pinned. A batch of roots is one statement over the roots index; no statement
walks a tree or reads a subtree whole, except the archive of a subtree, which
is bounded (`ARCHIVE`). Every statement pins the space; the batch's time is
read once (`now()` of its transaction) and passed as a parameter (DESIGN §4.7).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime

import asyncpg

from stello.stored.events import Event, Outbox
from tree_service.nodes.repository import WALK_PLANS

GET_POLICY = """
SELECT archive_after_days, delete_after_days FROM retention_policies WHERE space_id = $1
"""

PUT_POLICY = """
INSERT INTO retention_policies AS p (space_id, archive_after_days, delete_after_days)
VALUES ($1, $2, $3)
ON CONFLICT (space_id) DO UPDATE
SET archive_after_days = EXCLUDED.archive_after_days,
    delete_after_days = EXCLUDED.delete_after_days,
    updated_at = EXCLUDED.updated_at
RETURNING archive_after_days, delete_after_days
"""

# The policy row of a batch, locked for the batch's transaction: one sweeper of
# the space at a time ($2: skip it when another holds it), and the time.
LOCK_POLICY = """
SELECT archive_after_days, delete_after_days, cursor_created_at, cursor_id, now() AS now
FROM retention_policies
WHERE space_id = $1
FOR UPDATE
"""
TRY_LOCK_POLICY = LOCK_POLICY.rstrip() + " SKIP LOCKED\n"

SAVE_CURSOR = """
UPDATE retention_policies
SET cursor_created_at = $2, cursor_id = $3,
    last_pass_at = CASE WHEN $2::timestamptz IS NULL THEN $4 ELSE last_pass_at END
WHERE space_id = $1
"""

# The spaces with a policy (maintenance: the sweeper's round over every space).
POLICY_SPACES = """
SELECT space_id FROM retention_policies
WHERE archive_after_days IS NOT NULL OR delete_after_days IS NOT NULL
ORDER BY space_id
"""

# The first $2 roots (ROOTS), or the next $2 after the cursor ($3, $4: ROOTS_AFTER,
# written out so that a plan that knows no parameter starts its walk of the roots
# there; `$3 IS NULL OR ...` made every batch read the roots before it), each with
# its subtree's facts, one probe each. "Is there one" is a scalar
# subquery with LIMIT 1, not an EXISTS: the planner may run an EXISTS as a
# hashed subplan, which reads every active (or pinned) session of the space
# once to probe each root (20,001 tuples for one root of 20,000 children,
# with the statistics of a table holding many small trees).
_ROOTS = """
SELECT r.id, r.created_at, r.label,
       GREATEST(
           (SELECT max(x.last_active_day) FROM sessions x
            WHERE x.space_id = $1 AND x.root_id = r.id AND x.status = 'active'
              AND x.provisional_until IS NULL),
           (SELECT max(x.last_active_day) FROM sessions x
            WHERE x.space_id = $1 AND x.root_id = r.id AND x.status = 'archived'
              AND x.provisional_until IS NULL)) AS last_active,
       (SELECT true FROM sessions x
        WHERE x.space_id = $1 AND x.root_id = r.id AND x.status = 'active'
          AND x.provisional_until IS NULL
        LIMIT 1) IS NOT NULL AS active,
       (SELECT true FROM sessions x
        WHERE x.space_id = $1 AND x.root_id = r.id AND x.pinned
          AND x.provisional_until IS NULL
        LIMIT 1) IS NOT NULL AS pinned,
       (SELECT max(x.archived_at) FROM sessions x
        WHERE x.space_id = $1 AND x.root_id = r.id AND x.archived_at IS NOT NULL
          AND x.provisional_until IS NULL) AS archived_at
FROM sessions r
WHERE r.space_id = $1 AND r.parent_id IS NULL AND r.provisional_until IS NULL{after}
ORDER BY r.created_at, r.id
LIMIT $2
"""
ROOTS = _ROOTS.format(after="")
ROOTS_AFTER = _ROOTS.format(after="\n  AND (r.created_at, r.id) > ($3::timestamptz, $4::uuid)")

# At most $3 of the subtree's active sessions, then their archive (in the same
# transaction; the sessions of a subtree larger than a batch take several). A session
# with a turn under way at $4 (a live lease: its activity shows when the turn commits)
# is left active and its turn goes on, by both: ARCHIVE's own check covers a lease a
# BeginTurn took between the two. The rest of its subtree is archived: a check of the
# whole subtree for a lease first would read every active session of it, per batch.
ACTIVE_IN_SUBTREE = """
SELECT id FROM sessions
WHERE space_id = $1 AND root_id = $2 AND status = 'active' AND provisional_until IS NULL
  AND (turn_token IS NULL OR turn_expires_at <= $4)
ORDER BY depth, id
LIMIT $3
"""

ARCHIVE = """
UPDATE sessions SET status = 'archived', archived_at = $3, updated_at = $3
WHERE space_id = $1 AND id = ANY ($2::uuid[]) AND status = 'active'
  AND provisional_until IS NULL
  AND (turn_token IS NULL OR turn_expires_at <= $3)
RETURNING id
"""

# A pin that changes the flag (a no-op writes nothing, and no event); VISIBLE tells
# a no-op from a session that is not there.
SET_PINNED = """
UPDATE sessions SET pinned = $3
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL AND pinned <> $3
RETURNING pinned
"""

VISIBLE = """
SELECT true FROM sessions WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
"""


@dataclass(frozen=True, slots=True)
class Policy:
    """A space's retention policy; None: that step never happens."""

    archive_after_days: int | None = None
    delete_after_days: int | None = None

    @property
    def expires(self) -> bool:
        """Whether the policy archives or deletes anything (one put with neither step, as
        `stello retention set --none` writes, is no policy: nothing to judge)."""
        return self.archive_after_days is not None or self.delete_after_days is not None


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a sweep stands: the last root it judged (roots go by (created_at, id))."""

    created_at: datetime
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class LockedPolicy:
    """A batch's policy row, locked: the policy, the sweep's cursor and the batch's time."""

    policy: Policy
    cursor: Cursor | None
    now: datetime


@dataclass(frozen=True, slots=True)
class RootFacts:
    """What retention judges of a root's subtree, read by index."""

    id: uuid.UUID
    created_at: datetime
    label: str
    last_active: date
    """The UTC day of the subtree's newest turn."""
    active: bool
    pinned: bool
    archived_at: datetime | None

    @property
    def cursor(self) -> Cursor:
        """The cursor just past this root."""
        return Cursor(self.created_at, self.id)


def _policy(row: asyncpg.Record) -> Policy:
    return Policy(row["archive_after_days"], row["delete_after_days"])


class RetentionStatements:
    """Retention's statements on one connection (a transaction's, or the pool's)."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection | asyncpg.Pool) -> None:
        self._con = con

    async def policy(self, space_id: uuid.UUID) -> Policy | None:
        """The space's policy; None when none was set."""
        row = await self._con.fetchrow(GET_POLICY, space_id)
        return None if row is None else _policy(row)

    async def put_policy(self, outbox: Outbox, space_id: uuid.UUID, policy: Policy) -> Policy:
        """Set the space's policy, with its RETENTION_POLICY_PUT event; as stored."""
        row = await self._con.fetchrow(
            PUT_POLICY, space_id, policy.archive_after_days, policy.delete_after_days
        )
        assert row is not None
        outbox.add(space_id, Event("retention_policy_put"))
        return _policy(row)

    async def lock_policy(self, space_id: uuid.UUID, *, skip_locked: bool) -> LockedPolicy | None:
        """The policy row, locked for this transaction; None when there is none (or, with
        `skip_locked`, when another transaction holds it)."""
        row = await self._con.fetchrow(TRY_LOCK_POLICY if skip_locked else LOCK_POLICY, space_id)
        if row is None:
            return None
        cursor = None
        if row["cursor_id"] is not None:
            cursor = Cursor(row["cursor_created_at"], row["cursor_id"])
        return LockedPolicy(_policy(row), cursor, row["now"])

    async def save_cursor(self, space_id: uuid.UUID, cursor: Cursor | None, now: datetime) -> None:
        """Save where the sweep stands (None: the pass ended at `now`)."""
        await self._con.execute(
            SAVE_CURSOR,
            space_id,
            cursor.created_at if cursor else None,
            cursor.id if cursor else None,
            now,
        )

    async def policy_spaces(self) -> list[uuid.UUID]:
        """The spaces whose policy expires anything."""
        return [r["space_id"] for r in await self._con.fetch(POLICY_SPACES)]

    async def roots(self, space_id: uuid.UUID, after: Cursor | None, limit: int) -> list[RootFacts]:
        """The next `limit` roots after `after`, each with its subtree's facts (in a
        transaction: its plans are set to read by index, whatever the statistics say; an
        EXISTS over a subtree that looks big is otherwise a scan of the table from its
        start)."""
        await self._con.execute(WALK_PLANS)
        if after is None:
            rows = await self._con.fetch(ROOTS, space_id, limit)
        else:
            rows = await self._con.fetch(ROOTS_AFTER, space_id, limit, after.created_at, after.id)
        return [
            RootFacts(
                r["id"],
                r["created_at"],
                r["label"],
                r["last_active"],
                r["active"],
                r["pinned"],
                r["archived_at"],
            )
            for r in rows
        ]

    async def archive_some(
        self, space_id: uuid.UUID, root_id: uuid.UUID, now: datetime, limit: int
    ) -> list[uuid.UUID]:
        """Archive up to `limit` active sessions of the root's subtree, none with a turn under
        way at `now`; their ids."""
        found = await self._con.fetch(ACTIVE_IN_SUBTREE, space_id, root_id, limit, now)
        ids = [r["id"] for r in found]
        if not ids:
            return []
        return [r["id"] for r in await self._con.fetch(ARCHIVE, space_id, ids, now)]

    async def set_pinned(
        self, outbox: Outbox, space_id: uuid.UUID, session_id: uuid.UUID, pinned: bool
    ) -> bool:
        """Pin or unpin a visible session, with a SESSION_UPDATED event when the flag
        changed; False when there is no such session."""
        if await self._con.fetchrow(SET_PINNED, space_id, session_id, pinned) is not None:
            outbox.add(space_id, Event("session_updated", session_id))
            return True
        return await self._con.fetchrow(VISIBLE, space_id, session_id) is not None
