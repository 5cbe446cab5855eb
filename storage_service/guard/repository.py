"""SQL of the fork guard (STELLO-SPEC §4.11, DESIGN §4.5, migration 0008).

The counter is `sessions.last_fork_turn`, read and written under the session's
row lock, so the check and the record of a claim are one step for every
gateway process. Every statement filters by ``space_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

LOCK_GUARD = """
SELECT turn_count, last_fork_turn
FROM sessions
WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL
FOR UPDATE
"""

RECORD_FORK = """
UPDATE sessions SET last_fork_turn = $3 WHERE space_id = $1 AND id = $2
"""

# Puts the previous value back only while the claim is the last one, on a visible
# session only (a provisional one, or one being erased, is not found and not written).
RELEASE_FORK = """
WITH released AS (
    UPDATE sessions SET last_fork_turn = $4
    WHERE space_id = $1 AND id = $2 AND provisional_until IS NULL AND last_fork_turn = $3
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS NULL) AS found,
       EXISTS (SELECT 1 FROM released) AS released
"""


@dataclass(frozen=True, slots=True)
class GuardState:
    """A session's committed turns and the turn of its last fork claim (None = none)."""

    turn_count: int
    last_fork_turn: int | None


class GuardRepository:
    """Fork guard statements, on a unit of work's connection."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def lock(self, space_id: uuid.UUID, session_id: uuid.UUID) -> GuardState | None:
        """Lock a visible session's row; its guard state, or None."""
        row = await self._con.fetchrow(LOCK_GUARD, space_id, session_id)
        return None if row is None else GuardState(row["turn_count"], row["last_fork_turn"])

    async def record(self, space_id: uuid.UUID, session_id: uuid.UUID, turn: int) -> None:
        """Record a granted claim at `turn` (the row is locked by `lock`)."""
        await self._con.execute(RECORD_FORK, space_id, session_id, turn)

    async def release(
        self, space_id: uuid.UUID, session_id: uuid.UUID, claimed: int, previous: int | None
    ) -> tuple[bool, bool]:
        """(found, whether `claimed` was still the last claim and `previous` is back)."""
        row = await self._con.fetchrow(RELEASE_FORK, space_id, session_id, claimed, previous)
        assert row is not None  # a SELECT without FROM answers one row
        return bool(row["found"]), bool(row["released"])
