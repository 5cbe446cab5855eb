"""The space's events for readers (DESIGN §4.6): pages by position, and the retention purge.

Positions are handed out in commit order (`stello.stored.events`), so a page after a
position never misses an event that commits later. Knows nothing of gRPC.
"""

from __future__ import annotations

import uuid

from stello.db.periodic import Periodic
from stello.errors import FailedPrecondition, InvalidArgument
from stello.reasons import CURSOR_EXPIRED
from storage_service.events.repository import EventRows
from storage_service.unit import Database


class EventLog:
    """Pages of a space's events after a position."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def read(self, space_id: uuid.UUID, after: int | None, limit: int) -> EventRows:
        """Up to `limit` events after `after` (None: none, only the newest position).

        Raises:
            FailedPrecondition: CURSOR_EXPIRED, events after `after` were purged.
            InvalidArgument: `after` is beyond the space's newest position.
        """
        count = 0 if after is None else limit
        rows = await self._db.statement(lambda uow: uow.events.read(space_id, after or 0, count))
        if after is None:
            return rows
        if after < rows.purged_through:
            raise FailedPrecondition(
                f"events after position {after} were purged (retention); "
                "re-read the state and watch from the present",
                reason=CURSOR_EXPIRED,
            )
        if after > rows.last_position:
            raise InvalidArgument.field(
                "after_position",
                f"is beyond this space's newest event ({rows.last_position}); "
                "it is a position of another space",
            )
        return rows


class Purger(Periodic):
    """The storage app's background task: drops events past their retention, periodically."""

    task_name = "stello-storage-event-purge"
    what = "event purge"

    def __init__(self, db: Database, retention_s: float, interval_s: float) -> None:
        super().__init__(interval_s)
        self._db = db
        self._retention_s = retention_s

    async def run_once(self) -> int | None:
        """Purge now; how many events went, or None when another replica holds the lock. A
        node out of reach: space by space, the spaces on it skipped (`Periodic.by_space`)."""
        return await self.whole_or_by_space(
            lambda: self._db.transaction(lambda uow: uow.events.purge(self._retention_s)),
            self._db.spaces,
            self.purge_space,
        )

    async def purge_space(self, space_id: uuid.UUID) -> int | None:
        """The purge of one space, in its own transaction."""
        return await self._db.transaction(
            lambda uow: uow.events.purge_space(self._retention_s, space_id)
        )
