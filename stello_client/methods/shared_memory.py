"""The space's shared memory (DESIGN §4.5): entries {slug, summary, body} every session's
model may recall. Upsert and remove carry a request_id (the caller's, else a new one), so
they are retried safely."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from stello.agent.v1 import agent_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.methods.reads import MAX_PAGE
from stello_client.requests import request_id_or_new, request_of
from stello_client.types import (
    ListSharedMemoryResponse,
    SharedMemoryEntry,
    UpsertSharedMemoryEntryResponse,
)


class SharedMemoryCalls(ClientBase):
    """ListSharedMemory, GetSharedMemoryEntry, UpsertSharedMemoryEntry, RemoveSharedMemoryEntry."""

    async def list_shared_memory(
        self, *, page_size: int = 0, page_token: str = "", timeout: Timeout = DEFAULT
    ) -> ListSharedMemoryResponse:
        """One page of the space's shared memory in insertion order, without bodies
        (ListSharedMemory; `page_size` 0 = 100, at most 1000; `total_count` counts all)."""
        request = request_of(
            agent_pb2.ListSharedMemoryRequest,
            space_id=await self.space_id(),
            page_size=page_size,
            page_token=page_token,
        )
        reply: ListSharedMemoryResponse = await self._unary(
            "ListSharedMemory", request, safe=True, timeout=timeout
        )
        return reply

    async def shared_memory(
        self, *, page_size: int = MAX_PAGE, timeout: Timeout = DEFAULT
    ) -> AsyncGenerator[SharedMemoryEntry, None]:
        """Every shared memory entry (no bodies), walking the pages; `timeout` is each
        page's (default: the client's)."""
        token = ""
        while True:
            page = await self.list_shared_memory(
                page_size=page_size, page_token=token, timeout=timeout
            )
            for entry in page.entries:
                yield entry
            token = page.next_page_token
            if not token:
                return

    async def get_shared_memory_entry(
        self, slug: str, *, timeout: Timeout = DEFAULT
    ) -> SharedMemoryEntry:
        """One entry, body included (GetSharedMemoryEntry).

        Raises:
            NotFound: the space holds no entry with that slug.
            InvalidArgument: the slug breaks the slug rules.
        """
        request = request_of(
            agent_pb2.GetSharedMemoryEntryRequest, space_id=await self.space_id(), slug=slug
        )
        reply: agent_pb2.GetSharedMemoryEntryResponse = await self._unary(
            "GetSharedMemoryEntry", request, safe=True, timeout=timeout
        )
        return reply.entry

    async def upsert_shared_memory_entry(
        self,
        slug: str,
        *,
        summary: str,
        body: str,
        request_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> UpsertSharedMemoryEntryResponse:
        """Create the entry `slug` at the end, or replace its summary and body in place
        (UpsertSharedMemoryEntry): answers `entry` as stored and `created`.

        Raises:
            InvalidArgument: a bad slug, an empty or multi-line summary, an empty or
                oversized body.
            SharedMemoryFull: a new slug in a space holding as many entries as it may
                (nothing written; replacing an existing slug is allowed).
            RequestIdReused: the request_id came with another request.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.UpsertSharedMemoryEntryRequest,
            space_id=await self.space_id(),
            slug=slug,
            summary=summary,
            body=body,
            request_id=rid,
        )
        reply: UpsertSharedMemoryEntryResponse = await self._unary(
            "UpsertSharedMemoryEntry", request, safe=True, timeout=timeout, request_id=rid
        )
        return reply

    async def remove_shared_memory_entry(
        self, slug: str, *, request_id: str | None = None, timeout: Timeout = DEFAULT
    ) -> bool:
        """Remove the entry `slug`; False when there was none (RemoveSharedMemoryEntry).

        Raises:
            InvalidArgument: the slug breaks the slug rules.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.RemoveSharedMemoryEntryRequest,
            space_id=await self.space_id(),
            slug=slug,
            request_id=rid,
        )
        reply: agent_pb2.RemoveSharedMemoryEntryResponse = await self._unary(
            "RemoveSharedMemoryEntry", request, safe=True, timeout=timeout, request_id=rid
        )
        return bool(reply.removed)
