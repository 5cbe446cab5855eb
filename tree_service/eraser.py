"""The erasure job: sessions DeleteSubtree hid are erased in bounded batches (DESIGN §4.8).

DeleteSubtree answers once the subtree is hidden (one short transaction: every
read and write answers it as absent from then on); this job then deletes the
hidden sessions with everything that belongs to them (records, slots, lineage
rows, remembered replies), deepest first, at most `STELLO_TREE_ERASE_BATCH`
sessions per transaction. Its only state is the hidden rows themselves, so a
process killed mid-erasure loses nothing: any replica's next round (every
`STELLO_TREE_ERASE_INTERVAL_S`, and at once after each DeleteSubtree it serves)
goes on where it stopped. One replica erases at a time (a transaction-scoped
advisory lock). The tree app's background task, like the sweeper.
"""

from __future__ import annotations

from stello.periodic import Periodic
from tree_service.service import TreeService


class Eraser(Periodic):
    """A background task that erases hidden subtrees, on an interval and when woken."""

    task_name = "stello-tree-eraser"
    what = "erasure of deleted sessions"

    def __init__(self, service: TreeService, interval_s: float) -> None:
        super().__init__(interval_s)
        self._service = service

    async def run_once(self) -> int | None:
        """Erase what is hidden now; how many sessions went, None when another replica
        erases."""
        return await self._service.erase_hidden()
