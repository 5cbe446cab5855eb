"""The periodic sweep of expired provisional sessions (DESIGN §4.1).

Every `interval_s` the sweeper deletes provisional sessions past their
``provisional_until``, with everything that belongs to them, under a
transaction-scoped advisory lock that only one replica gets at a time (the
others skip that round). It is the tree app's background task: the kernel's
server factory starts it once the server is bound and stops it after the
graceful shutdown (tests may also drive one directly), never lazily from a
request. When its read across spaces fails because a node is out of reach, the
round sweeps space by space (`Periodic.by_space`), each space's expired request keys
purged with it, skipping the spaces on that node.
"""

from __future__ import annotations

from stello.db.periodic import Periodic
from tree_service.models import SweptSession
from tree_service.sweep.service import SweepService


class Sweeper(Periodic):
    """A background task that sweeps on a fixed interval until stopped."""

    task_name = "stello-tree-sweeper"
    what = "provisional sweep"

    def __init__(self, service: SweepService, interval_s: float) -> None:
        super().__init__(interval_s)
        self._service = service

    async def run_once(self) -> list[SweptSession] | int | None:
        """Sweep now; the removed sessions, or None when another replica holds the lock. A
        node out of reach: space by space, those on it skipped (how many sessions went)."""
        service = self._service
        return await self.whole_or_by_space(
            service.sweep_expired, service.spaces, service.sweep_space
        )
