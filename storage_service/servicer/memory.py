"""The shared memory RPCs (DESIGN §4.5): validate, one service call, convert back.

Mixed into `storage.SessionStorageServicer`, thin like its other RPCs: the logic is
`memory.service.SharedMemoryService`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stello.errors import Violations
from stello.rules import memory_rules
from stello.storage.v1 import storage_pb2
from stello.validation import page_size, space_uuid
from storage_service.convert import entry_to_proto
from storage_service.keys.wire import idempotency
from storage_service.memory.service import SharedMemoryService
from storage_service.parse import RequestParser

if TYPE_CHECKING:
    from storage_service.servicer.storage import Context


class SharedMemoryRpcs:
    """ListSharedMemory, GetSharedMemoryEntry, UpsertSharedMemoryEntry, RemoveSharedMemoryEntry."""

    _parse: RequestParser
    _memory: SharedMemoryService

    async def ListSharedMemory(
        self, request: storage_pb2.ListSharedMemoryRequest, context: Context
    ) -> storage_pb2.ListSharedMemoryResponse:
        """One page of the space's shared memory entries, in insertion order."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        size = page_size(request.page_size, v)
        v.raise_if_any()
        page = await self._memory.list_entries(space_id, size, request.page_token)
        return storage_pb2.ListSharedMemoryResponse(
            entries=[entry_to_proto(e) for e in page.entries],
            next_page_token=page.next_page_token,
            total_count=page.total_count,
        )

    async def GetSharedMemoryEntry(
        self, request: storage_pb2.GetSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.GetSharedMemoryEntryResponse:
        """One shared memory entry, body included."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        memory_rules.check_slug(request.slug, v)
        v.raise_if_any()
        entry = await self._memory.get_entry(space_id, request.slug)
        return storage_pb2.GetSharedMemoryEntryResponse(entry=entry_to_proto(entry))

    async def UpsertSharedMemoryEntry(
        self, request: storage_pb2.UpsertSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.UpsertSharedMemoryEntryResponse:
        """Create or replace a shared memory entry."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        self._parse.memory_entry(request, v)
        key = idempotency(request, v)
        v.raise_if_any()
        upserted = await self._memory.upsert_entry(
            space_id, request.slug, request.summary, request.body, key
        )
        return storage_pb2.UpsertSharedMemoryEntryResponse(
            entry=entry_to_proto(upserted.entry), created=upserted.created
        )

    async def RemoveSharedMemoryEntry(
        self, request: storage_pb2.RemoveSharedMemoryEntryRequest, context: Context
    ) -> storage_pb2.RemoveSharedMemoryEntryResponse:
        """Remove a shared memory entry (absent: a no-op)."""
        v = Violations()
        space_id = space_uuid(request.space_id, v)
        memory_rules.check_slug(request.slug, v)
        key = idempotency(request, v)
        v.raise_if_any()
        removed = await self._memory.remove_entry(space_id, request.slug, key)
        return storage_pb2.RemoveSharedMemoryEntryResponse(removed=removed)
