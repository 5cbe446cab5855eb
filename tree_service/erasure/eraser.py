"""The erasure job: sessions DeleteSubtree hid are erased in bounded batches (DESIGN §4.8).

DeleteSubtree answers once the subtree is hidden (one short transaction: every
read and write answers it as absent from then on); this job then deletes the
hidden sessions with everything that belongs to them (records, slots, lineage
rows, remembered replies), deepest first, at most `STELLO_TREE_ERASE_BATCH`
sessions per transaction. Its only state is the hidden rows themselves, so a
process killed mid-erasure loses nothing: any replica's next round (every
`STELLO_TREE_ERASE_INTERVAL_S`, and at once after each DeleteSubtree it serves)
goes on where it stopped. One replica erases at a time (a transaction-scoped
advisory lock). The tree app's background task, like the sweeper. When its look for a
space with hidden sessions (across spaces) fails because a node is out of reach, the
round erases space by space (`Periodic.by_space`): a space on a node that answers is
erased whatever another node's state.
"""

from __future__ import annotations

from stello.db.periodic import Periodic
from tree_service.erasure.service import ErasureService


class Eraser(Periodic):
    """A background task that erases hidden subtrees, on an interval and when woken."""

    task_name = "stello-tree-eraser"
    what = "erasure of deleted sessions"

    def __init__(self, service: ErasureService, interval_s: float) -> None:
        super().__init__(interval_s)
        self._service = service

    async def run_once(self) -> int | None:
        """Erase what is hidden now; how many sessions went, None when another replica
        erases. A node out of reach: space by space, those on it skipped."""
        service = self._service
        return await self.whole_or_by_space(
            service.erase_hidden, service.spaces, service.erase_space
        )
