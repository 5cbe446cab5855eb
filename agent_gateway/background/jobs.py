"""What the background runner runs: a job's kind, its run, its budget and its outcome (DESIGN §4.8).

A `Job` names its kind, its session and the caller it acts for, and does its
work in `run(run)`. The `Run` it is handed is the job's claim (the database's
decision that this run, of every gateway process, is the one working on the
job), its budget of model calls, and the way to save: every save is a
Transact checked by `Run.claim_check()` with `Run.progress()` among its
operations, so a run that lost its claim saves nothing. A model call goes
through `Run.call`: it takes one call of the budget first (`BudgetSpent` when
none is left: the job then ends with its progress saved, status
BUDGET_SPENT), counts the tokens the provider reports, and is cut short
(`ClaimLost`) when the claim is lost or the runner stops.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agent_gateway.clients import Caller
from agent_gateway.llm import Usage
from stello.common.v1 import common_pb2
from stello.errors import StelloError, Unavailable
from stello.storage.v1 import storage_pb2

T = TypeVar("T")
Status = common_pb2.JobStatus
DONE = common_pb2.JOB_STATUS_DONE
BUDGET_SPENT = common_pb2.JOB_STATUS_BUDGET_SPENT
STOPPED = common_pb2.JOB_STATUS_STOPPED
FAILED = common_pb2.JOB_STATUS_FAILED


@dataclass(frozen=True, slots=True)
class JobKind:
    """A kind of background work and its bounds."""

    name: str
    """The kind's name in metrics and logs."""
    stored: common_pb2.JobKind | None = None
    """The kind the database claims; None: not claimed (a lease release: the turn lease
    is its own claim)."""
    max_calls: int = 0
    """Model calls one run may make (0: it makes none)."""
    capped: bool = True
    """Whether it counts against the runner's concurrency cap (model work does; a lease
    release, which must not wait behind it, does not)."""


class BudgetSpent(Exception):
    """Raised by `Run.call` when the run has no model call left."""


class ClaimLost(StelloError):
    """Raised when the run may no longer work on its job (another run took the claim, or the
    gateway is stopping): nothing more of it is saved."""

    code = Unavailable.code


@dataclass(slots=True)
class Budget:
    """The model calls a run may still make, and what it spent."""

    max_calls: int
    calls: int = 0
    tokens: int = 0

    @property
    def left(self) -> int:
        """Calls left."""
        return self.max_calls - self.calls


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: its status, how far its saved progress covers, what it spent, and
    what the job answers its caller (`result`)."""

    status: Status
    covered_until_seq: int = 0
    model_calls: int = 0
    tokens: int = 0
    result: Any = None
    busy: bool = False
    """Not run: another run held the job (and the job does not wait)."""


@dataclass(slots=True)
class Run:
    """One run of a job: its claim, its budget, its saved progress."""

    kind: JobKind
    space_id: uuid.UUID
    session_id: uuid.UUID
    token: str = ""
    """The claim ("" for a kind that is not claimed)."""
    saved: common_pb2.BackgroundJob = field(default_factory=common_pb2.BackgroundJob)
    """The job as the claim found it: the progress earlier runs saved."""
    waited: bool = False
    """Whether the run started only after another run of the job ended."""
    budget: Budget = field(default_factory=lambda: Budget(0))
    covered_until_seq: int = 0
    """How far this run's saves cover (kept up by `progress`)."""
    lost: StelloError | None = None
    meter: Callable[[int, int], None] = field(default=lambda calls, tokens: None, repr=False)
    """Told each call (1, 0) and each call's tokens (0, n): the runner's metrics."""
    _calls: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)

    def check(self) -> None:
        """Raise why the run may no longer work, once it may not."""
        if self.lost is not None:
            raise self.lost

    def lose(self, error: StelloError) -> None:
        """Mark the run lost: a model call in flight is cut short with `error`."""
        if self.lost is None:
            self.lost = error
            for call in self._calls:
                call.cancel()

    async def call(self, work: Awaitable[T]) -> T:
        """Make one model call (`work`) within the budget, cut short once the run is lost.

        Raises:
            BudgetSpent: no call is left (`work` is not awaited).
            ClaimLost: the run was lost before or during the call.
        """
        self.check()
        if self.budget.left <= 0:
            close = getattr(work, "close", None)
            if close is not None:
                close()  # never awaited: no warning
            raise BudgetSpent
        self.budget.calls += 1
        self.meter(1, 0)
        task = asyncio.ensure_future(work)
        self._calls.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            if self.lost is not None and task.cancelled():
                raise self.lost from None
            raise
        finally:
            self._calls.discard(task)

    def spend(self, usage: Usage) -> None:
        """Count a call's tokens (the Folder's meter)."""
        self.budget.tokens += usage.total_tokens
        self.meter(0, usage.total_tokens)

    def claim_check(self) -> storage_pb2.Precondition:
        """The precondition every save of the run carries: its token still holds the job."""
        check = storage_pb2.Precondition.BackgroundJobCheck(
            session_id=str(self.session_id), kind=self.kind.stored, token=self.token
        )
        return storage_pb2.Precondition(background_job=check)

    def progress(
        self, covered_until_seq: int, *, release: bool = False, status: Status = DONE
    ) -> storage_pb2.Operation:
        """The operation that saves the run's progress (and, with `release`, ends it)."""
        self.covered_until_seq = max(self.covered_until_seq, covered_until_seq)
        update = storage_pb2.Operation.UpdateJobOp(
            session_id=str(self.session_id),
            kind=self.kind.stored,
            token=self.token,
            covered_until_seq=self.covered_until_seq,
            model_calls=self.budget.calls,
            tokens=self.budget.tokens,
            release=release,
            status=status if release else common_pb2.JOB_STATUS_UNSPECIFIED,
        )
        return storage_pb2.Operation(update_job=update)

    def outcome(self, status: Status, result: Any = None) -> Outcome:
        """The run's outcome with its progress and spend."""
        return Outcome(
            status, self.covered_until_seq, self.budget.calls, self.budget.tokens, result
        )


class Job(Protocol):
    """Background work on one session, acting for `caller` (a frozen dataclass will do)."""

    @property
    def kind(self) -> JobKind:
        """The job's kind."""
        ...

    @property
    def space_id(self) -> uuid.UUID:
        """The session's space."""
        ...

    @property
    def session_id(self) -> uuid.UUID:
        """The session worked on."""
        ...

    @property
    def caller(self) -> Caller:
        """Whose key the job's calls carry (its deadline bounds only the wait for a claim)."""
        ...

    @property
    def key(self) -> Hashable:
        """What makes two submitted jobs the same one (a second is not queued)."""
        ...

    @property
    def wait_until(self) -> float | None:
        """While another run holds the job: None = do not wait (the outcome is busy),
        else wait for it until this monotonic time (`float("inf")`: as long as it takes)."""
        ...

    async def run(self, run: Run) -> Outcome:
        """Do the work; the outcome (its status DONE or BUDGET_SPENT)."""
        ...
