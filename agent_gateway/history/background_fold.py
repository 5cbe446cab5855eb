"""The background fold: a lossy catch-up summary replaced by complete ones (DESIGN §4.3, §4.8).

A turn whose tail needed more compressor calls than a turn may make stored a
lossy summary (`agent_gateway.history.compression`): the backlog of a bulk
history. After its commit — or after any turn that finds the newest summary
lossy (a gateway restarted meanwhile) — the gateway submits a fold of the
session to the background runner (`agent_gateway.background`): one per
session at a time across every gateway process, within
``STELLO_GATEWAY_FOLD_MAX_CALLS`` model calls per run.

A run folds, one chunk per call, the records from the newest complete
summary at or below the lossy one (or from the first record) through the
lossy one's seq, reading the records page by page, and saves after every
chunk a complete summary at the chunk's last seq beside the newer summaries
(PutCompressionCacheOp with keep_newer; the last chunk's replaces the lossy
one at its seq), checked by the run's claim. The newest summary stays what
turns use; the complete ones are the fold's progress — a run stopped by its
budget, a failure or a shutdown is continued by the next from the newest
complete summary — and how far they cover is readable (GetSession's
progress). Summaries built on the lossy one by later turns are lossy too:
the run goes on with them, from the complete one it just saved, until the
newest summary is complete or its budget is spent.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from contextlib import aclosing
from dataclasses import dataclass, replace

from agent_gateway.background.jobs import BUDGET_SPENT, DONE, BudgetSpent, JobKind, Outcome, Run
from agent_gateway.background.runner import BackgroundRunner
from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.folding import Folder
from agent_gateway.llm.prompts.config import SessionPrompts
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2

Op = storage_pb2.Operation


@dataclass(frozen=True, slots=True)
class FoldJob:
    """One background fold of a session, for the runner."""

    folds: BackgroundFolds
    kind: JobKind
    space_id: uuid.UUID
    session_id: uuid.UUID
    caller: Caller

    @property
    def key(self) -> Hashable:
        """One fold of a session queued here at a time."""
        return (self.space_id, self.session_id, self.kind.name)

    @property
    def wait_until(self) -> float | None:
        """Never waits: a fold running elsewhere does the work."""
        return None

    async def run(self, run: Run) -> Outcome:
        """Fold (the module docstring)."""
        return await self.folds.fold(self, run)


class BackgroundFolds:
    """Submits and runs background folds."""

    def __init__(
        self,
        storage: StorageClient,
        folder: Folder,
        prompts: SessionPrompts,
        runner: BackgroundRunner,
        *,
        max_calls: int = 16,
    ) -> None:
        self._storage = storage
        self._folder = folder
        self._prompts = prompts
        self._runner = runner
        self.kind = JobKind("fold", common_pb2.JOB_KIND_FOLD, max_calls)
        runner.register(
            common_pb2.JOB_KIND_FOLD,
            lambda caller, space_id, session_id: FoldJob(
                self, self.kind, space_id, session_id, caller
            ),
        )

    def schedule(self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Submit a fold of the session's lossy summary (skipped while one runs); not bound
        to the caller's deadline: the turn has answered."""
        unbounded = replace(caller, deadline=None)
        self._runner.submit(FoldJob(self, self.kind, space_id, session_id, unbounded))

    async def fold(self, job: FoldJob, run: Run) -> Outcome:
        """Fold lossy summaries until the newest is complete or the budget is spent."""
        try:
            while await self._fold_once(job, run):
                pass
        except BudgetSpent:
            return run.outcome(BUDGET_SPENT)
        return run.outcome(DONE)

    async def _fold_once(self, job: FoldJob, run: Run) -> bool:
        """Complete the newest summary when it is lossy; whether it was."""
        caller, space_id, session_id = job.caller, job.space_id, job.session_id
        newest = await self._storage.get_compression_cache(caller, space_id, session_id)
        if newest is None or not newest.lossy:
            return False
        target = newest.covered_until_seq
        base = await self._storage.get_compression_cache(
            caller, space_id, session_id, at_or_below_seq=target, complete_only=True
        )
        text = base.summary if base else None
        start = base.covered_until_seq if base else 0
        run.covered_until_seq = max(run.covered_until_seq, start)
        prompt = await self._prompts.compressor(caller, space_id, session_id)
        capacity = self._folder.capacity(prompt)
        chunks = self._folder.chunks(
            self._storage, caller, space_id, session_id, start, capacity, before=target + 1
        )
        async with aclosing(chunks):
            async for chunk in chunks:
                text = await run.call(
                    self._folder.fold(
                        text,
                        chunk,
                        prompt=prompt,
                        what=f"the background fold of session {session_id}",
                        meter=run.spend,
                    )
                )
                await self._save(job, run, text, chunk[-1].seq)
        if run.covered_until_seq < target:  # the last records were trimmed meanwhile
            await self._save(job, run, text or "", target)
        return True

    async def _save(self, job: FoldJob, run: Run, text: str, covered: int) -> None:
        """Store a complete summary at `covered` beside the newer ones, with the run's
        progress, while the run holds the job."""
        cache = storage_pb2.CompressionCache(summary=text, covered_until_seq=covered, lossy=False)
        put = Op.PutCompressionCacheOp(session_id=str(job.session_id), cache=cache, keep_newer=True)
        await self._storage.transact(
            job.caller,
            job.space_id,
            [Op(put_compression_cache=put), run.progress(covered)],
            request_id="",
            preconditions=[run.claim_check()],
        )
