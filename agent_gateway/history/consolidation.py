"""Consolidation: a session's memory rewritten by the LLM (STELLO-SPEC §4.6, DESIGN §4.8, §6).

A consolidation is a fold (DESIGN §4.3) run as a job of the background
runner (`agent_gateway.background`): one per session at a time across every
gateway process, within ``STELLO_GATEWAY_CONSOLIDATE_MAX_CALLS`` model calls.
It reads the memory, the seq it covers and its version, then the records
after that seq (all of them the first time), page by page, in chunks that
each fit the window with the memory and its answer; each chunk is one call
in the consolidator structure of spec §4.9 item 5 (the memory so far, then
the chunk's transcript), with the session's consolidator prompt (its frozen
override, else the configured ``consolidator`` text, DESIGN §5.16). Each
answer is saved at once as the memory, with the seq it covers, in a
Transact that holds only while the run holds the job's claim and the memory
is still at the version the run read: a memory put meanwhile (a user's
PutMemory) wins, and the consolidation starts over from it. So progress is
saved chunk by chunk, the covered seq never goes down, and a consolidation
stopped by its budget, a failure or a shutdown continues from where it got.
An answer with no text once its reasoning is removed is such a failure
(`folding.EmptyAnswer`, UNAVAILABLE LLM_UNAVAILABLE): it is not saved — it
would erase the memory, a user's PutMemory included — and the job ends FAILED.
With no new record at all, one call over the memory alone (the reference's
behaviour); with no memory (or an empty one) either, no call: there is nothing
to fold, and a model's answer to an empty transcript is no memory. Archived
sessions are refused (DESIGN §5.4). It takes no turn lease: a turn never writes
memory.

`consolidate` is the Consolidate RPC: it waits for a consolidation another
run holds (within the caller's deadline), then continues from where that one
ended. `after_turn` is the automatic trigger: after a committed user turn
whose new turn_count is a multiple of `every_n_turns`, a consolidation is
submitted to the runner: while one runs in this process, one more runs after
it; while another process's run holds the job, it waits for that run and then
folds what it left (a run under way may have read the records before the turn
that asked committed); its outcome is logged
and counted (``stello_gateway_auto_consolidations_total`` by outcome, beside
the runner's own metrics) — never swallowed silently.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import Callable, Hashable
from contextlib import aclosing
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry, Counter

from agent_gateway.background.jobs import (
    BUDGET_SPENT,
    DONE,
    BudgetSpent,
    ClaimLost,
    JobKind,
    Outcome,
    Run,
)
from agent_gateway.background.runner import BackgroundRunner
from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.folding import Folder
from agent_gateway.llm.prompts.config import SessionPrompts
from stello.common.v1 import common_pb2
from stello.errors import Aborted, NotFound, session_archived
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

Op = storage_pb2.Operation
Check = storage_pb2.Precondition


@dataclass(frozen=True, slots=True)
class Consolidated:
    """What a consolidation answers besides its outcome: the memory as stored when it ended
    and the session's last seq then."""

    memory: str | None
    last_seq: int


class MemoryChanged(Exception):
    """Raised when a save finds the memory written since the run read it."""


@dataclass(frozen=True, slots=True)
class ConsolidationJob:
    """One consolidation of a session, for the runner."""

    consolidator: Consolidator
    kind: JobKind
    space_id: uuid.UUID
    session_id: uuid.UUID
    caller: Caller
    """The caller without a deadline: the run outlives the call that started it."""
    manual: bool
    deadline: float | None = None
    """The manual caller's deadline: how long it waits for another run."""
    after_turn: bool = False
    """Asked for by a committed turn: it waits for a run another process holds (which may
    have read the records before that turn), then folds what that run left."""

    @property
    def key(self) -> Hashable:
        """One consolidation of a session queued here at a time."""
        return (self.space_id, self.session_id, self.kind.name)

    @property
    def wait_until(self) -> float | None:
        """A manual call waits for a running consolidation (within its deadline), one a
        turn asked for as long as the other runs; one taken over does not wait."""
        if self.after_turn:
            return math.inf
        if not self.manual:
            return None
        return self.deadline if self.deadline is not None else math.inf

    async def run(self, run: Run) -> Outcome:
        """Consolidate (the module docstring)."""
        return await self.consolidator.fold_into_memory(self, run)


class Consolidator:
    """Manual and automatic consolidation over storage, the provider and the runner."""

    def __init__(
        self,
        storage: StorageClient,
        folder: Folder,
        prompts: SessionPrompts,
        runner: BackgroundRunner,
        *,
        every_n_turns: int = 0,
        max_calls: int = 20,
        registry: Callable[[], CollectorRegistry | None] = lambda: None,
    ) -> None:
        """Set up the consolidator.

        Args:
            storage: the storage client.
            folder: makes the calls to the LLM that writes the memory.
            prompts: the session's consolidator prompt and the configured texts.
            runner: runs the consolidations.
            every_n_turns: consolidate automatically every N committed turns; 0 = never.
            max_calls: model calls one consolidation may make.
            registry: gives the metrics registry to count on, once the server exists.
        """
        self._storage = storage
        self._folder = folder
        self._prompts = prompts
        self._runner = runner
        self._every = every_n_turns
        self._registry = registry
        self._registered = False
        self.kind = JobKind("consolidate", common_pb2.JOB_KIND_CONSOLIDATE, max_calls)
        runner.register(
            common_pb2.JOB_KIND_CONSOLIDATE,
            lambda caller, space_id, session_id: self.job(
                caller, space_id, session_id, manual=False
            ),
        )
        self.outcomes = Counter(
            "stello_gateway_auto_consolidations",
            "Automatic consolidations after committed turns, by outcome.",
            ["outcome"],
            registry=None,
        )

    def job(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, *, manual: bool
    ) -> ConsolidationJob:
        """The job of one consolidation (its calls not bound to the caller's deadline)."""
        unbounded = replace(caller, deadline=None)
        return ConsolidationJob(
            self, self.kind, space_id, session_id, unbounded, manual, caller.deadline
        )

    async def consolidate(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> Outcome:
        """Consolidate now and wait: the outcome, its `result` a `Consolidated`.

        Raises:
            FailedPrecondition: reason SESSION_ARCHIVED.
        """
        meta = await self._storage.get_session(caller, space_id, session_id)
        if meta.status == common_pb2.SESSION_STATUS_ARCHIVED:
            raise session_archived(session_id, "is archived; unarchive it to consolidate it")
        return await self._runner.run(self.job(caller, space_id, session_id, manual=True))

    async def fold_into_memory(self, job: ConsolidationJob, run: Run) -> Outcome:
        """The run's work: chunks folded and saved one by one, started over when the memory
        is put meanwhile, until no record is left or the budget is spent."""
        prompt = await self._prompts.consolidator(job.caller, job.space_id, job.session_id)
        capacity = self._folder.capacity(prompt)
        first = True
        while True:
            state = await self._storage.memory_state(job.caller, job.space_id, job.session_id)
            memory = state.slots.memory if state.slots.HasField("memory") else None
            progress = state.progress
            run.covered_until_seq = progress.memory_covered_until_seq
            try:
                memory, folded, spent = await self._chunks(
                    job, run, memory, progress, capacity, prompt
                )
                if not folded and not spent and first and not run.waited and memory:
                    # Nothing new: the memory alone, as the reference does. Without a
                    # memory either there is nothing to fold: no call, the memory unset.
                    memory = await self._alone(job, run, memory, progress, prompt)
            except MemoryChanged:
                first = False
                continue
            except BudgetSpent:
                spent = True
            status = BUDGET_SPENT if spent else DONE
            return run.outcome(status, self._result(run, memory, progress))

    @staticmethod
    def _result(run: Run, memory: str | None, progress: common_pb2.HistoryProgress) -> Consolidated:
        return Consolidated(memory, max(progress.last_seq, run.covered_until_seq))

    async def _chunks(
        self,
        job: ConsolidationJob,
        run: Run,
        memory: str | None,
        progress: common_pb2.HistoryProgress,
        capacity: int,
        prompt: str,
    ) -> tuple[str | None, bool, bool]:
        """Fold and save every chunk after the memory's seq; (the memory now, whether any
        chunk was, whether the budget ran out first)."""
        folded = False
        version = progress.memory_version
        chunks = self._folder.chunks(
            self._storage,
            job.caller,
            job.space_id,
            job.session_id,
            progress.memory_covered_until_seq,
            capacity,
        )
        async with aclosing(chunks):
            async for chunk in chunks:
                try:
                    answer = await run.call(
                        self._folder.consolidate(
                            memory, chunk, prompt=prompt, what=_what(job), meter=run.spend
                        )
                    )
                except BudgetSpent:
                    return memory, folded, True
                await self._save(job, run, answer, chunk[-1].seq, version)
                memory, version, folded = answer, version + 1, True
        return memory, folded, False

    async def _alone(
        self,
        job: ConsolidationJob,
        run: Run,
        memory: str | None,
        progress: common_pb2.HistoryProgress,
        prompt: str,
    ) -> str:
        """One call over the memory alone, saved."""
        answer = await run.call(
            self._folder.consolidate(memory, [], prompt=prompt, what=_what(job), meter=run.spend)
        )
        await self._save(
            job, run, answer, progress.memory_covered_until_seq, progress.memory_version
        )
        return answer

    async def _save(
        self, job: ConsolidationJob, run: Run, memory: str, covered: int, version: int
    ) -> None:
        """Store `memory` covering `covered` over the memory at `version`, with the run's
        progress, while the run holds the job.

        Raises:
            MemoryChanged: the memory was written since (that write stays).
            ClaimLost: another run has the job.
        """
        sid = str(job.session_id)
        put = Op.PutMemoryOp(session_id=sid, content=memory, covered_until_seq=covered)
        unchanged = Check.MemoryVersionCheck(session_id=sid, expected=version)
        try:
            await self._storage.transact(
                job.caller,
                job.space_id,
                [Op(put_memory=put), run.progress(covered)],
                request_id="",
                preconditions=[run.claim_check(), Check(memory_version=unchanged)],
            )
        except Aborted as exc:
            failed = {violation.type for violation in exc.violations}
            if "background_job" in failed:
                raise ClaimLost(
                    f"the consolidation of session {job.session_id} was taken over by another "
                    "run; this one saved nothing more"
                ) from exc
            raise MemoryChanged from exc

    def after_turn(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, turn_count: int
    ) -> None:
        """Submit a consolidation when `turn_count` hits the interval. While one runs here,
        one more runs after it; while another process runs one, it waits for that run: the
        run under way may have read the records before this turn committed, and no turn is
        left out of the memory once the turns stop (explore4 F8)."""
        if self._every <= 0 or turn_count <= 0 or turn_count % self._every:
            return
        job = replace(self.job(caller, space_id, session_id, manual=False), after_turn=True)
        self._runner.submit(
            job, again=True, when_done=lambda done: self._count(done, session_id, turn_count)
        )

    def _count(self, task: asyncio.Task[Outcome], session_id: uuid.UUID, turn_count: int) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, NotFound):
            # The user deleted the session (or its space) while it was consolidated.
            self.outcomes.labels("failed").inc()
            log.info(
                "automatic consolidation of session %s after turn %d ended: %s (deleted meanwhile)",
                session_id,
                turn_count,
                error,
            )
        elif error is not None:
            self.outcomes.labels("failed").inc()
            log.warning(
                "automatic consolidation of session %s after turn %d failed: %s",
                session_id,
                turn_count,
                error,
            )
        elif not task.result().busy:
            self.outcomes.labels("succeeded").inc()

    def start(self) -> None:
        """Count on the server's metrics registry (called once the server exists)."""
        registry = self._registry()
        if registry is not None and not self._registered:
            registry.register(self.outcomes)
            self._registered = True

    async def stop(self) -> None:
        """Nothing to stop: the runner stops the consolidations."""


def _what(job: ConsolidationJob) -> str:
    """The consolidation, as a failed call's message names it."""
    return f"the consolidation of session {job.session_id}"
