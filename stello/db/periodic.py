"""A background task that repeats one round of work on a fixed interval (sweeps, purges).

A service app lists it among its background tasks: the kernel's server factory
starts it once the server is bound and stops it after the graceful shutdown.
A failed round is retried at the next interval. An outage (the database or a
service unreachable) is expected to pass: its first failed round is one WARNING
line, the next ones DEBUG, and the first round that works again says so; any
other failure is a fault, logged with its traceback every time, unless the round
said what an operator must do itself and raised `Refused` (a setting to fix: a
traceback per round would bury the line that names it).
Stopping lets a round under way finish (up to `STOP_GRACE_S`) rather than cancel it
in the middle of a transaction, whose connection would go back to its pool with the
transaction still open.

Each task counts its rounds (`Rounds`), and a server serves them on /metrics
(`RoundsCollector`): ``stello_background_rounds_total`` by task and outcome (ok,
outage, failed), ``stello_background_last_success_timestamp_seconds`` and
``stello_background_last_round_seconds``. An operator alerts on a task whose last
success is old (an erasure or a sweep that has stopped making progress). A task that
runs periodic tasks of its own (the gateway's background runner, its job takeover)
names them (`RunsPeriodic`), and they are counted as the server's own.

A round across spaces (the maintenance tasks: a first statement over every space,
multi-shard on Citus) fails whole when one node is out of reach, though most spaces
live on nodes that answer (DESIGN §4.7: maintenance sweeps per space). Such a task
falls back, after that failure only, to its work space by space (`by_space`): the
spaces listed from `spaces` (a reference table: the coordinator's placement answers
while a worker is down), each one's statements pinned to it, those whose node is out
of reach skipped (on Citus, once one space of a node was, the node's other spaces: a node
that does not answer costs the round one bound, not one per space). The skipped spaces are
counted
(``stello_background_skipped_spaces_total``) and said once per round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

import asyncpg
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stello.db.failures import CONNECTION_ERRORS, REFUSED, RETRY, refusal
from stello.db.maintenance import SpaceNode
from stello.db.tasks import cancel_and_wait
from stello.errors import Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

OUTAGES: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    *REFUSED,
    Unavailable,
    asyncpg.QueryCanceledError,
)
"""Failures of a round that say what it needs cannot be reached or refuses work for a while
(the database read-only, out of disk space, or lacking migrations; a node that does not
answer within the maintenance bound, `stello.db.maintenance.MAINTENANCE_TIMEOUT_S`, or a
cancel), not that it is wrong."""

OUT_OF_REACH: tuple[type[BaseException], ...] = (Unavailable, asyncpg.QueryCanceledError)
"""How a unit of work (`stello.db.pool.in_transaction`) says a node is out of reach: `Unavailable`
(a lost connection, Citus's `transient` errors) or its statement timed out (the bound)."""


class Refused(Exception):
    """Raised by a round that cannot work until an operator acts, after saying so itself
    (a rate-limited line naming the setting): counted as failed, logged no further."""


STOP_GRACE_S = 5.0
"""How long `stop` waits for a round under way before cancelling it."""


@dataclass(slots=True)
class Rounds:
    """What a periodic task's rounds came to so far."""

    ok: int = 0
    outage: int = 0
    """Rounds that failed for an outage (`OUTAGES`): retried, expected to pass."""
    failed: int = 0
    """Rounds that failed otherwise: a fault, logged with its traceback."""
    last_success: float | None = None
    """When the last round that worked ended (Unix time), None before one did."""
    last_seconds: float = 0.0
    """How long the last round took, however it ended."""
    skipped_spaces: int = 0
    """Spaces a round done space by space (`Periodic.by_space`) skipped, out of reach."""


@dataclass(slots=True)
class BySpace(Generic[T]):
    """What work done space by space came to (`reachable_spaces`)."""

    results: list[T]
    """What the work answered for each space it reached, in the listed order."""
    spaces: int
    """How many spaces were listed."""
    skipped: int
    """How many were skipped, out of reach."""
    nodes_out: list[str]
    """The nodes found out of reach (on Citus), sorted."""


async def reachable_spaces(
    failure: BaseException,
    spaces: Callable[[], Awaitable[list[SpaceNode]]],
    work: Callable[[uuid.UUID], Awaitable[T]],
    enough: Callable[[], bool] = lambda: False,
) -> BySpace[T]:
    """`work` for each of the `spaces` (`stello.db.maintenance.space_ids`) after a look across
    spaces failed with `failure` (one of `OUT_OF_REACH`): those out of reach skipped (once one
    space of a node was, the node's others), until `enough()` says so.

    Raises:
        BaseException: `failure` again when the spaces cannot be listed or every space was
            out of reach.
    """
    try:
        listed = await spaces()
    except OUT_OF_REACH:
        raise failure from None
    results: list[T] = []
    skipped = 0
    out: set[str] = set()
    for space in listed:
        if space.node in out:
            skipped += 1
            continue
        try:
            results.append(await work(space.id))
        except OUT_OF_REACH:
            skipped += 1
            if space.node is not None:
                out.add(space.node)
        if enough():
            break
    if listed and skipped == len(listed):
        raise failure
    return BySpace(results, len(listed), skipped, sorted(out))


class Periodic:
    """Runs `run_once` every `interval_s` seconds in a task until stopped."""

    task_name = "stello-periodic"
    what = "periodic work"
    first_round_waits = False
    """Whether the first round comes one interval after `start` (or a `wake`), not at once."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()
        self._in_round = False
        self._stopping = False
        self._outage = False
        self.rounds = Rounds()

    @property
    def running(self) -> bool:
        """Whether the background task is alive."""
        return self._task is not None and not self._task.done()

    @property
    def stopping(self) -> bool:
        """Whether `stop` was called: a round of many steps ends after the step under way."""
        return self._stopping

    def start(self) -> None:
        """Begin in the background (idempotent); needs a running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End the task and wait for it (idempotent): a round under way may finish first
        (up to `grace_s`); a task waiting for its next round is cancelled at once."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        if self._in_round:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace_s):
                    await asyncio.shield(task)
        await cancel_and_wait(task)

    def wake(self) -> None:
        """Run the next round now instead of at the end of the interval."""
        self._woken.set()

    async def run_once(self) -> object:
        """One round of the work (subclasses say what)."""
        raise NotImplementedError

    async def whole_or_by_space(
        self,
        whole: Callable[[], Awaitable[T]],
        spaces: Callable[[], Awaitable[list[SpaceNode]]],
        work: Callable[[uuid.UUID], Awaitable[int | None]],
    ) -> T | int:
        """The round's work across spaces (`whole`); when it fails for a node out of reach
        (`OUT_OF_REACH`), the round again space by space (`by_space`)."""
        try:
            return await whole()
        except OUT_OF_REACH as exc:
            return await self.by_space(exc, spaces, work)

    async def by_space(
        self,
        failure: BaseException,
        spaces: Callable[[], Awaitable[list[SpaceNode]]],
        work: Callable[[uuid.UUID], Awaitable[int | None]],
    ) -> int:
        """The round again space by space, after its work across spaces failed with `failure`
        (one of `OUT_OF_REACH`): `work` for each of the `spaces`
        (`stello.db.maintenance.space_ids`),
        those out of reach skipped (counted, and said in one line); the sum of what `work`
        returned. `failure` is raised again
        when the spaces cannot be listed or every space was out of reach (the round is an
        outage)."""
        went = await reachable_spaces(failure, spaces, work, lambda: self._stopping)
        self._skipped(went.skipped, went.spaces, went.nodes_out, failure)
        return sum(done or 0 for done in went.results)

    def _skipped(self, skipped: int, spaces: int, nodes: list[str], failure: BaseException) -> None:
        self.rounds.skipped_spaces += skipped
        if skipped:
            log.warning(
                "%s: a database node is out of reach (%s: %s); done space by space, "
                "%d of %d spaces skipped this round%s",
                self.what,
                type(failure).__name__,
                failure,
                skipped,
                spaces,
                f" (those of {', '.join(nodes)})" if nodes else "",
            )

    def _outaged(self, exc: BaseException) -> None:
        """A round failed for an outage: one WARNING when it begins, DEBUG while it lasts.
        The line names the condition where one was named (`Unavailable`'s message, e.g. "the
        database refuses writes (read-only)"), else the exception."""
        level = logging.DEBUG if self._outage else logging.WARNING
        self._outage = True
        condition = refusal(exc)
        if condition is None and isinstance(exc, Unavailable):
            condition = exc.message.removesuffix(RETRY)
        if condition is None:
            condition = f"cannot reach what it needs ({type(exc).__name__}: {exc})"
        log.log(level, "%s failed: %s; retrying every %gs", self.what, condition, self._interval_s)

    async def _pause(self) -> None:
        """Until the interval has passed or `wake` was called."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._interval_s):
                await self._woken.wait()
        self._woken.clear()

    async def _run(self) -> None:
        if self.first_round_waits:
            await self._pause()
        while not self._stopping:
            self._in_round = True
            began = time.perf_counter()
            try:
                await self.run_once()
            except OUTAGES as exc:  # keep going: retried until what it needs is back
                self.rounds.outage += 1
                self._outaged(exc)
            except Refused:  # keep going: the operator may fix it meanwhile
                self.rounds.failed += 1
            except Exception:  # keep going, but a fault shows its traceback each time
                self.rounds.failed += 1
                log.exception("%s failed; retrying in %.1fs", self.what, self._interval_s)
            else:
                self.rounds.ok += 1
                self.rounds.last_success = time.time()
                if self._outage:
                    self._outage = False
                    log.info("%s works again", self.what)
            finally:
                self._in_round = False
                self.rounds.last_seconds = time.perf_counter() - began
            if self._stopping:
                return
            await self._pause()


@runtime_checkable
class RunsPeriodic(Protocol):
    """A background task that runs periodic tasks of its own (`periodic_tasks` finds them)."""

    def periodic(self) -> tuple[Periodic, ...]:
        """The periodic tasks it runs."""
        ...


def periodic_tasks(tasks: Iterable[object]) -> Iterator[Periodic]:
    """The periodic tasks among a server's background `tasks`, and those they run: what
    `RoundsCollector` counts (a task missing there had no series for an alert to watch)."""
    for task in tasks:
        if isinstance(task, Periodic):
            yield task
        elif isinstance(task, RunsPeriodic):
            yield from task.periodic()


ROUNDS = "stello_background_rounds"
SKIPPED = "stello_background_skipped_spaces"
LAST_SUCCESS = "stello_background_last_success_timestamp_seconds"
LAST_ROUND = "stello_background_last_round_seconds"


class RoundsCollector(Collector):
    """The rounds of a server's periodic tasks, labelled by `task_name`, as /metrics asks."""

    def __init__(self, tasks: Iterable[Periodic]) -> None:
        self._tasks = tuple(tasks)

    def describe(self) -> Iterator[Metric]:
        """The families, empty (what the registry checks names with)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with every task's rounds so far."""
        rounds, success, last, skipped = self._families()
        for task in self._tasks:
            name, counted = task.task_name, task.rounds
            for outcome, count in (
                ("ok", counted.ok),
                ("outage", counted.outage),
                ("failed", counted.failed),
            ):
                rounds.add_metric([name, outcome], count)
            if counted.last_success is not None:
                success.add_metric([name], counted.last_success)
            last.add_metric([name], counted.last_seconds)
            skipped.add_metric([name], counted.skipped_spaces)
        yield rounds
        yield success
        yield last
        yield skipped

    @staticmethod
    def _families() -> tuple[
        CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily
    ]:
        return (
            CounterMetricFamily(
                ROUNDS,
                "Rounds of a background task (sweep, erasure, purge), by outcome: ok, outage "
                "(retried), failed (a fault, logged with its traceback).",
                labels=["task", "outcome"],
            ),
            GaugeMetricFamily(
                LAST_SUCCESS, "When the task's last round that worked ended.", labels=["task"]
            ),
            GaugeMetricFamily(LAST_ROUND, "How long the task's last round took.", labels=["task"]),
            CounterMetricFamily(
                SKIPPED,
                "Spaces a round skipped because their database node was out of reach (the "
                "round went space by space after its work across spaces failed).",
                labels=["task"],
            ),
        )
