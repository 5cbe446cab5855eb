"""The slot and compression cache RPCs over the unit of work; knows nothing of gRPC.

Reads answer NotFound for a session that is absent or provisional; writes accept
provisional sessions (DESIGN §4.1). A put with an event is a transaction (the
event is its last statement); the cache's put writes none, so it is one statement.
ConsumeInsight reads and clears under the slot row's lock: of concurrent
consumers exactly one gets the insight.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from stello.errors import ResourceExhausted
from storage_service.models import (
    SLOT_NAMES,
    CompressionCache,
    SessionSlots,
    SlotName,
    session_not_found,
)
from storage_service.unit import Database, UnitOfWork

BATCH_REPLY_FRAMING_BYTES = 16
"""A BatchGetSlots reply's bytes besides its slots: next_index (at most 1 + 5) and a
margin."""


@dataclass(frozen=True, slots=True)
class SlotBatch:
    """BatchGetSlots' answer: the slots read, and the index of the first requested id
    left unread for the reply's bytes (0 = none was)."""

    slots: list[SessionSlots]
    next_index: int


class SlotService:
    """A session's system prompt, insight and memory, and its compression cache."""

    def __init__(self, db: Database, *, max_reply_bytes: int) -> None:
        self._db = db
        self._max_reply_bytes = max_reply_bytes

    async def get_slot(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slot: SlotName
    ) -> str | None:
        """One slot of a visible session; None = unset."""
        slots = await self._db.statement(lambda uow: uow.slots.get(space_id, session_id))
        if slots is None:
            raise session_not_found(session_id)
        return slots.get(slot)

    async def put_slot(
        self, space_id: uuid.UUID, session_id: uuid.UUID, slot: SlotName, content: str
    ) -> None:
        """Overwrite one slot ("" is a stored value)."""
        await self._db.transaction(lambda uow: uow.slots.put(space_id, session_id, slot, content))

    async def get_memory(
        self, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[str | None, int | None, int]:
        """The memory slot of a visible session, the seq it covers (None = unset) and its
        version (0 = never written)."""
        slots = await self._db.statement(lambda uow: uow.slots.get(space_id, session_id))
        if slots is None:
            raise session_not_found(session_id)
        return slots.memory, slots.memory_covered_until_seq, slots.memory_version

    async def put_memory(
        self, space_id: uuid.UUID, session_id: uuid.UUID, content: str, covered: int | None
    ) -> None:
        """Overwrite the memory; with `covered`, the seq it covers too."""
        if covered is None:
            await self.put_slot(space_id, session_id, "memory", content)
            return
        await self._db.transaction(
            lambda uow: uow.slots.put_memory_covering(space_id, session_id, content, covered)
        )

    async def clear_insight(self, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Delete the insight; a no-op when there is none."""
        found = await self._db.transaction(
            lambda uow: uow.slots.clear_insight(space_id, session_id)
        )
        if not found:
            raise session_not_found(session_id)

    async def consume_insight(self, space_id: uuid.UUID, session_id: uuid.UUID) -> str | None:
        """Read and clear the insight atomically (of concurrent callers one gets it)."""

        async def consume(uow: UnitOfWork) -> str | None:
            visible, insight = await uow.slots.lock_insight(space_id, session_id)
            if not visible:
                raise session_not_found(session_id)
            if insight is None:
                return None
            if len(insight.encode()) + 16 > self._max_reply_bytes:
                raise ResourceExhausted(
                    "the insight exceeds the reply size limit (STELLO_MAX_MESSAGE_BYTES); "
                    "it was not cleared"
                )
            await uow.slots.clear_insight(space_id, session_id)
            return insight

        return await self._db.transaction(consume)

    async def get_compression_cache(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        at_or_below: int | None = None,
        complete_only: bool = False,
    ) -> CompressionCache | None:
        """The newest summary of a visible session (at or below a seq, complete if asked);
        None = none."""
        visible, cache = await self._db.statement(
            lambda uow: uow.caches.get(space_id, session_id, at_or_below, complete_only)
        )
        if not visible:
            raise session_not_found(session_id)
        return cache

    async def put_compression_cache(
        self, space_id: uuid.UUID, session_id: uuid.UUID, cache: CompressionCache
    ) -> None:
        """Overwrite the compression cache."""
        await self._db.statement(lambda uow: uow.caches.put(space_id, session_id, cache))

    async def batch_get_slots(
        self,
        space_id: uuid.UUID,
        session_ids: Sequence[uuid.UUID],
        slots: AbstractSet[SlotName] = frozenset(SLOT_NAMES),
        max_reply_bytes: int = 0,
    ) -> SlotBatch:
        """`slots` of the visible sessions among `session_ids`, request order, each once,
        while they fit `max_reply_bytes` (0 or more than this server's limit: its limit)
        of reply, the first found always."""
        unique = list(dict.fromkeys(session_ids))
        if not unique:
            return SlotBatch([], 0)
        budget = self._max_reply_bytes
        if 0 < max_reply_bytes < budget:
            budget = max_reply_bytes
        budget -= BATCH_REPLY_FRAMING_BYTES
        found, cut = await self._db.statement(
            lambda uow: uow.slots.batch_get(space_id, unique, slots, budget)
        )
        # The reply counts in the request's ids: a repeat of an id answered comes after its
        # first occurrence, so the first left out is where the request stopped being read.
        return SlotBatch(found, 0 if cut is None else list(session_ids).index(unique[cut]))
