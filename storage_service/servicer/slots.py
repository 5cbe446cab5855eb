"""The slot RPCs (DESIGN §3): the system prompt, insight and memory slots, the compression
cache and BatchGetSlots.

Mixed into `storage.SessionStorageServicer`, thin like its other RPCs: the logic is
`slots.service.SlotService`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import space_uuid
from storage_service.convert import cache_to_proto, slots_to_proto
from storage_service.models import SlotName
from storage_service.parse import RequestParser
from storage_service.sessions.wire import target
from storage_service.slots.service import SlotService
from storage_service.slots.wire import batch_ids, slot_kinds
from storage_service.slots.wire import max_reply_bytes as parse_max_reply_bytes

if TYPE_CHECKING:
    from storage_service.servicer.storage import Context

SlotWrite = (
    storage_pb2.PutSystemPromptRequest
    | storage_pb2.PutInsightRequest
    | storage_pb2.PutMemoryRequest
)


class SlotRpcs:
    """Get/Put of each slot, ClearInsight, ConsumeInsight, Get/PutCompressionCache,
    BatchGetSlots."""

    _parse: RequestParser
    _slots: SlotService

    async def _put_slot(self, request: SlotWrite, slot: SlotName) -> None:
        """Validate a Put<Slot> request and overwrite that slot."""
        v = Violations()
        space_id, session_id = target(request, v)
        content = self._parse.slot(request.content, "content", v)
        v.raise_if_any()
        await self._slots.put_slot(space_id, session_id, slot, content)

    async def GetSystemPrompt(
        self, request: storage_pb2.GetSystemPromptRequest, context: Context
    ) -> storage_pb2.GetSystemPromptResponse:
        """Read the system prompt slot."""
        content = await self._slots.get_slot(*target(request), "system_prompt")
        return storage_pb2.GetSystemPromptResponse(content=content)

    async def PutSystemPrompt(
        self, request: storage_pb2.PutSystemPromptRequest, context: Context
    ) -> storage_pb2.PutSystemPromptResponse:
        """Overwrite the system prompt slot."""
        await self._put_slot(request, "system_prompt")
        return storage_pb2.PutSystemPromptResponse()

    async def GetInsight(
        self, request: storage_pb2.GetInsightRequest, context: Context
    ) -> storage_pb2.GetInsightResponse:
        """Read the insight without consuming it."""
        content = await self._slots.get_slot(*target(request), "insight")
        return storage_pb2.GetInsightResponse(content=content)

    async def PutInsight(
        self, request: storage_pb2.PutInsightRequest, context: Context
    ) -> storage_pb2.PutInsightResponse:
        """Overwrite the insight slot."""
        await self._put_slot(request, "insight")
        return storage_pb2.PutInsightResponse()

    async def ClearInsight(
        self, request: storage_pb2.ClearInsightRequest, context: Context
    ) -> storage_pb2.ClearInsightResponse:
        """Delete the insight."""
        await self._slots.clear_insight(*target(request))
        return storage_pb2.ClearInsightResponse()

    async def ConsumeInsight(
        self, request: storage_pb2.ConsumeInsightRequest, context: Context
    ) -> storage_pb2.ConsumeInsightResponse:
        """Read and clear the insight atomically."""
        content = await self._slots.consume_insight(*target(request))
        return storage_pb2.ConsumeInsightResponse(content=content)

    async def GetMemory(
        self, request: storage_pb2.GetMemoryRequest, context: Context
    ) -> storage_pb2.GetMemoryResponse:
        """Read the memory slot and the seq it covers."""
        content, covered, version = await self._slots.get_memory(*target(request))
        return storage_pb2.GetMemoryResponse(
            content=content, covered_until_seq=covered, version=version
        )

    async def PutMemory(
        self, request: storage_pb2.PutMemoryRequest, context: Context
    ) -> storage_pb2.PutMemoryResponse:
        """Overwrite the memory slot (and the seq it covers, when given)."""
        v = Violations()
        space_id, session_id = target(request, v)
        content = self._parse.slot(request.content, "content", v)
        covered = request.covered_until_seq if request.HasField("covered_until_seq") else None
        if covered is not None and covered < 0:
            v.add("covered_until_seq", "must not be negative")
        v.raise_if_any()
        await self._slots.put_memory(space_id, session_id, content, covered)
        return storage_pb2.PutMemoryResponse()

    async def GetCompressionCache(
        self, request: storage_pb2.GetCompressionCacheRequest, context: Context
    ) -> storage_pb2.GetCompressionCacheResponse:
        """Read the compression cache (or an older summary)."""
        v = Violations()
        space_id, session_id = target(request, v)
        below = request.at_or_below_seq if request.HasField("at_or_below_seq") else None
        if below is not None and below < 0:
            v.add("at_or_below_seq", "must not be negative")
        v.raise_if_any()
        cache = await self._slots.get_compression_cache(
            space_id, session_id, below, request.complete_only
        )
        if cache is None:
            return storage_pb2.GetCompressionCacheResponse()
        return storage_pb2.GetCompressionCacheResponse(cache=cache_to_proto(cache))

    async def PutCompressionCache(
        self, request: storage_pb2.PutCompressionCacheRequest, context: Context
    ) -> storage_pb2.PutCompressionCacheResponse:
        """Overwrite the compression cache."""
        v = Violations()
        space_id, session_id = target(request, v)
        cache = self._parse.cache(request.HasField("cache"), request.cache, "cache", v)
        v.raise_if_any()
        await self._slots.put_compression_cache(space_id, session_id, cache)
        return storage_pb2.PutCompressionCacheResponse()

    async def BatchGetSlots(
        self, request: storage_pb2.BatchGetSlotsRequest, context: Context
    ) -> storage_pb2.BatchGetSlotsResponse:
        """Read the slots of many sessions, as many as fit the reply's bytes."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        ids = batch_ids(request.session_ids, v)
        slots = slot_kinds(request.slots, v)
        max_reply_bytes = parse_max_reply_bytes(request.max_reply_bytes, v)
        v.raise_if_any()
        found = await self._slots.batch_get_slots(space_id, ids, slots, max_reply_bytes)
        return storage_pb2.BatchGetSlotsResponse(
            slots=[slots_to_proto(s) for s in found.slots], next_index=found.next_index
        )
