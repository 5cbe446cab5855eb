"""The provisional sweep's rounds: SweepProvisional (admin), the periodic sweep, and its
fallback space by space."""

from __future__ import annotations

import logging
import uuid

from stello.db.maintenance import SpaceNode
from tree_service.models import SweepQuery, SweptSession
from tree_service.unit import TreeRepository

log = logging.getLogger(__name__)


SWEEP_BATCH = 1000
MAX_DRY_RUN = 100_000


class SweepService:
    """The sweep of due provisional sessions, over a repository."""

    def __init__(self, repository: TreeRepository) -> None:
        self._repo = repository

    async def sweep_space(self, space_id: uuid.UUID) -> int | None:
        """`sweep_expired` in one space, its expired request keys' purge included: the
        sweep's fallback when its read across spaces fails (`Sweeper`); how many sessions
        went."""
        removed: list[SweptSession] = []
        while batch := await self._repo.sweeps.sweep(
            0.0, SWEEP_BATCH, wait=False, space_id=space_id
        ):
            removed.extend(batch)
        await self._repo.sweeps.purge_idempotency_keys(space_id)
        _log_swept(removed)
        return len(removed)

    async def sweep(self, query: SweepQuery) -> list[SweptSession]:
        """Admin sweep: remove (or list) due provisional sessions of every space."""
        if query.dry_run:
            return await self._repo.sweeps.due(query.older_than_s, MAX_DRY_RUN)
        removed: list[SweptSession] = []
        while True:
            # A batch comes back short when a CommitSession holds one of its sessions (it
            # is skipped), not only at the end: the sweep goes on until one removes none.
            batch = await self._repo.sweeps.sweep(query.older_than_s, SWEEP_BATCH, wait=True)
            if not batch:
                break
            removed.extend(batch)
        _log_swept(removed)
        return removed

    async def sweep_expired(self) -> list[SweptSession] | None:
        """One periodic sweep of expired provisional sessions; None if another replica sweeps."""
        removed: list[SweptSession] = []
        while True:
            # As the admin sweep: on until a batch removes none (a held session shortens one).
            batch = await self._repo.sweeps.sweep(0.0, SWEEP_BATCH, wait=False)
            if batch is None:
                return removed or None
            if not batch:
                break
            removed.extend(batch)
        await self._repo.sweeps.purge_idempotency_keys()
        _log_swept(removed)
        return removed

    async def spaces(self) -> list[SpaceNode]:
        """Every space: what a round done space by space goes over."""
        return await self._repo.spaces()


def _log_swept(removed: list[SweptSession]) -> None:
    if removed:
        log.info("swept %d provisional sessions", len(removed))
