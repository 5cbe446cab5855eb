"""Remembered replies (DESIGN §2, idempotency): the key a request's answer is stored under,
the Transact operation that stores it, and the storage calls that read it back.

A mixin of `StorageClient` (one client per service), kept apart because every
idempotent flow (turns, forks, imports) shares it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from agent_gateway.clients.rpc import Caller, ServiceClient
from stello.errors import AlreadyExists
from stello.reasons import REQUEST_ID_REUSED
from stello.storage.v1 import storage_pb2


@dataclass(frozen=True, slots=True)
class RequestKey:
    """A client's request_id, its scope (one per RPC), and the fingerprint of the request
    (request_id cleared): what the gateway remembers an answer under."""

    scope: str
    request_id: str
    request_hash: bytes


def remember_op(
    key: RequestKey, response: bytes, sessions: Sequence[UUID | str]
) -> storage_pb2.Operation:
    """The Transact operation that stores `response` under `key`, with the work it answers,
    linked to `sessions` (those whose data it holds: erased with any of them)."""
    return storage_pb2.Operation(
        remember_result=storage_pb2.Operation.RememberResultOp(
            scope=key.scope,
            request_id=key.request_id,
            request_hash=key.request_hash,
            response=response,
            session_ids=[str(s) for s in sessions],
        )
    )


class RememberedCalls(ServiceClient):
    """GetRememberedResult, and the check of a remembered answer against its request."""

    _stub: Any

    async def remembered(self, caller: Caller, space_id: UUID, key: RequestKey) -> bytes | None:
        """The answer remembered under `key`, or None.

        Raises:
            AlreadyExists: the request_id was used for a different request.
        """
        found = await self.get_remembered_result(caller, space_id, key.scope, key.request_id)
        if not found.found:
            return None
        if found.request_hash != key.request_hash:
            raise AlreadyExists(
                f"request_id {key.request_id!r} was already used for a different request; "
                "use a new request_id for a new request",
                reason=REQUEST_ID_REUSED,
            )
        return found.response

    async def get_remembered_result(
        self, caller: Caller, space_id: UUID, scope: str, request_id: str
    ) -> storage_pb2.GetRememberedResultResponse:
        """The idempotency entry a RememberResultOp stored (`found` false when none)."""
        request = storage_pb2.GetRememberedResultRequest(
            space_id=str(space_id), scope=scope, request_id=request_id
        )
        return await self._call(
            "GetRememberedResult",
            self._stub.GetRememberedResult,
            request,
            storage_pb2.GetRememberedResultResponse,
            caller,
        )
