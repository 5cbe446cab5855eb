"""The claims a caller takes on a session besides its turn: the fork guard's (DESIGN §4.5)
and the background jobs' (DESIGN §4.8).

Mixed into `storage.SessionStorageServicer`, thin like its other RPCs: the logic is
`guard.service.ForkGuard`'s and `jobs.service.JobService`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stello.errors import Violations
from stello.formats.timestamps import timestamp
from stello.serving.interceptors import current_principal
from stello.storage.v1 import storage_pb2
from stello.validation import parse_uuid
from storage_service.guard.service import ForkGuard
from storage_service.jobs import wire
from storage_service.jobs.service import JobService
from storage_service.parse import RequestParser
from storage_service.sessions.wire import target

if TYPE_CHECKING:
    from storage_service.servicer.storage import Context


class ClaimRpcs:
    """ClaimFork, ReleaseForkClaim, ClaimJob, ListOrphanedJobs, RenewJob."""

    _parse: RequestParser
    _guard: ForkGuard
    _jobs: JobService

    async def ClaimFork(
        self, request: storage_pb2.ClaimForkRequest, context: Context
    ) -> storage_pb2.ClaimForkResponse:
        """Check and take the session's fork guard."""
        v = Violations()
        space_id, session_id = target(request, v)
        for name in ("min_turns", "cooldown_turns"):
            if getattr(request, name) < 0:
                v.add(name, "must not be negative")
        v.raise_if_any()
        claim = await self._guard.claim(
            space_id, session_id, request.min_turns, request.cooldown_turns
        )
        return storage_pb2.ClaimForkResponse(
            granted=claim.granted,
            turn_count=claim.state.turn_count,
            last_fork_turn=claim.state.last_fork_turn,
        )

    async def ReleaseForkClaim(
        self, request: storage_pb2.ReleaseForkClaimRequest, context: Context
    ) -> storage_pb2.ReleaseForkClaimResponse:
        """Give back a fork claim whose fork failed."""
        v = Violations()
        space_id, session_id = target(request, v)
        previous = request.previous_fork_turn if request.HasField("previous_fork_turn") else None
        if request.claimed_turn < 0:
            v.add("claimed_turn", "must not be negative")
        if previous is not None and previous < 0:
            v.add("previous_fork_turn", "must not be negative")
        v.raise_if_any()
        released = await self._guard.release(space_id, session_id, request.claimed_turn, previous)
        return storage_pb2.ReleaseForkClaimResponse(released=released)

    async def ClaimJob(
        self, request: storage_pb2.ClaimJobRequest, context: Context
    ) -> storage_pb2.ClaimJobResponse:
        """Claim the session's background job of a kind unless another run holds it."""
        v = Violations()
        space_id, session_id = target(request, v)
        kind = wire.job_kind(request.kind, "kind", v)
        ttl_s = self._parse.ttl(request.ttl_s, v)
        token = parse_uuid(request.token, "token", v) if request.token else None
        v.raise_if_any()
        claim = await self._jobs.claim(space_id, session_id, kind, ttl_s, token)
        reply = storage_pb2.ClaimJobResponse(
            granted=claim.granted, job=wire.job_to_proto(claim.job)
        )
        if claim.token is not None and claim.expires_at is not None:
            reply.token = str(claim.token)
            reply.expires_at.CopyFrom(timestamp(claim.expires_at))
        return reply

    async def ListOrphanedJobs(
        self, request: storage_pb2.ListOrphanedJobsRequest, context: Context
    ) -> storage_pb2.ListOrphanedJobsResponse:
        """The background jobs left without a gateway that the key reaches."""
        v = Violations()
        limit = wire.orphans_limit(request.limit, v)
        v.raise_if_any()
        principal = current_principal()
        found = await self._jobs.orphaned(None if principal.is_admin else principal.space_id, limit)
        return storage_pb2.ListOrphanedJobsResponse(jobs=[wire.orphan_to_proto(o) for o in found])

    async def RenewJob(
        self, request: storage_pb2.RenewJobRequest, context: Context
    ) -> storage_pb2.RenewJobResponse:
        """Extend a background job's claim while its run works."""
        v = Violations()
        space_id, session_id = target(request, v)
        kind = wire.job_kind(request.kind, "kind", v)
        token = wire.token(request.token, "token", v)
        ttl_s = self._parse.ttl(request.ttl_s, v)
        v.raise_if_any()
        expires_at = await self._jobs.renew(space_id, session_id, kind, token, ttl_s)
        if expires_at is None:
            return storage_pb2.RenewJobResponse(renewed=False)
        return storage_pb2.RenewJobResponse(renewed=True, expires_at=timestamp(expires_at))
