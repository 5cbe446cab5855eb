"""The refs' SQL: their ends, the ancestor test, the from-session's lock, insert and delete.

`RefStatements` runs them on a unit of work's connection
(`tree_service.unit.TreeTx.refs`), each change's event queued in its outbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from stello.errors import session_not_found
from stello.stored.events import Event, Outbox

# The visible ones of sessions $2, each by one probe of the key: a generic plan
# of `id = ANY ($2)` read every session of a space its statistics called small.
REF_ENDS = """
SELECT s.id, s.root_id, s.depth
FROM (SELECT DISTINCT unnest($2::uuid[])) AS k (id)
CROSS JOIN LATERAL (
    SELECT id, root_id, depth FROM sessions
    WHERE space_id = $1 AND id = k.id AND provisional_until IS NULL
    LIMIT 1
) s
"""

# Whether $3 is an ancestor of $2: walk up from $2, stopping at $3. Each step
# is one probe of the key (a LATERAL ... LIMIT 1, as ANCESTORS walks), not a
# join: statistics that call the space small made it a hash join that read
# every session of the space at each level.
IS_ANCESTOR = """
WITH RECURSIVE up (parent_id) AS (
    SELECT s.parent_id
    FROM sessions s
    WHERE s.space_id = $1 AND s.id = $2
  UNION ALL
    SELECT p.parent_id
    FROM up
    CROSS JOIN LATERAL (
        SELECT a.parent_id FROM sessions a
        WHERE a.space_id = $1 AND a.id = up.parent_id
        LIMIT 1
    ) p
    WHERE up.parent_id <> $3
)
SELECT EXISTS (SELECT 1 FROM up WHERE up.parent_id = $3)
"""

# AddRef's first write: row-lock the from-session, so the INSERT_REF after it
# (a new statement, a new snapshot) sees every ref committed before it.
LOCK_REF_SOURCE = """
SELECT id
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR NO KEY UPDATE
"""

# A per-session order (no sequence spans spaces): max + 1 under the
# from-session's row lock; removals leave gaps, never duplicates.
INSERT_REF = """
INSERT INTO session_refs (space_id, from_id, to_id, position)
SELECT $1, $2, $3, COALESCE(max(r.position) + 1, 0)
FROM session_refs r
WHERE r.space_id = $1 AND r.from_id = $2
ON CONFLICT (space_id, from_id, to_id) DO NOTHING
RETURNING position
"""

DELETE_REF = """
DELETE FROM session_refs
WHERE space_id = $1 AND from_id = $2 AND to_id = $3
RETURNING position
"""


class RefStatements:
    """The refs' statements of one unit of work, on its connection and outbox."""

    def __init__(self, con: asyncpg.Connection, outbox: Outbox) -> None:
        self._con = con
        self.outbox = outbox

    async def ref_ends(
        self, space_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, tuple[uuid.UUID, int]]:
        """(root_id, depth) of each visible session among `ids`."""
        rows = await self._con.fetch(REF_ENDS, space_id, list(ids))
        return {r["id"]: (r["root_id"], r["depth"]) for r in rows}

    async def is_ancestor(
        self, space_id: uuid.UUID, session_id: uuid.UUID, candidate: uuid.UUID
    ) -> bool:
        """Whether `candidate` is an ancestor of `session_id`."""
        return bool(await self._con.fetchval(IS_ANCESTOR, space_id, session_id, candidate))

    async def lock_ref_source(self, space_id: uuid.UUID, from_id: uuid.UUID) -> bool:
        """Row-lock a visible from-session (serialising its ref order); False when absent."""
        return await self._con.fetchval(LOCK_REF_SOURCE, space_id, from_id) is not None

    async def insert_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> bool:
        """Add the ref last in the from-session's order unless present; whether it was added.

        The caller holds the from-session's row lock (`lock_ref_source`).
        """
        try:
            position = await self._con.fetchval(INSERT_REF, space_id, from_id, to_id)
        except asyncpg.ForeignKeyViolationError as exc:  # deleted since the statement's read
            gone = from_id if "from_id" in (exc.constraint_name or "") else to_id
            raise session_not_found(gone) from exc
        if position is None:
            return False
        self.outbox.add(space_id, Event("ref_added", from_id, other_id=to_id))
        return True

    async def delete_ref(self, space_id: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID) -> bool:
        """Remove the ref if present; whether it was there."""
        if await self._con.fetchval(DELETE_REF, space_id, from_id, to_id) is None:
            return False
        self.outbox.add(space_id, Event("ref_removed", from_id, other_id=to_id))
        return True
