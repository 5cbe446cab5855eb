"""The storage calls of memory: a session's memory and insight slots and the space's shared
memory entries.

A mixin of `StorageClient` (one client per service), kept apart so the client's
session, record and turn calls read on their own.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from agent_gateway.clients.rpc import Caller, ServiceClient
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2


class MemoryCalls(ServiceClient):
    """PutMemory, PutInsight, GetMemory, and the shared memory entries' RPCs."""

    _stub: Any

    async def put_insight(
        self, caller: Caller, space_id: UUID, session_id: UUID, content: str
    ) -> None:
        """Replace the insight slot."""
        request = storage_pb2.PutInsightRequest(
            space_id=str(space_id), session_id=str(session_id), content=content
        )
        await self._call(
            "PutInsight", self._stub.PutInsight, request, storage_pb2.PutInsightResponse, caller
        )

    async def put_memory(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        content: str,
        *,
        covered: int | None = None,
    ) -> None:
        """Replace the memory slot (and the seq it covers, when given)."""
        request = storage_pb2.PutMemoryRequest(
            space_id=str(space_id), session_id=str(session_id), content=content
        )
        if covered is not None:
            request.covered_until_seq = covered
        await self._call(
            "PutMemory", self._stub.PutMemory, request, storage_pb2.PutMemoryResponse, caller
        )

    async def get_memory(self, caller: Caller, space_id: UUID, session_id: UUID) -> str | None:
        """The memory slot; None when unset."""
        request = storage_pb2.GetMemoryRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetMemory", self._stub.GetMemory, request, storage_pb2.GetMemoryResponse, caller
        )
        return reply.content if reply.HasField("content") else None

    async def get_memory_covering(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> tuple[str | None, int | None]:
        """The memory slot and the seq it covers (None when unset or not known)."""
        request = storage_pb2.GetMemoryRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetMemory", self._stub.GetMemory, request, storage_pb2.GetMemoryResponse, caller
        )
        content = reply.content if reply.HasField("content") else None
        covered = reply.covered_until_seq if reply.HasField("covered_until_seq") else None
        return content, covered

    async def list_shared_memory(
        self, caller: Caller, space_id: UUID, *, page_size: int, page_token: str = ""
    ) -> storage_pb2.ListSharedMemoryResponse:
        """One page of the space's shared memory entries (no bodies) and their count."""
        request = storage_pb2.ListSharedMemoryRequest(
            space_id=str(space_id), page_size=page_size, page_token=page_token
        )
        return await self._call(
            "ListSharedMemory",
            self._stub.ListSharedMemory,
            request,
            storage_pb2.ListSharedMemoryResponse,
            caller,
        )

    async def get_shared_memory_entry(
        self, caller: Caller, space_id: UUID, slug: str
    ) -> common_pb2.SharedMemoryEntry:
        """One shared memory entry, body included (NOT_FOUND when the slug has none)."""
        request = storage_pb2.GetSharedMemoryEntryRequest(space_id=str(space_id), slug=slug)
        reply = await self._call(
            "GetSharedMemoryEntry",
            self._stub.GetSharedMemoryEntry,
            request,
            storage_pb2.GetSharedMemoryEntryResponse,
            caller,
        )
        return reply.entry

    async def upsert_shared_memory_entry(
        self, caller: Caller, request: storage_pb2.UpsertSharedMemoryEntryRequest
    ) -> storage_pb2.UpsertSharedMemoryEntryResponse:
        """Create or replace a shared memory entry (idempotent by its request_id)."""
        return await self._call(
            "UpsertSharedMemoryEntry",
            self._stub.UpsertSharedMemoryEntry,
            request,
            storage_pb2.UpsertSharedMemoryEntryResponse,
            caller,
        )

    async def remove_shared_memory_entry(
        self, caller: Caller, space_id: UUID, slug: str, *, request_id: str = ""
    ) -> bool:
        """Remove a shared memory entry; whether there was one."""
        request = storage_pb2.RemoveSharedMemoryEntryRequest(
            space_id=str(space_id), slug=slug, request_id=request_id
        )
        reply = await self._call(
            "RemoveSharedMemoryEntry",
            self._stub.RemoveSharedMemoryEntry,
            request,
            storage_pb2.RemoveSharedMemoryEntryResponse,
            caller,
        )
        return reply.removed
