"""The search backfill (migrations 0035, 0038, 0041, 0042, 0043, 0045, 0048, 0049): records
written before them become searchable by their tag words, their words joined to invisible
marks, their words joined by ASCII punctuation ("JIRA-4411", "example.com"), their full-width
words (U+FF21 U+FF30 U+FF29 as "api"), their accented words by their base letters ("café" as
"cafe"), their emoji and symbols ("🚀"), their capitals in any script ("ПРИВЕТ"), "ёлка" as "елка"
and without Hebrew and Arabic vowel marks, the tatweel or Quranic marks, in bounded batches.

`records.search_vector` is a STORED generated column: 0035's new
`stello_search_vector` gives the new vector to rows written from then on, and this
job recomputes the older ones, space by space, at most
`STELLO_STORAGE_SEARCH_BACKFILL_BATCH` records per transaction (`backfill_repository`).
Each batch saves where the space's pass stands in its own transaction, so a process
stopped or killed between batches loses nothing: the next round, of any replica, goes
on from the saved cursor. One batch runs at a time across replicas and workers (an
advisory lock; a round that meets another's batch ends and tries again at the next).
The first round comes one interval after start; once every pass is finished
a round is one probe of an empty index. The storage app's
background task, like the event purge; it counts rows read and rewritten on the
server's metrics registry and logs each round that did work.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from stello.db.periodic import OUT_OF_REACH, Periodic
from storage_service.search.backfill_repository import Batch
from storage_service.unit import Database

log = logging.getLogger(__name__)

SPACES_PER_ROUND = 100
"""Spaces a round lists; a round that listed this many is followed by another at once."""


class BackfillMetrics:
    """The backfill's Prometheus counters."""

    def __init__(self) -> None:
        self.read = Counter(
            "stello_storage_search_backfill_rows_read",
            "Records the search backfill went past (migration 0035).",
            registry=None,
        )
        self.rewritten = Counter(
            "stello_storage_search_backfill_rows_rewritten",
            "Records the search backfill rewrote (their search vector changed).",
            registry=None,
        )
        self.spaces = Counter(
            "stello_storage_search_backfill_spaces",
            "Spaces whose search backfill pass finished.",
            registry=None,
        )

    def register(self, registry: CollectorRegistry) -> None:
        """Count on `registry`."""
        for metric in (self.read, self.rewritten, self.spaces):
            registry.register(metric)


class SearchBackfill(Periodic):
    """A background task that recomputes old records' search vectors, batch by batch."""

    task_name = "stello-storage-search-backfill"
    what = "search backfill"
    first_round_waits = True  # a start (a restart, every test's server) reads nothing at once

    def __init__(
        self,
        db: Database,
        batch_rows: int,
        interval_s: float,
        *,
        registry: Callable[[], CollectorRegistry | None] = lambda: None,
    ) -> None:
        super().__init__(interval_s)
        self._db = db
        self._batch_rows = batch_rows
        self._registry = registry
        self._registered = False
        self.metrics = BackfillMetrics()

    def start(self) -> None:
        """Count on the server's metrics registry (once it exists), then begin."""
        registry = self._registry()
        if registry is not None and not self._registered:
            self.metrics.register(registry)
            self._registered = True
        super().start()

    async def run_once(self) -> int | None:
        """Finish the passes of up to SPACES_PER_ROUND spaces; how many records it
        rewrote, None when another replica's batch held the lock. A node out of reach: every
        space's pass in turn, the spaces on it skipped (`Periodic.by_space`)."""
        try:
            spaces = await self._db.transaction(lambda uow: uow.backfill.pending(SPACES_PER_ROUND))
        except OUT_OF_REACH as exc:
            return await self.by_space(exc, self._db.spaces, self.rewritten)
        rewritten = finished = 0
        for space_id in spaces:
            done = await self.space(space_id)
            if done is None:
                return None
            rewritten += done.rewritten
            finished += done.finished
            if self.stopping:
                break
        if spaces:
            log.info(
                "search backfill: %d of %d spaces finished, %d records rewritten",
                finished,
                len(spaces),
                rewritten,
            )
        if len(spaces) == SPACES_PER_ROUND and not self.stopping:
            self.wake()
        return rewritten

    async def rewritten(self, space_id: uuid.UUID) -> int:
        """The space's pass (`space`); how many records it rewrote."""
        done = await self.space(space_id)
        return 0 if done is None else done.rewritten

    async def space(self, space_id: uuid.UUID) -> Batch | None:
        """The space's pass, batch by batch, to its end or until the job stops: rows read and
        rewritten, and whether it finished; None when another replica's batch held the lock."""
        read = rewritten = 0
        while True:
            batch = await self.batch(space_id)
            if batch is None:
                return None
            read += batch.read
            rewritten += batch.rewritten
            if batch.finished or self.stopping:
                return Batch(read, rewritten, batch.finished)

    async def batch(self, space_id: uuid.UUID) -> Batch | None:
        """One batch of the space's pass, in its own transaction (None: another replica's
        batch held the lock)."""
        batch = await self._db.transaction(
            lambda uow: uow.backfill.batch(space_id, self._batch_rows)
        )
        if batch is not None:
            self.metrics.read.inc(batch.read)
            self.metrics.rewritten.inc(batch.rewritten)
            self.metrics.spaces.inc(batch.finished)
            log.debug("search backfill of space %s: %s", space_id, batch)
        return batch
