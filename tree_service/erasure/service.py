"""DeleteSubtree (the hide, one transaction) and the erasure job's rounds."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from stello.db.maintenance import SpaceNode
from stello.db.tasks import ended_well, to_the_end
from stello.errors import DeadlineExceeded, ResourceExhausted, session_not_found
from stello.settings import MAX_MESSAGE_BYTES
from tree_service.unit import TreeRepository, TreeTx, deadline_passed

log = logging.getLogger(__name__)

# A DeleteSubtree reply's size: each id a field tag, a length and 36 characters, and
# room for the count.
DELETED_ID_BYTES = 38
DELETE_REPLY_OVERHEAD = 16


@dataclass(frozen=True, slots=True)
class ReplyFit:
    """Whether a DeleteSubtree's ids fit its reply: under the server's limit and the
    caller's own (`max_reply_bytes`, 0 = none), unless it asked for the count alone."""

    server_limit: int
    caller_limit: int
    session_id: uuid.UUID
    count_only: bool

    def check(self, count: int) -> None:
        """Refuse (RESOURCE_EXHAUSTED) `count` ids that would not fit."""
        if self.count_only:
            return
        size = DELETED_ID_BYTES * count + DELETE_REPLY_OVERHEAD
        limit, name = self.server_limit, "STELLO_MAX_MESSAGE_BYTES"
        if 0 < self.caller_limit < limit:
            limit, name = self.caller_limit, "max_reply_bytes"
        if size > limit:
            sessions = "1 session" if count == 1 else f"{count} sessions"
            raise ResourceExhausted(
                f"session {self.session_id} has {sessions} in its subtree: their ids "
                f"({size} bytes: {DELETED_ID_BYTES} per session and {DELETE_REPLY_OVERHEAD} "
                f"more) would not fit the reply ({name} = {limit}); nothing was deleted. Set "
                "count_only to answer their count alone"
            )


class ErasureService:
    """DeleteSubtree and the erasure of what it hid, over a repository."""

    def __init__(
        self,
        repository: TreeRepository,
        *,
        erase_batch: int = 500,
        max_reply_bytes: int = MAX_MESSAGE_BYTES,
        on_hidden: Callable[[], None] = lambda: None,
    ) -> None:
        self._repo = repository
        self._max_reply_bytes = max_reply_bytes
        self._erase_batch = erase_batch
        # Called after a DeleteSubtree hid sessions: wakes the erasure job.
        self._on_hidden = on_hidden

    async def delete_subtree(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        *,
        count_only: bool = False,
        reply_limit: int = 0,
        deadline: float | None = None,
    ) -> list[uuid.UUID]:
        """Hide a session and its descendants from every read and write in one transaction
        (their SUBTREE_DELETED events with it) and wake the erasure job, which erases them
        and all they own in batches; the ids, the session first (DESIGN §4.8).

        Unless `count_only` (the reply then carries their count alone), a subtree whose ids
        would not fit the reply (`reply_limit`, the caller's `max_reply_bytes`, under the
        server's own; 0 = the server's) is refused before anything is hidden, and again
        before the commit if the sessions found late make it so: the transaction rolls back.

        The caller's `deadline` (a `time.monotonic()` time) bounds every statement (a wait
        for a row lock ends at it: `TreeRepository.transaction`) and is checked before the
        commit: passed, the transaction rolls back (DEADLINE_EXCEEDED, nothing hidden) and
        its connection goes back to the pool. The caller
        leaving meanwhile does not cut the transaction (`stello.db.tasks.to_the_end`): it ends
        rolled back, or committed when the deadline passed during the commit itself, and
        the log says which.
        """
        fits = ReplyFit(self._max_reply_bytes, reply_limit, session_id, count_only)

        async def work(tx: TreeTx) -> list[uuid.UUID]:
            locked = await tx.subtrees.lock_subtree(space_id, session_id)
            if not locked:
                raise session_not_found(session_id)
            fits.check(len(locked))
            await tx.bound()
            hidden = await tx.subtrees.hide_subtree(space_id, session_id, locked)
            fits.check(len(hidden))
            if deadline is not None and time.monotonic() >= deadline:
                raise deadline_passed()
            return hidden

        def said(done: asyncio.Future[list[uuid.UUID]]) -> None:
            if ended_well(done):
                self._on_hidden()
                log.info("DeleteSubtree of %s: committed as its caller left", session_id)
            elif done.cancelled():
                log.info("DeleteSubtree of %s: cancelled, rolled back", session_id)
            elif isinstance(done.exception(), DeadlineExceeded):
                log.info(
                    "DeleteSubtree of %s: its caller's deadline passed before the commit; "
                    "rolled back, nothing deleted",
                    session_id,
                )
            else:
                log.error(
                    "DeleteSubtree of %s failed after its caller left; rolled back",
                    session_id,
                    exc_info=done.exception(),
                )

        hidden = await to_the_end(self._repo.transaction(work, deadline), said)
        self._on_hidden()
        return hidden

    async def erase_hidden(
        self, *, wait: bool = False, space_id: uuid.UUID | None = None
    ) -> int | None:
        """Erase every session DeleteSubtree hid (with `space_id`, in that space alone, every
        statement pinned to it), batch by batch (deepest first, each batch its own
        transaction); how many went, None when another replica is erasing (or when, without
        `wait`, rows it needed stayed held by others: the next round goes on)."""
        erased = 0
        while True:
            batch = await self._repo.erasure.erase_batch(
                self._erase_batch, wait=wait, space_id=space_id
            )
            if batch is None:
                return erased or None
            if batch == 0:
                break
            erased += batch
        if erased and space_id is None:
            log.debug("erased %d deleted sessions", erased)  # routine: every DeleteSubtree
        elif erased:
            log.info("erased %d deleted sessions of space %s", erased, space_id)
        return erased

    async def spaces(self) -> list[SpaceNode]:
        """Every space: what a round done space by space goes over."""
        return await self._repo.spaces()

    async def erase_space(self, space_id: uuid.UUID) -> int | None:
        """`erase_hidden` in one space: the erasure's fallback when its look across spaces
        fails (a node out of reach, `Eraser`)."""
        return await self.erase_hidden(space_id=space_id)
