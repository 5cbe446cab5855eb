"""Compression inside a turn: incremental, bounded, rare (DESIGN §4.3).

A turn compresses when its context would reach the threshold of the window
(80%), or when BeginTurn's window could not hold the whole tail after the
summary. It then evicts the window's oldest tool groups until the records left
take at most the low water mark (40%) — and at most half the room the
threshold leaves them beside the fixed parts (system prompt, identity,
insight, summary, tool schemas, the user message) — and the context fits the
threshold with room for the new summary, and folds what it evicted — and, when the window was
short, the records between the summary and the window, read newest first —
into the previous summary, one call per chunk (`agent_gateway.history.folding`).

A turn makes at most `CALLS_PER_TURN` compressor calls in all (its tool loop
rechecks the budget before every model call and may compress again with what
is left). A tail that needs more (a bulk import, a first turn after a long
append) is caught up lossily: the newest evicted records are folded, the older
ones named by count in the summary, which is marked lossy; after the commit a
background fold (`agent_gateway.history.background_fold`) replaces it by a complete
one. The hysteresis: after a compression, the next one is at least that half
of the room away in new conversation (the threshold minus the fixed parts,
halved), however long the history.

A fold that fails — the provider's error, or an answer with no text
(`folding.EmptyAnswer`) — fails the turn: nothing is stored, the previous
summary stays, and no record leaves the context without a summary of it.
Its model calls are made knowing the turn's caller's deadline, as the turn's own
are (`agent_gateway.llm.deadlines`): a provider's wait past it fails the fold at once,
with the provider's status.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.budget import MESSAGE_OVERHEAD, Counter, Window
from agent_gateway.history.context import Record, Summary, TurnContext
from agent_gateway.history.folding import CallBudget, Folder, Packer
from agent_gateway.history.records import context_record
from agent_gateway.llm.deadlines import bounded
from agent_gateway.llm.prompts.config import SessionPrompts
from stello.storage.v1 import storage_pb2

CALLS_PER_TURN = 3
"""Compressor calls one turn may make (its tool loop included)."""
OLDER_PAGE = 100
"""Records per page when reading back from the window's start."""


class TurnCompression:
    """Folds a turn's oldest records into its summary, within a call budget."""

    def __init__(
        self, storage: StorageClient, folder: Folder, prompts: SessionPrompts, counter: Counter
    ) -> None:
        self._storage = storage
        self._folder = folder
        self._prompts = prompts
        self._counter = counter

    def over(self, ctx: TurnContext, window: Window) -> bool:
        """Whether the context would reach the threshold."""
        return self._counter.messages(ctx.messages(), ctx.tools) > window.threshold

    async def compress(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        ctx: TurnContext,
        calls: CallBudget,
        unread: tuple[int, int] | None = None,
    ) -> Summary | None:
        """Compress `ctx` (see the module docstring); the new summary, now in `ctx`, or None
        when there was nothing to fold or no call left.

        Args:
            unread: (first seq after the summary, first seq of the window) when the
                window does not reach back to the summary: those records are folded
                too, newest first.
        """
        window = self._folder.window
        count = self._groups_to_evict(ctx, window)
        if calls.remaining <= 0 or (count == 0 and unread is None):
            return None
        prompt = await self._prompts.compressor(caller, space_id, session_id)
        capacity = self._folder.capacity(prompt)
        previous = ctx.summary
        covered = previous.covered_until_seq if previous else 0
        evicted = [record for record in ctx.evict(count) if record.seq > covered]
        first_after = unread[0] if unread else (evicted[0].seq if evicted else covered + 1)
        last = evicted[-1].seq if evicted else unread[1] - 1 if unread else covered
        packer = Packer(capacity, calls.remaining)
        for record in reversed(evicted):
            if not packer.add(self._folder.line(record, capacity)):
                break
        if unread is not None and not packer.full:
            older = self._older(caller, space_id, session_id, covered, unread[1])
            async with aclosing(older):
                async for record in older:
                    if not packer.add(self._folder.line(record, capacity)):
                        break
        first_folded = packer.first_seq
        if first_folded is None:
            return None
        omitted = first_folded - first_after if packer.full else 0
        text = previous.text if previous else None
        for i, chunk in enumerate(packer.in_order()):
            calls.take()
            with bounded(caller.deadline):
                text = await self._folder.fold(
                    text,
                    chunk,
                    prompt=prompt,
                    what=f"a fold of session {session_id}'s history during a turn",
                    omitted=omitted if i == 0 else 0,
                )
        lossy = omitted > 0 or (previous is not None and previous.lossy)
        summary = Summary(text or "", last, lossy)
        ctx.use(summary)
        return summary

    def _groups_to_evict(self, ctx: TurnContext, window: Window) -> int:
        """How many of the oldest evictable groups go: until the window's records take at
        most the low water mark (and half the room the threshold leaves them) and the
        context, with a summary of the largest size, fits the threshold."""
        sent = {id(record) for record in ctx.records()}
        costs = [
            sum(self._counter.message(r.to_message()) for r in group if id(r) in sent)
            for group in ctx.evictable()
        ]
        records = sum(self._counter.message(r.to_message()) for r in ctx.window if id(r) in sent)
        total = self._counter.messages(ctx.messages(), ctx.tools)
        now = self._counter.text(ctx.summary.text) + MESSAGE_OVERHEAD if ctx.summary else 0
        growth = max(0, window.summary_tokens + MESSAGE_OVERHEAD - now)
        # The records left take at most the low water mark, and at most half of what the
        # threshold leaves beside everything else: the next compression is that far away.
        others = total - records + growth
        target = min(window.low_water, max(0, (window.threshold - others) // 2))
        count = 0
        while count < len(costs) and (records > target or total + growth > window.threshold):
            records -= costs[count]
            total -= costs[count]
            count += 1
        return count

    async def _older(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, after: int, before: int
    ) -> AsyncGenerator[Record, None]:
        """The records between two seqs (exclusive), newest first, page by page."""
        request = storage_pb2.ListRecordsRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            after_seq=after,
            before_seq=before,
            newest_first=True,
            limit=OLDER_PAGE,
        )
        while True:
            reply = await self._storage.list_records(caller, request)
            for record in reversed(reply.records):
                yield context_record(record)
            if not reply.next_page_token:
                return
            request.page_token = reply.next_page_token
