"""One run of a background job (DESIGN §4.8): its claim taken, renewed and given back, the
job run under its budget, its end stored and counted.

A claimed kind is claimed in the database (storage's ClaimJob) before it runs and
renewed every third of ``STELLO_GATEWAY_JOB_CLAIM_TTL_S`` while it runs, so a gateway
that dies frees its jobs within one TTL; a run that loses its claim saves nothing
more (`ClaimLost`), and a run stopped while its ClaimJob is under way gives back the
claim the answer grants. Each run ends by storing how it ended (UpdateJobOp with release):
DONE, BUDGET_SPENT, FAILED, or STOPPED. Mixed into `runner.BackgroundRunner`, which
queues and schedules the runs.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from agent_gateway.background.jobs import (
    BUDGET_SPENT,
    FAILED,
    STOPPED,
    Budget,
    BudgetSpent,
    ClaimLost,
    Job,
    Outcome,
    Run,
    Status,
)
from agent_gateway.background.metrics import OUTCOMES, RunnerMetrics
from agent_gateway.clients import Caller, StorageClient
from stello.db.tasks import ended_well, retrieved
from stello.errors import NotFound, StelloError
from stello.storage.v1 import storage_pb2

if TYPE_CHECKING:
    from agent_gateway.background.runner import RunnerLimits

log = logging.getLogger(__name__)


class JobRuns:
    """How `BackgroundRunner` claims and runs one job (see the module docstring)."""

    _storage: StorageClient
    _limits: RunnerLimits
    metrics: RunnerMetrics

    async def _claim(self, job: Job) -> storage_pb2.ClaimJobResponse:
        """ClaimJob, shielded: a run stopped meanwhile waits for the answer and gives back
        a claim it grants (STOPPED), which else would hold the job until its TTL."""
        caller = _background(job.caller).within(self._limits.call_timeout_s)
        assert job.kind.stored is not None
        claiming = asyncio.ensure_future(
            self._storage.claim_job(
                caller, job.space_id, job.session_id, job.kind.stored, self._limits.claim_ttl_s
            )
        )
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            claiming.add_done_callback(retrieved)  # its failure is moot: the run stops
            await asyncio.wait({claiming})  # cancelled again: the claim ends with its TTL
            if ended_well(claiming) and claiming.result().granted:
                claim = claiming.result()
                await self._release(job, self._run_of(job, claim, waited=False), STOPPED)
            raise

    async def _unclaimed(self, job: Job) -> Outcome:
        run = Run(job.kind, job.space_id, job.session_id, budget=Budget(job.kind.max_calls))
        return await self._running(job, run)

    def _run_of(self, job: Job, claim: storage_pb2.ClaimJobResponse, waited: bool) -> Run:
        """The run of `job` under the granted `claim`."""
        return Run(
            job.kind,
            job.space_id,
            job.session_id,
            token=claim.token,
            saved=claim.job,
            waited=waited,
            budget=Budget(job.kind.max_calls),
            covered_until_seq=claim.job.covered_until_seq,
        )

    async def _claimed(
        self, job: Job, claim: storage_pb2.ClaimJobResponse, waited: bool
    ) -> Outcome:
        run = self._run_of(job, claim, waited)
        renewal = asyncio.create_task(self._renew(job, run), name="stello-job-claim")
        status: Status = FAILED
        try:
            outcome = await self._running(job, run)
            status = outcome.status
            return outcome
        except BaseException as exc:
            status = STOPPED if isinstance(exc, asyncio.CancelledError | ClaimLost) else FAILED
            raise
        finally:
            renewal.cancel()
            await self._release(job, run, status)  # a no-op once another run has the job

    async def _running(self, job: Job, run: Run) -> Outcome:
        name = job.kind.name
        run.meter = lambda calls, tokens: self._spent(name, calls, tokens)
        self.metrics.running.labels(name).inc()
        try:
            outcome = await job.run(run)
        except BudgetSpent:
            outcome = run.outcome(BUDGET_SPENT)
        except asyncio.CancelledError:
            self.metrics.ended.labels(name, "stopped").inc()
            raise
        except Exception as exc:
            self.metrics.ended.labels(name, "failed").inc()
            if not isinstance(exc, StelloError) or isinstance(exc, ClaimLost):
                log.exception("%s job of session %s failed", name, job.session_id)
            elif isinstance(exc, NotFound):
                # The user deleted the session (or its space) while the job ran: the job
                # went with it, an expected outcome rather than a fault.
                log.info(
                    "%s job of session %s ended: %s (deleted meanwhile)", name, job.session_id, exc
                )
            else:
                log.warning("%s job of session %s failed: %s", name, job.session_id, exc)
            raise
        finally:
            self.metrics.running.labels(name).dec()
        self.metrics.ended.labels(name, OUTCOMES.get(outcome.status, "done")).inc()
        return outcome

    def _spent(self, name: str, calls: int, tokens: int) -> None:
        if calls:
            self.metrics.model_calls.labels(name).inc(calls)
        if tokens:
            self.metrics.tokens.labels(name).inc(tokens)

    async def _renew(self, job: Job, run: Run) -> None:
        """Renew the claim every third of its TTL; mark the run lost once another has it."""
        every = self._limits.claim_ttl_s / 3
        caller = _background(job.caller)
        assert job.kind.stored is not None
        while True:
            await asyncio.sleep(every)
            try:
                renewed = await self._storage.renew_job(
                    caller.within(every),
                    job.space_id,
                    job.session_id,
                    job.kind.stored,
                    run.token,
                    self._limits.claim_ttl_s,
                )
            except NotFound as exc:
                log.info(
                    "no claim of the %s job of %s to renew: %s (deleted meanwhile)",
                    job.kind.name,
                    job.session_id,
                    exc,
                )
                continue
            except StelloError as exc:
                # Tried again at the next tick: a late renewal still keeps a claim no other
                # run took meanwhile.
                log.warning(
                    "could not renew the %s job of %s: %s", job.kind.name, job.session_id, exc
                )
                continue
            if not renewed:
                log.warning("the %s job of %s was taken over", job.kind.name, job.session_id)
                run.lose(
                    ClaimLost(
                        f"the {job.kind.name} job of session {job.session_id} was taken over by "
                        "another run (its claim lapsed); nothing more of this run is saved"
                    )
                )
                return

    async def _release(self, job: Job, run: Run, status: Status) -> None:
        """End the run in the database (its claim given back, `status` stored)."""
        caller = _background(job.caller).within(self._limits.call_timeout_s)
        try:
            await self._storage.transact(
                caller,
                job.space_id,
                [run.progress(run.covered_until_seq, release=True, status=status)],
                request_id="",
            )
        except NotFound as exc:
            log.info(
                "no claim of the %s job of %s to end: %s (deleted meanwhile)",
                job.kind.name,
                job.session_id,
                exc,
            )
        except StelloError as exc:
            log.warning(
                "could not end the %s job of %s (its claim ends by itself): %s",
                job.kind.name,
                job.session_id,
                exc,
            )


def _background(caller: Caller) -> Caller:
    """The caller without their deadline: the work outlives the call that started it."""
    return replace(caller, deadline=None)
