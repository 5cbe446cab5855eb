"""The space's shared memory through the gateway (DESIGN §4.5, STELLO-SPEC §4.8).

Storage owns the entries; the gateway passes its RPCs through and checks the
slug rules and size limits first (`stello.rules.memory_rules`), so a refused write
never reaches storage. The memory tools (`memory_tools`) use the same calls.
"""

from __future__ import annotations

import uuid

from agent_gateway.clients import Caller, StorageClient
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.rules import memory_rules
from stello.storage.v1 import storage_pb2


class SharedMemory:
    """List, get, upsert and remove the entries of a space."""

    def __init__(self, storage: StorageClient, *, max_body_bytes: int) -> None:
        self._storage = storage
        self.max_body_bytes = max_body_bytes
        """The largest body storage accepts (STELLO_MAX_SLOT_BYTES)."""

    def check_entry(self, slug: str, summary: str, body: str, violations: Violations) -> None:
        """Add a violation per field of an upsert that storage would refuse."""
        memory_rules.check_entry(slug, summary, body, self.max_body_bytes, violations)

    async def list_entries(
        self, caller: Caller, space_id: uuid.UUID, page_size: int, page_token: str = ""
    ) -> storage_pb2.ListSharedMemoryResponse:
        """One page of entries in insertion order (no bodies) and the space's count."""
        return await self._storage.list_shared_memory(
            caller, space_id, page_size=page_size, page_token=page_token
        )

    async def get_entry(
        self, caller: Caller, space_id: uuid.UUID, slug: str
    ) -> common_pb2.SharedMemoryEntry:
        """One entry, body included.

        Raises:
            NotFound: the space holds no entry `slug`.
        """
        return await self._storage.get_shared_memory_entry(caller, space_id, slug)

    async def upsert_entry(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        *,
        slug: str,
        summary: str,
        body: str,
        request_id: str = "",
    ) -> storage_pb2.UpsertSharedMemoryEntryResponse:
        """Create the entry at the end of the order or replace it in its place."""
        request = storage_pb2.UpsertSharedMemoryEntryRequest(
            space_id=str(space_id), slug=slug, summary=summary, body=body, request_id=request_id
        )
        return await self._storage.upsert_shared_memory_entry(caller, request)

    async def remove_entry(
        self, caller: Caller, space_id: uuid.UUID, slug: str, *, request_id: str = ""
    ) -> bool:
        """Remove the entry; whether there was one."""
        return await self._storage.remove_shared_memory_entry(
            caller, space_id, slug, request_id=request_id
        )
