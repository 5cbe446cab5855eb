"""N worker processes behind one port, and the supervisor that keeps them (DESIGN §9 "Cores").

A service process has one event loop, so it uses one core. With ``--workers N``
(``STELLO_<SERVICE>_WORKERS``) the process started becomes a supervisor:

- it claims the ports (`stello.serving.ports`: a second deployment on them is refused)
  and does what must happen once — the embedded PostgreSQL, migrations, keys,
  the console (`stello up`) — before any worker starts;
- it starts the workers by exec (``python -m ...``), never by fork: gRPC is not
  fork-safe once started, and its fork handlers are off (`stello/__init__.py`).
  Each worker is a whole server with its own event loop, database pool (the
  budget `STELLO_DB_POOL_MAX_SIZE` split between them), health, background tasks
  (the sweeper and the event purge take advisory locks, as replicas do) and
  event pollers, and binds the claimed port with SO_REUSEPORT;
- a worker says it is ready on a pipe of its own (``ready <metrics port>``),
  and watches a lifeline pipe: when the supervisor dies, even by SIGKILL, the
  lifeline closes and the worker shuts down, so no orphan keeps the port; one
  that exits before it is ready fails the start, naming it, once every other
  worker's start has ended and each was stopped;
- a worker that exits on its own is replaced (its connections fail over to the
  others meanwhile; clients retry UNAVAILABLE). A worker that keeps failing to
  start stops the service: the supervisor stops every worker and exits 1, so a
  port is served by all its workers or by none, never by a crash loop;
- SIGTERM or SIGINT is passed to every worker, which shut down gracefully
  (health NOT_SERVING, drain, pool closed); a worker still running after the
  grace period is killed.

`WorkerRole` is the worker's side: ``STELLO_WORKER`` (set by the supervisor,
internal) says which worker a process is and where its pipes are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

WORKER_VARIABLE = "STELLO_WORKER"
"""The environment variable that makes a process a worker (internal: the supervisor sets it)."""

READY_TIMEOUT_S = 120.0
"""Longest a worker may take to say it is ready (its pool and server started)."""

MAX_FAILED_STARTS = 5
"""A worker that exits this many times in a row before it was ready stops the service."""


def split_pool(max_size: int, min_size: int, workers: int) -> tuple[int, int]:
    """Each worker's (max, min) pool size: together they stay within `max_size` connections.

    Every worker needs one connection at least, so a budget below the number of
    workers is raised to one per worker (the supervisor logs it).
    """
    each = max(1, max_size // workers)
    return each, min(min_size, each)


@dataclass(frozen=True, slots=True)
class WorkerRole:
    """What makes a process a worker: its index and its pipes to the supervisor."""

    index: int
    ready_fd: int
    lifeline_fd: int
    metrics: bool = False
    """Serve this worker's /metrics on a free loopback port (the supervisor merges them)."""

    @classmethod
    def from_environment(cls) -> WorkerRole | None:
        """The role ``STELLO_WORKER`` describes; None in a process started by a person."""
        raw = os.environ.get(WORKER_VARIABLE)
        if not raw:
            return None
        data = json.loads(raw)
        return cls(data["index"], data["ready_fd"], data["lifeline_fd"], data["metrics"])

    def encode(self) -> str:
        """The value of ``STELLO_WORKER`` for this role."""
        return json.dumps(
            {
                "index": self.index,
                "ready_fd": self.ready_fd,
                "lifeline_fd": self.lifeline_fd,
                "metrics": self.metrics,
            }
        )

    def ready(self, *metrics_ports: int | None) -> None:
        """Tell the supervisor this worker serves (and where its metrics are: one port per
        service it runs that serves them, 0 or None for one that does not)."""
        ports = " ".join(str(port or 0) for port in metrics_ports or (None,))
        with os.fdopen(self.ready_fd, "w") as pipe:
            pipe.write(f"ready {ports}\n")

    def watch_lifeline(self) -> None:
        """SIGTERM this process when the supervisor is gone (its end of the lifeline closes).

        Needs a running loop; the server's own SIGTERM handling then shuts it down.
        """
        loop = asyncio.get_running_loop()

        def closed() -> None:
            with contextlib.suppress(OSError):
                if os.read(self.lifeline_fd, 1):
                    return  # the supervisor writes nothing: only EOF matters
            loop.remove_reader(self.lifeline_fd)
            log.warning("worker %d: the supervisor is gone; stopping", self.index)
            os.kill(os.getpid(), signal.SIGTERM)

        loop.add_reader(self.lifeline_fd, closed)


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What the supervisor runs: `workers` copies of `command` with `env` added."""

    name: str
    command: Sequence[str]
    workers: int
    env: Mapping[str, str] = field(default_factory=dict)
    metrics: bool = False
    grace_s: float = 10.0


@dataclass(slots=True)
class Worker:
    """One worker process the supervisor keeps."""

    index: int
    process: asyncio.subprocess.Process | None = None
    metrics_ports: tuple[int, ...] = ()
    """Where it serves /metrics, as its ready line said (0: that service serves none)."""
    failed_starts: int = 0
    started_at: float = 0.0


class WorkerFailed(RuntimeError):
    """Raised when a worker cannot be started (it exited before it was ready)."""


class Supervisor:
    """Starts a plan's workers, replaces the ones that die, stops them all (module doc)."""

    def __init__(self, plan: WorkerPlan) -> None:
        self._plan = plan
        self._workers = [Worker(i) for i in range(plan.workers)]
        self._lifeline_read, self._lifeline_write = os.pipe()
        os.set_inheritable(self._lifeline_write, False)
        self._stopping = False
        self._failed: str | None = None

    @property
    def pids(self) -> list[int]:
        """The workers' process ids (those running)."""
        return [w.process.pid for w in self._workers if w.process is not None]

    @property
    def metrics_ports(self) -> dict[int, int]:
        """Where each ready worker serves its /metrics, by worker index."""
        return self.metrics_ports_of(0)

    def metrics_ports_of(self, service: int) -> dict[int, int]:
        """Where each ready worker serves the /metrics of its `service`-th service (in the
        order its ready line names them), by worker index."""
        return {
            w.index: w.metrics_ports[service]
            for w in self._workers
            if len(w.metrics_ports) > service and w.metrics_ports[service]
        }

    async def start(self) -> None:
        """Start every worker and wait until each is ready.

        Raises:
            WorkerFailed: one exited (or was not ready in time) first; the message names
                it. Every other worker's start has ended and each was stopped before
                (one still being spawned is killed by its cancelled spawn, none is left
                behind the supervisor's back).
        """
        starting = [asyncio.ensure_future(self._start(worker)) for worker in self._workers]
        try:
            await asyncio.wait(starting, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            pending = [task for task in starting if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            failed: list[tuple[Worker, BaseException]] = []
            for worker, task in zip(self._workers, starting, strict=True):
                if not task.cancelled() and (exc := task.exception()) is not None:
                    failed.append((worker, exc))
            if failed or pending:
                await self.stop()
        if not failed:
            return
        worker, exc = failed[0]
        if not isinstance(exc, WorkerFailed):
            raise exc
        others = "; the other workers were stopped" if len(self._workers) > 1 else ""
        raise WorkerFailed(f"{self._plan.name} worker {worker.index} {exc}{others}") from None

    async def run(self) -> None:
        """Keep the workers running until `stop`; raise WorkerFailed when one cannot be."""
        watchers = [asyncio.create_task(self._keep(w)) for w in self._workers]
        try:
            await asyncio.gather(*watchers)
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def stop(self) -> None:
        """SIGTERM every worker, wait for them (the grace period, then SIGKILL)."""
        self._stopping = True
        running = {
            w.index: w.process for w in self._workers if w.process and w.process.returncode is None
        }
        for process in running.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if running:
            waits = [asyncio.ensure_future(p.wait()) for p in running.values()]
            _, pending = await asyncio.wait(waits, timeout=self._plan.grace_s + 5)
            for index, process in running.items():
                if process.returncode is None:
                    log.warning("%s worker %d did not stop in time: killed", self._plan.name, index)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            if pending:
                await asyncio.wait(pending)
        with contextlib.suppress(OSError):
            os.close(self._lifeline_write)
        with contextlib.suppress(OSError):
            os.close(self._lifeline_read)

    async def _keep(self, worker: Worker) -> None:
        while True:
            assert worker.process is not None
            code = await worker.process.wait()
            if self._stopping:
                return
            worker.metrics_ports = ()
            log.warning(
                "%s worker %d (pid %d) %s; starting another",
                self._plan.name,
                worker.index,
                worker.process.pid,
                _ended(code),
            )
            await self._restart(worker)

    async def _restart(self, worker: Worker) -> None:
        while not self._stopping:
            try:
                await self._start(worker)
                return
            except WorkerFailed as exc:
                if worker.failed_starts >= MAX_FAILED_STARTS:
                    raise WorkerFailed(
                        f"{self._plan.name} worker {worker.index} failed to start "
                        f"{worker.failed_starts} times in a row ({exc}); stopping the service"
                    ) from None
                await asyncio.sleep(min(0.25 * 2**worker.failed_starts, 10.0))

    async def _start(self, worker: Worker) -> None:
        ready_read, ready_write = os.pipe()
        role = WorkerRole(worker.index, ready_write, self._lifeline_read, self._plan.metrics)
        env = {**os.environ, **self._plan.env, WORKER_VARIABLE: role.encode()}
        try:
            worker.process = await asyncio.create_subprocess_exec(
                *self._plan.command,
                env=env,
                pass_fds=(ready_write, self._lifeline_read),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            os.close(ready_write)
        worker.started_at = time.monotonic()
        try:
            line = await _read_ready(ready_read, worker.process)
        except WorkerFailed:
            worker.failed_starts += 1
            raise
        worker.failed_starts = 0
        worker.metrics_ports = tuple(int(port) for port in line.split()[1:])
        log.debug("%s worker %d ready (pid %d)", self._plan.name, worker.index, worker.process.pid)


async def _read_ready(fd: int, process: asyncio.subprocess.Process) -> str:
    """The worker's ready line; WorkerFailed when it exits (or times out) first."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb")
    )
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            line = (await reader.readline()).decode()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise WorkerFailed(f"was not ready within {READY_TIMEOUT_S:g} s") from None
    finally:
        transport.close()
    if not line.startswith("ready "):
        code = await process.wait()
        raise WorkerFailed(f"{_ended(code)} before it was ready")
    return line


def _ended(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"
