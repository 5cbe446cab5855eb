"""The gateway's shared memory RPCs (DESIGN §4.5): validate, one service call, convert back.

Mixed into `servicer.AgentGatewayServicer`, like its other RPCs thin: the
logic is `shared_memory.SharedMemory`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_gateway.memory.shared import SharedMemory
from agent_gateway.servicer.callers import caller_of
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.errors import Violations
from stello.rules import memory_rules
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


def _request_id(value: str, violations: Violations) -> str:
    if len(value) > MAX_REQUEST_ID_CHARS:
        violations.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return value


class SharedMemoryRpcs:
    """ListSharedMemory, GetSharedMemoryEntry, UpsertSharedMemoryEntry, RemoveSharedMemoryEntry."""

    _memory: SharedMemory

    async def ListSharedMemory(
        self, request: agent_pb2.ListSharedMemoryRequest, context: Context
    ) -> agent_pb2.ListSharedMemoryResponse:
        """One page of the space's entries, in insertion order, without bodies."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        page_size = validation.page_size(request.page_size, violations)
        violations.raise_if_any()
        page = await self._memory.list_entries(
            caller_of(context), space_id, page_size, request.page_token
        )
        return agent_pb2.ListSharedMemoryResponse(
            entries=page.entries,
            next_page_token=page.next_page_token,
            total_count=page.total_count,
        )

    async def GetSharedMemoryEntry(
        self, request: agent_pb2.GetSharedMemoryEntryRequest, context: Context
    ) -> agent_pb2.GetSharedMemoryEntryResponse:
        """One entry, body included."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        memory_rules.check_slug(request.slug, violations)
        violations.raise_if_any()
        entry = await self._memory.get_entry(caller_of(context), space_id, request.slug)
        return agent_pb2.GetSharedMemoryEntryResponse(entry=entry)

    async def UpsertSharedMemoryEntry(
        self, request: agent_pb2.UpsertSharedMemoryEntryRequest, context: Context
    ) -> agent_pb2.UpsertSharedMemoryEntryResponse:
        """Create or replace an entry."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        self._memory.check_entry(request.slug, request.summary, request.body, violations)
        request_id = _request_id(request.request_id, violations)
        violations.raise_if_any()
        stored = await self._memory.upsert_entry(
            caller_of(context),
            space_id,
            slug=request.slug,
            summary=request.summary,
            body=request.body,
            request_id=request_id,
        )
        return agent_pb2.UpsertSharedMemoryEntryResponse(entry=stored.entry, created=stored.created)

    async def RemoveSharedMemoryEntry(
        self, request: agent_pb2.RemoveSharedMemoryEntryRequest, context: Context
    ) -> agent_pb2.RemoveSharedMemoryEntryResponse:
        """Remove an entry (absent: a no-op)."""
        violations = Violations()
        space_id = validation.space_uuid(request.space_id, violations)
        memory_rules.check_slug(request.slug, violations)
        request_id = _request_id(request.request_id, violations)
        violations.raise_if_any()
        removed = await self._memory.remove_entry(
            caller_of(context), space_id, request.slug, request_id=request_id
        )
        return agent_pb2.RemoveSharedMemoryEntryResponse(removed=removed)
