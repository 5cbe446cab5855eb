"""The periodic sweep of expired provisional sessions (DESIGN §4.1).

Every `interval_s` the sweeper deletes provisional sessions past their
``provisional_until``, with everything that belongs to them, under a
transaction-scoped advisory lock that only one replica gets at a time (the
others skip that round). It is the tree app's background task: the kernel's
server factory starts it once the server is bound and stops it after the
graceful shutdown (tests may also drive one directly), never lazily from a
request.
"""

from __future__ import annotations

from stello.periodic import Periodic
from tree_service.models import SweptSession
from tree_service.service import TreeService


class Sweeper(Periodic):
    """A background task that sweeps on a fixed interval until stopped."""

    task_name = "stello-tree-sweeper"
    what = "provisional sweep"

    def __init__(self, service: TreeService, interval_s: float) -> None:
        super().__init__(interval_s)
        self._service = service

    async def run_once(self) -> list[SweptSession] | None:
        """Sweep now; the removed sessions, or None when another replica holds the lock."""
        return await self._service.sweep_expired()
