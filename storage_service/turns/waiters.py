"""SQL of the line of ENQUEUE turns (`turn_waiters`, migration 0016; DESIGN §4.2).

A session's line is its tickets: read whole (it is capped, and expired tickets
are dropped whenever it is read), and written one ticket at a time, always
under the session's row lock that BeginTurn or LeaveTurnQueue took, so two
callers never number a ticket alike. Every statement pins the space and the
session; times are parameters (the transaction's time read with the lock),
never `now()` in a modification's WHERE (DESIGN §4.7).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

LINE = """
SELECT ticket, waiter, continuation, expires_at FROM turn_waiters
WHERE space_id = $1 AND session_id = $2
ORDER BY ticket
"""

DROP_EXPIRED = """
DELETE FROM turn_waiters WHERE space_id = $1 AND session_id = $2 AND expires_at <= $3
"""

ADD = """
INSERT INTO turn_waiters (space_id, session_id, ticket, waiter, continuation, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
"""

RENEW = """
UPDATE turn_waiters SET expires_at = $4 WHERE space_id = $1 AND session_id = $2 AND waiter = $3
"""

REMOVE = """
DELETE FROM turn_waiters WHERE space_id = $1 AND session_id = $2 AND waiter = $3
RETURNING expires_at
"""

# LeaveTurnQueue in one statement: whether the session exists, and whether a
# ticket still live was removed (the time is read outside the modification).
LEAVE = """
WITH gone AS (
    DELETE FROM turn_waiters WHERE space_id = $1 AND session_id = $2 AND waiter = $3
    RETURNING expires_at
)
SELECT EXISTS (SELECT 1 FROM sessions WHERE space_id = $1 AND id = $2
    AND provisional_until IS DISTINCT FROM 'infinity') AS found,
       EXISTS (SELECT 1 FROM gone WHERE expires_at > now()) AS left_line
"""


@dataclass(frozen=True, slots=True)
class Ticket:
    """One waiting call: its place, its id, whether it continues a turn, its expiry."""

    ticket: int
    waiter: uuid.UUID
    continuation: bool
    expires_at: datetime

    @property
    def order(self) -> tuple[bool, int]:
        """Its place in line: continuations first, then by ticket."""
        return (not self.continuation, self.ticket)


class WaiterRepository:
    """`turn_waiters`: the tickets of one session's line."""

    __slots__ = ("_con",)

    def __init__(self, con: asyncpg.Connection) -> None:
        self._con = con

    async def line(self, space_id: uuid.UUID, session_id: uuid.UUID) -> list[Ticket]:
        """Every ticket of the session, expired ones included, by ticket."""
        rows = await self._con.fetch(LINE, space_id, session_id)
        return [Ticket(r["ticket"], r["waiter"], r["continuation"], r["expires_at"]) for r in rows]

    async def drop_expired(self, space_id: uuid.UUID, session_id: uuid.UUID, now: datetime) -> None:
        """Remove the tickets that expired by `now` (their callers stopped renewing)."""
        await self._con.execute(DROP_EXPIRED, space_id, session_id, now)

    async def add(self, space_id: uuid.UUID, session_id: uuid.UUID, ticket: Ticket) -> None:
        """Put `ticket` in line."""
        await self._con.execute(
            ADD,
            space_id,
            session_id,
            ticket.ticket,
            ticket.waiter,
            ticket.continuation,
            ticket.expires_at,
        )

    async def renew(
        self, space_id: uuid.UUID, session_id: uuid.UUID, waiter: uuid.UUID, expires_at: datetime
    ) -> None:
        """Keep `waiter`'s ticket until `expires_at`."""
        await self._con.execute(RENEW, space_id, session_id, waiter, expires_at)

    async def remove(self, space_id: uuid.UUID, session_id: uuid.UUID, waiter: uuid.UUID) -> None:
        """Take `waiter`'s ticket out of line (its turn starts, or it is answered)."""
        await self._con.execute(REMOVE, space_id, session_id, waiter)

    async def leave(
        self, space_id: uuid.UUID, session_id: uuid.UUID, waiter: uuid.UUID
    ) -> tuple[bool, bool]:
        """(found, whether a live ticket was removed)."""
        row = await self._con.fetchrow(LEAVE, space_id, session_id, waiter)
        assert row is not None
        return bool(row["found"]), bool(row["left_line"])
