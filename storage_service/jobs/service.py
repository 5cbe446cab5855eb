"""ClaimJob and RenewJob (DESIGN §4.8): one run per (session, kind) across gateway processes.

A claim is granted under the job row's lock when no claim is live, so of two
concurrent claimers exactly one gets it; a claim whose holder died expires and
the next claimer takes the job over, keeping the progress saved so far. Knows
nothing of gRPC.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from stello.db.periodic import OUT_OF_REACH, reachable_spaces
from storage_service.jobs.repository import JobClaim, OrphanedJob, claim_token
from storage_service.models import JobKindName, session_not_found
from storage_service.unit import Database, UnitOfWork

log = logging.getLogger(__name__)


class JobService:
    """Claims of the gateway's background jobs over the unit of work."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        kind: JobKindName,
        ttl_s: int,
        token: uuid.UUID | None = None,
    ) -> JobClaim:
        """Take the job's claim for `ttl_s` seconds unless a live one exists (one `token`,
        the caller's, already holds: a retry, granted again).

        Raises:
            NotFound: the session is not visible in the space.
        """

        async def work(uow: UnitOfWork) -> JobClaim:
            found = await uow.jobs.visible(space_id, session_id)
            if found is None or not found[0]:
                raise session_not_found(session_id)
            return await uow.jobs.claim(space_id, session_id, kind, ttl_s, found[1], token)

        return await self._db.transaction(work)

    async def orphaned(self, space_id: uuid.UUID | None, limit: int) -> list[OrphanedJob]:
        """Jobs left without a gateway: in the space, or (None) in every space. When the
        read across spaces fails for a node out of reach (Citus, a worker down), those of
        the spaces that answer, space by space (`stello.db.periodic.reachable_spaces`): the
        takeover goes on for them."""
        if space_id is not None:
            return await self._db.statement(lambda uow: uow.jobs.orphaned(space_id, limit))
        try:
            return await self._db.statement(lambda uow: uow.jobs.orphaned(None, limit))
        except OUT_OF_REACH as exc:
            return await self._orphaned_by_space(exc, limit)

    async def _orphaned_by_space(self, failure: BaseException, limit: int) -> list[OrphanedJob]:
        found: list[OrphanedJob] = []

        async def space(space_id: uuid.UUID) -> None:
            found.extend(
                await self._db.statement(
                    lambda uow: uow.jobs.orphaned_maintained(space_id, limit - len(found))
                )
            )

        went = await reachable_spaces(failure, self._db.spaces, space, lambda: len(found) >= limit)
        log.warning(
            "ListOrphanedJobs: a database node is out of reach (%s: %s); listed space by "
            "space, %d of %d spaces skipped%s",
            type(failure).__name__,
            failure,
            went.skipped,
            went.spaces,
            f" (those of {', '.join(went.nodes_out)})" if went.nodes_out else "",
        )
        return sorted(found, key=lambda job: job.job.status != "stopped")  # stopped first

    async def renew(
        self,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        kind: JobKindName,
        token: str,
        ttl_s: int,
    ) -> datetime | None:
        """Extend the claim `token` holds; its new expiry, None when it no longer holds it.

        Raises:
            NotFound: the session is not in the space.
        """
        found, expires_at = await self._db.statement(
            lambda uow: uow.jobs.renew(space_id, session_id, kind, claim_token(token), ttl_s)
        )
        if not found:
            raise session_not_found(session_id)
        return expires_at
