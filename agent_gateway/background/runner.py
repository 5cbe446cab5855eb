"""The gateway's one background runner (DESIGN §4.8): once per session, bounded, visible.

Every piece of work the gateway does after answering — consolidations, the
background fold, lease releases still being retried — is a `Job` given to
this runner, which:

- runs at most one job per (session, kind) across every gateway process: a
  claimed kind is claimed in the database (storage's ClaimJob) before it
  runs and renewed every third of ``STELLO_GATEWAY_JOB_CLAIM_TTL_S`` while it
  runs, so a gateway that dies frees its jobs within one TTL and the next run
  takes them over from their saved progress; a job whose claim another run
  holds is skipped (`Outcome.busy`), or waited for when its caller waits;
  in this process, a job already queued or running is not queued twice;
- runs at most ``STELLO_GATEWAY_BACKGROUND_MAX_JOBS`` model jobs at once
  (the others queue; lease releases are not held back by them);
- gives each run its kind's budget of model calls (`jobs.Run.call`);
- ends each run by storing how it ended (UpdateJobOp with release): DONE,
  BUDGET_SPENT, FAILED, or STOPPED when the gateway stops: `stop` lets runs
  finish for a moment (``STELLO_GATEWAY_BACKGROUND_STOP_GRACE_S``), then
  cuts them; their claims are given back, so they resume at once elsewhere;
- counts on the server's Prometheus registry, by kind: jobs queued and
  running (gauges), runs ended by outcome, model calls and tokens spent.

This module queues and schedules the runs; one run (its claim, renewal and
release) is `running.JobRuns`', mixed in; the metrics are `metrics`', and the
takeover of jobs left without a gateway, with no new trigger, is `takeover`'s.

Failures are logged and counted, never swallowed. `submit` is fire and
forget (the automatic consolidation, the fold, releases); `run` waits for the
outcome (a manual Consolidate), and a caller that stops waiting does not stop
the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from agent_gateway.background.jobs import Job, Outcome
from agent_gateway.background.metrics import RunnerMetrics
from agent_gateway.background.running import JobRuns
from agent_gateway.background.takeover import JobFactory, Takeover
from agent_gateway.clients import Caller, StorageClient
from stello.common.v1 import common_pb2
from stello.db.periodic import Periodic
from stello.db.tasks import retrieved
from stello.errors import DeadlineExceeded, Unavailable

log = logging.getLogger(__name__)

WhenDone = Callable[["asyncio.Task[Outcome]"], None]
"""What `submit` calls with a run's task once it ends."""


@dataclass(frozen=True, slots=True)
class RunnerLimits:
    """The runner's bounds (the gateway's settings)."""

    max_jobs: int = 4
    """Model jobs running at once in this process."""
    claim_ttl_s: int = 30
    """A claim's lifetime; renewed every third of it."""
    stop_grace_s: float = 5.0
    """How long `stop` lets runs finish before cutting them."""
    call_timeout_s: float = 10.0
    """Bound of each claim, renewal and release call."""
    takeover_key: str | None = None
    """The key whose spaces' orphaned jobs this runner takes over (None: none)."""
    takeover_interval_s: float = 30.0
    """How often it looks for them (0: never)."""
    takeover_batch: int = 100
    """At most this many taken over per look."""

    @property
    def poll_s(self) -> float:
        """How often a waiting job asks for a claim another run holds."""
        return min(1.0, self.claim_ttl_s / 6)


class BackgroundRunner(JobRuns):
    """Runs the gateway's background jobs (see the module docstring)."""

    def __init__(
        self,
        storage: StorageClient,
        limits: RunnerLimits,
        *,
        registry: Callable[[], CollectorRegistry | None] = lambda: None,
    ) -> None:
        self._storage = storage
        self._limits = limits
        self._registry = registry
        self._registered = False
        self._slots = asyncio.Semaphore(limits.max_jobs)
        self._tasks: set[asyncio.Task[Outcome]] = set()
        self._keys: dict[Hashable, asyncio.Task[Outcome]] = {}
        self._again: dict[Hashable, tuple[Job, WhenDone | None]] = {}
        self._stopping = False
        self._factories: dict[common_pb2.JobKind, JobFactory] = {}
        self._takeover: Takeover | None = None
        if limits.takeover_key and limits.takeover_interval_s > 0:
            self._takeover = Takeover(self, limits.takeover_interval_s)
        self.metrics = RunnerMetrics()

    def register(self, kind: common_pb2.JobKind, factory: JobFactory) -> None:
        """How to build a job of the stored `kind` that is taken over (automatic: it waits
        for nobody)."""
        self._factories[kind] = factory

    async def take_over(self) -> int:
        """Submit the jobs left without a gateway in the takeover key's spaces (those of
        this process's own runs, and kinds with no factory, skipped); how many."""
        key = self._limits.takeover_key
        if not key or self._stopping:
            return 0
        caller = Caller(key, request_id="job-takeover").within(self._limits.call_timeout_s)
        orphans = await self._storage.list_orphaned_jobs(caller, self._limits.takeover_batch)
        submitted = 0
        for orphan in orphans:
            factory = self._factories.get(orphan.kind)
            if factory is None:
                continue
            job = factory(Caller(key), uuid.UUID(orphan.space_id), uuid.UUID(orphan.session_id))
            if self.submit(job, resumed=True) is not None:
                submitted += 1
                log.info(
                    "taking over the %s job of session %s (its progress covers seq %d)",
                    job.kind.name,
                    job.session_id,
                    orphan.job.covered_until_seq,
                )
        return submitted

    def submit(
        self,
        job: Job,
        *,
        resumed: bool = False,
        again: bool = False,
        when_done: WhenDone | None = None,
    ) -> asyncio.Task[Outcome] | None:
        """Run `job` in the background; None when the same job is already queued or running
        here, or the runner is stopping. `resumed`: a job taken over, which continues an
        earlier run's work (it starts as one that waited for another run). `again`: when
        the same job is queued or running here, run `job` once more after it ends (the
        work it was asked for may have come after that run read what it works on; several
        such requests meanwhile make one run, told to the last request's `when_done`).
        `when_done` is called with the task of the run that does `job`, now or later."""
        if self._stopping:
            log.info("%s job of session %s not started: stopping", job.kind.name, job.session_id)
            return None
        if job.key in self._keys:
            if again:
                self._again[job.key] = (job, when_done)
            return None
        task = self._start(job, waited=resumed)
        self._keys[job.key] = task
        task.add_done_callback(lambda _: self._after(job.key))
        if when_done is not None:
            task.add_done_callback(when_done)
        return task

    def _after(self, key: Hashable) -> None:
        """A submitted job ended: the next run asked for meanwhile, if any, starts."""
        self._keys.pop(key, None)
        pending = self._again.pop(key, None)
        if pending is not None:
            job, when_done = pending
            self.submit(job, when_done=when_done)

    async def run(self, job: Job) -> Outcome:
        """Run `job` and wait for its outcome; the run goes on if the caller stops waiting.

        Raises:
            Unavailable: the runner is stopping.
            StelloError: what the job raised (its failure was stored and counted).
        """
        if self._stopping:
            raise Unavailable("the gateway is shutting down; try again")
        task = self._start(job)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                raise Unavailable(
                    f"the gateway is shutting down; the {job.kind.name} of session "
                    f"{job.session_id} stopped with its progress saved: try again"
                ) from None
            raise

    def _start(self, job: Job, *, waited: bool = False) -> asyncio.Task[Outcome]:
        self.metrics.queued.labels(job.kind.name).inc()
        task = asyncio.create_task(self._execute(job, waited), name=f"stello-{job.kind.name}-job")
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Outcome]) -> None:
        self._tasks.discard(task)
        retrieved(task)  # its failure was logged by `_execute` already

    async def _execute(self, job: Job, waited: bool) -> Outcome:
        name = job.kind.name
        queued = True
        try:
            if job.kind.stored is None:
                self._dequeued(name)
                queued = False
                return await self._unclaimed(job)
            while True:
                async with self._slot(job):
                    if queued:
                        self._dequeued(name)
                        queued = False
                    claim = await self._claim(job)
                    if claim.granted:
                        return await self._claimed(job, claim, waited)
                if not self._waits(job):
                    self.metrics.ended.labels(name, "busy").inc()
                    return Outcome(claim.job.status, claim.job.covered_until_seq, busy=True)
                waited = True
                await asyncio.sleep(self._limits.poll_s)
        finally:
            if queued:
                self.metrics.queued.labels(name).dec()

    def _dequeued(self, name: str) -> None:
        self.metrics.queued.labels(name).dec()

    @contextlib.asynccontextmanager
    async def _slot(self, job: Job) -> AsyncIterator[None]:
        if not job.kind.capped:
            yield
            return
        async with self._slots:
            yield

    def _waits(self, job: Job) -> bool:
        """Whether `job` waits for another run's claim (raising past its wait)."""
        until = job.wait_until
        if until is None:
            return False
        if time.monotonic() + self._limits.poll_s > until:
            raise DeadlineExceeded(
                f"another {job.kind.name} run of session {job.session_id} is still working; "
                "its progress is saved as it goes: try again later"
            )
        return True

    async def drain(self) -> None:
        """Wait for every job queued or running (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def periodic(self) -> tuple[Periodic, ...]:
        """Its periodic task, the takeover (when it has one): counted with the server's
        background tasks (`stello.db.periodic.RunsPeriodic`)."""
        return () if self._takeover is None else (self._takeover,)

    def start(self) -> None:
        """Count on the server's metrics registry (called once the server exists)."""
        registry = self._registry()
        if registry is not None and not self._registered:
            self.metrics.register(registry)
            self._registered = True
        if self._takeover is not None:
            self._takeover.start()

    async def stop(self) -> None:
        """Take no new job; let runs finish for a moment, then cut them (their claims are
        given back with status STOPPED, their progress kept)."""
        self._stopping = True
        if self._takeover is not None:
            await self._takeover.stop()
        if not self._tasks:
            return
        _, late = await asyncio.wait(list(self._tasks), timeout=self._limits.stop_grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
