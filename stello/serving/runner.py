"""Run one service: database (configured or embedded), pool, app, server — or its workers.

A service started with one worker serves in this process. With more
(`Launch.workers`), this process is their supervisor (`stello.serving.workers`): it
claims the port, starts the embedded PostgreSQL when no database is configured,
runs the workers and serves their merged /metrics; each worker (a process
started with ``STELLO_WORKER`` set) serves here as a single process would, on
the shared port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import asyncpg

from stello.auth import KeyStore
from stello.channels import read_pem
from stello.config.env_names import warn_unknown
from stello.db.embedded import database_url
from stello.db.migrate import migrate_dsn, newer_line, pending_and_unknown
from stello.db.pool import DatabaseUnreachable, create_pool
from stello.errors import FailedPrecondition
from stello.serving.ports import PortClaim, PortTaken
from stello.serving.server import PortInUse, ServiceApp, serve
from stello.serving.workers import Supervisor, WorkerFailed, WorkerPlan, WorkerRole, split_pool
from stello.settings import StelloSettings
from stello.telemetry import logs
from stello.telemetry.tracing import TracingSettings, setup_tracing

AppFactory = Callable[[StelloSettings, asyncpg.Pool, KeyStore], ServiceApp]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Launch:
    """How a service runs: `python -m module`, its variables' prefix, where, how many workers."""

    module: str
    prefix: str
    host: str
    port: int
    workers: int = 1
    metrics_port: int | None = None

    @property
    def address(self) -> str:
        """host:port to bind."""
        return f"{self.host}:{self.port}"


def launch_of(module: str, config: Any) -> Launch:
    """The launch of `module` from its service settings (host, port, workers, metrics_port)."""
    return Launch(
        module=module,
        prefix=str(config.model_config.get("env_prefix", "")),
        host=config.host,
        port=config.port,
        workers=config.workers,
        metrics_port=config.metrics_port,
    )


def configure_logging() -> None:
    """Log lines with request ids on stderr, text or JSON (`stello.telemetry.logs`)."""
    logs.configure_logging(logs.LogSettings())


def _service_name() -> str:
    """The package run with ``python -m`` (e.g. ``storage_service``), for span names."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec.parent or spec.name) if spec is not None else "stello"


async def run_service(
    settings: StelloSettings,
    address: str,
    factory: AppFactory,
    *,
    migrate: bool = False,
    worker: WorkerRole | None = None,
) -> None:
    """Serve the app `factory` builds until SIGTERM/SIGINT (as `worker` on a shared port)."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        if migrate:
            await migrate_dsn(settings.direct_dsn(dsn))
        async with create_pool(dsn, settings) as pool:
            if not migrate:
                await warn_unmigrated(pool)
            keys = KeyStore(pool, settings.auth_cache_ttl_s)
            app = factory(settings, pool, keys)
            if worker is None:
                await serve(app, address)
                return
            app.metrics_port = 0 if worker.metrics else None
            worker.watch_lifeline()
            await serve(app, address, lambda _: worker.ready(app.metrics_port), worker=True)


async def warn_unmigrated(pool: asyncpg.Pool) -> None:
    """Log a warning naming `stello migrate` when the database lacks migrations (a service
    does not migrate: the calls that need them would fail with the SQL's error alone), and
    one when it holds migrations this release does not know; one read of what it holds
    (`stello.db.migrate.pending_and_unknown`)."""
    async with pool.acquire() as con:
        missing, newer = await pending_and_unknown(cast(asyncpg.Connection, con))
    if newer:
        log.warning("%s", newer_line(newer))
    if missing:
        named = missing[0] if len(missing) == 1 else f"{missing[0]} to {missing[-1]}"
        log.warning(
            "the database lacks %d of Stello's migrations (%s): run `stello migrate` with "
            "this STELLO_DATABASE_URL; until then the calls that need them fail",
            len(missing),
            named,
        )


def check_tls_files(settings: StelloSettings) -> None:
    """Read the server's TLS files once before anything starts: FailedPrecondition naming
    the variable and file that cannot be used (else it shows only at bind, after the
    database connected)."""
    for variable, path in (
        ("STELLO_TLS_CERT_FILE", settings.tls_cert_file),
        ("STELLO_TLS_KEY_FILE", settings.tls_key_file),
        ("STELLO_TLS_CLIENT_CA_FILE", settings.tls_client_ca_file),
    ):
        if path:
            read_pem(path, variable)


def main(settings: StelloSettings, launch: Launch, factory: AppFactory) -> None:
    """Entry point body shared by every service's ``__main__``: one ERROR line naming the
    problem and exit status 1 for what an operator must fix (a TLS file, the database, the
    port), no traceback."""
    configure_logging()
    role = WorkerRole.from_environment()
    if role is None:  # a worker's environment is its supervisor's, which said it
        warn_unknown()
    try:
        check_tls_files(settings)
    except FailedPrecondition as exc:
        log.error("%s: %s", launch.module, exc)
        raise SystemExit(1) from None
    if role is None and launch.workers > 1:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            code = runner.run(supervise(settings, launch))
        raise SystemExit(code)
    provider = setup_tracing(TracingSettings(), _service_name())
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(run_service(settings, launch.address, factory, worker=role))
    except DatabaseUnreachable as exc:
        # Named by its variable when it came from one (not the embedded database's).
        shown = exc.naming("STELLO_DATABASE_URL") if settings.database_url else str(exc)
        log.error("%s: %s", launch.module, shown)
        raise SystemExit(1) from None
    except (PortInUse, FailedPrecondition) as exc:  # FailedPrecondition: a TLS file at bind
        log.error("%s: %s", launch.module, exc)
        raise SystemExit(1) from None
    finally:
        if provider is not None:
            provider.shutdown()  # flush the spans still batched


async def supervise(settings: StelloSettings, launch: Launch) -> int:
    """Claim the port, run `launch.workers` workers until SIGTERM/SIGINT; the exit status."""
    try:
        claim = PortClaim(launch.host, launch.port)
    except PortTaken as exc:
        log.error("%s: %s", launch.module, exc)
        return 1
    with claim:
        async with database_url(settings.database_url, settings.data_dir) as dsn:
            plan = WorkerPlan(
                name=launch.module,
                command=[sys.executable, "-m", launch.module],
                workers=launch.workers,
                env=worker_env(settings, launch, dsn, claim.port),
                metrics=launch.metrics_port is not None,
                grace_s=settings.shutdown_grace_s,
            )
            return await run_workers(plan, launch, claim)


def worker_env(settings: StelloSettings, launch: Launch, dsn: str, port: int) -> dict[str, str]:
    """What every worker's environment adds: the database, the claimed port, its pool share."""
    each, least = split_pool(settings.db_pool_max_size, settings.db_pool_min_size, launch.workers)
    if each * launch.workers > settings.db_pool_max_size:
        log.warning(
            "STELLO_DB_POOL_MAX_SIZE=%d is below one connection per worker: %d workers open "
            "up to %d",
            settings.db_pool_max_size,
            launch.workers,
            each * launch.workers,
        )
    return {
        "STELLO_DATABASE_URL": dsn,
        "STELLO_DB_POOL_MAX_SIZE": str(each),
        "STELLO_DB_POOL_MIN_SIZE": str(least),
        f"{launch.prefix}HOST": launch.host,
        f"{launch.prefix}PORT": str(port),
        f"{launch.prefix}WORKERS": "1",
    }


async def run_workers(plan: WorkerPlan, launch: Launch, claim: PortClaim) -> int:
    """Start the plan's workers, serve their merged metrics, keep them until a signal."""
    supervisor = Supervisor(plan)
    async with _until_signal() as stopped:
        try:
            await supervisor.start()
        except WorkerFailed as exc:
            log.error("%s", exc)  # names the service and the worker
            return 1
        if launch.metrics_port is not None:
            _serve_merged_metrics(supervisor, launch)
        log.info(
            "%s listening on port %d with %d workers (pids %s)",
            launch.module,
            claim.port,
            plan.workers,
            " ".join(map(str, supervisor.pids)),
        )
        keeping = asyncio.ensure_future(supervisor.run())
        done, _ = await asyncio.wait([keeping, stopped], return_when=asyncio.FIRST_COMPLETED)
        keeping.cancel()
        await asyncio.gather(keeping, return_exceptions=True)
        await supervisor.stop()
        if keeping in done and keeping.exception() is not None:
            log.error("%s: %s", launch.module, keeping.exception())
            return 1
    return 0


def _serve_merged_metrics(supervisor: Supervisor, launch: Launch) -> None:
    from stello.telemetry.metrics import serve_merged

    assert launch.metrics_port is not None
    serve_merged(lambda: supervisor.metrics_ports, launch.metrics_port, launch.host)


@contextlib.asynccontextmanager
async def _until_signal() -> AsyncIterator[asyncio.Future[None]]:
    """A future done at the first SIGTERM or SIGINT, while the block runs."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[None] = loop.create_future()

    def on_signal() -> None:
        if not stopped.done():
            stopped.set_result(None)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        yield stopped
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where installed (about half asyncpg's CPU per query), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
