"""The storage calls of the background runner (DESIGN §4.8): claims, renewals, progress.

A mixin of `StorageClient` (one client per service), kept apart because the
runner is their only user.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from agent_gateway.clients.rpc import Caller, ServiceClient
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2


class JobCalls(ServiceClient):
    """ClaimJob, RenewJob, and the reads a job starts from."""

    _stub: Any

    async def claim_job(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        kind: common_pb2.JobKind,
        ttl_s: int,
    ) -> storage_pb2.ClaimJobResponse:
        """Claim the session's job of `kind` unless another run holds it. The claim's token
        is made here and sent, so the call is idempotent: a retry after a lost reply is
        granted the claim its first attempt took (retried on UNAVAILABLE)."""
        request = storage_pb2.ClaimJobRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            kind=kind,
            ttl_s=ttl_s,
            token=str(uuid4()),
        )
        reply: storage_pb2.ClaimJobResponse = await self._call(
            "ClaimJob", self._stub.ClaimJob, request, storage_pb2.ClaimJobResponse, caller
        )
        return reply

    async def list_orphaned_jobs(self, caller: Caller, limit: int) -> list[storage_pb2.OrphanedJob]:
        """The background jobs left without a gateway that `caller`'s key reaches."""
        request = storage_pb2.ListOrphanedJobsRequest(limit=limit)
        reply: storage_pb2.ListOrphanedJobsResponse = await self._call(
            "ListOrphanedJobs",
            self._stub.ListOrphanedJobs,
            request,
            storage_pb2.ListOrphanedJobsResponse,
            caller,
        )
        return list(reply.jobs)

    async def renew_job(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        kind: common_pb2.JobKind,
        token: str,
        ttl_s: int,
    ) -> bool:
        """Extend the claim `token` holds; False once another run took the job."""
        request = storage_pb2.RenewJobRequest(
            space_id=str(space_id), session_id=str(session_id), kind=kind, token=token, ttl_s=ttl_s
        )
        reply = await self._call(
            "RenewJob", self._stub.RenewJob, request, storage_pb2.RenewJobResponse, caller
        )
        return reply.renewed

    async def memory_state(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> storage_pb2.GetSessionResponse:
        """The session's meta, memory slot and progress (the memory's seq and version, the
        last seq) in one call: where a consolidation starts."""
        request = storage_pb2.GetSessionRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            slots=[storage_pb2.SLOT_KIND_MEMORY],
            progress=True,
        )
        reply: storage_pb2.GetSessionResponse = await self._call(
            "GetSession", self._stub.GetSession, request, storage_pb2.GetSessionResponse, caller
        )
        return reply
