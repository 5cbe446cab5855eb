"""`stello up --workers N`: the three services in N worker processes, one port each.

The process the user started is the supervisor (`stello.serving.workers`): it starts
the embedded PostgreSQL (unless a database URL is given), migrates, claims the
three ports (`stello.serving.ports`), makes or reuses the local key, starts the
workers, then serves the console and prints the banner — each of these once.
Every worker (``python -m stello_cli.up.workers SPEC``) runs storage, tree and
the gateway as `stello up` does in one process (the gateway calling the other
two in-process), on the claimed ports, with its share of the database pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import grpc

from stello.auth import KeyStore
from stello.db.embedded import database
from stello.db.migrate import migrate_dsn
from stello.db.pool import create_pool
from stello.errors import FailedPrecondition
from stello.serving.ports import PortClaim, PortTaken
from stello.serving.runner import event_loop_factory
from stello.serving.server import ServiceApp, shutdown_all
from stello.serving.workers import Supervisor, WorkerFailed, WorkerPlan, WorkerRole, split_pool
from stello.settings import StelloSettings
from stello_cli.admin.databases import with_database
from stello_cli.up.process import stop_on_signals
from stello_cli.up.suite import (
    CONSOLE_SECRET_FILE,
    Ports,
    ServiceConfigs,
    describe_provider,
    kept_up,
    local_credentials,
    metrics_wanted,
    start_console,
    start_servers,
    with_addresses,
)
from stello_client.connection.credentials import save_credentials

log = logging.getLogger(__name__)

SERVICES = ("storage", "tree", "gateway")


async def run_up_workers(
    settings: StelloSettings,
    ports: Ports,
    on_ready: Callable[[dict[str, str]], None],
    configs: ServiceConfigs,
    *,
    workers: int,
    local_calls: bool = True,
) -> None:
    """`run_up` with `workers` worker processes (module doc); the same banner and signals.
    `configs` are the services' settings `run_up` read (each worker reads its own)."""
    async with stop_on_signals(), contextlib.AsyncExitStack() as stack:
        provider = await describe_provider(settings)
        db = await stack.enter_async_context(database(settings.database_url, settings.data_dir))
        dsn = db.dsn
        await migrate_dsn(settings.direct_dsn(dsn))
        claims = {name: stack.enter_context(_claim(ports, name)) for name in SERVICES}
        async with create_pool(dsn, settings.model_copy(update=_ONE_CONNECTION)) as pool:
            credentials = await local_credentials(KeyStore(pool, settings.auth_cache_ttl_s))
        addresses = {name: claim.address for name, claim in claims.items()}
        credentials = with_database(with_addresses(credentials, addresses), settings)
        saved = save_credentials(credentials)
        plan = _plan(settings, ports, claims, dsn, workers, local_calls, credentials.key)
        supervisor = Supervisor(plan)
        try:
            await supervisor.start()
        except WorkerFailed as exc:
            raise FailedPrecondition(str(exc)) from None
        stack.push_async_callback(supervisor.stop)
        _serve_metrics(supervisor, ports.host, configs)
        console = await start_console(stack, ports, credentials, saved.parent / CONSOLE_SECRET_FILE)
        on_ready(
            {
                "gateway": credentials.gateway,
                "storage": credentials.storage,
                "tree": credentials.tree,
                "provider": provider,
                "console": console,
                "workers": f"{workers} (pids {' '.join(map(str, supervisor.pids))})",
                "space_id": credentials.space_id,
                "key": credentials.key,
                "saved": str(saved),
            }
        )
        try:
            await kept_up(supervisor.run(), db.embedded)  # until a signal cancels us
        except WorkerFailed as exc:
            raise FailedPrecondition(str(exc)) from None


_ONE_CONNECTION = {"db_pool_min_size": 0, "db_pool_max_size": 1}


def _serve_metrics(supervisor: Supervisor, host: str, configs: ServiceConfigs) -> None:
    """Each service's /metrics asked for, on its port: its workers' merged, each sample
    labelled with its worker (the workers serve theirs on free loopback ports).

    Raises:
        FailedPrecondition: a port is taken (naming its variable).
    """
    from stello.telemetry.metrics import serve_merged

    for place, port, variable in metrics_wanted(configs):
        try:
            serve_merged(functools.partial(supervisor.metrics_ports_of, place), port, host)
        except OSError as exc:
            raise FailedPrecondition(
                f"cannot serve /metrics on {host}:{port} ({exc.strerror or exc}): choose "
                f"another port with {variable}, 0 = any free one"
            ) from None


def _claim(ports: Ports, name: str) -> PortClaim:
    port: int = getattr(ports, name)
    try:
        return PortClaim(ports.host, port)
    except PortTaken as exc:
        raise FailedPrecondition(
            f"the {name} service cannot listen on {ports.host}:{port} ({exc}): choose a port "
            f"with --{name}-port, 0 = any free one"
        ) from None


def _plan(
    settings: StelloSettings,
    ports: Ports,
    claims: dict[str, PortClaim],
    dsn: str,
    workers: int,
    local_calls: bool,
    jobs_key: str,
) -> WorkerPlan:
    spec = {
        "host": ports.host,
        **{name: claim.port for name, claim in claims.items()},
        "local_calls": local_calls,
    }
    each, least = split_pool(settings.db_pool_max_size, settings.db_pool_min_size, workers)
    return WorkerPlan(
        name="stello up",
        command=[sys.executable, "-m", "stello_cli.up.workers", json.dumps(spec)],
        workers=workers,
        env={
            "STELLO_DATABASE_URL": dsn,
            "STELLO_DB_POOL_MAX_SIZE": str(each),
            "STELLO_DB_POOL_MIN_SIZE": str(least),
            # The workers' runners take over orphaned jobs with the local key, as `run_up`'s
            # does, unless the environment names one (the workers inherit it).
            "STELLO_GATEWAY_JOBS_KEY": os.environ.get("STELLO_GATEWAY_JOBS_KEY", jobs_key),
        },
        grace_s=settings.shutdown_grace_s,
    )


async def serve_worker(settings: StelloSettings, spec: dict[str, Any], role: WorkerRole) -> None:
    """One worker: the three servers on the claimed ports until SIGTERM/SIGINT."""
    ports = Ports(spec["host"], spec["storage"], spec["tree"], spec["gateway"], console=None)
    assert settings.database_url is not None  # the supervisor's
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with create_pool(settings.database_url, settings) as pool:
        keys = KeyStore(pool, settings.auth_cache_ttl_s)
        running: list[tuple[ServiceApp, grpc.aio.Server]] = []
        try:
            await start_servers(
                settings, ports, pool, keys, running, local_calls=spec["local_calls"], worker=True
            )
            role.watch_lifeline()
            role.ready(*(app.metrics_port for app, _ in running))
            await stop.wait()
        finally:
            await shutdown_all(running, settings.shutdown_grace_s)


def quiet_calls(level: str, *, access_log: bool) -> None:
    """`stello up`'s terminal, one process or its workers: calls are logged only at DEBUG or
    with STELLO_ACCESS_LOG=1. Access lines are DEBUG, a failed or slow call's INFO: a
    terminal shows neither (a client's NOT_FOUND or a closed console tab is no news); server
    faults stay visible."""
    if level != "DEBUG" and not access_log:
        logging.getLogger("stello.rpc").setLevel(logging.WARNING)


def main() -> None:
    """``python -m stello_cli.up.workers SPEC``: a worker of `stello up --workers N`."""
    from stello.telemetry.logs import LogSettings, configure_logging
    from stello.telemetry.tracing import TracingSettings, setup_tracing

    role = WorkerRole.from_environment()
    if role is None:
        raise SystemExit("stello_cli.up.workers runs as a worker of `stello up --workers N`")
    logs = LogSettings()
    configure_logging(logs)
    settings = StelloSettings()
    quiet_calls(logs.level, access_log=settings.access_log)
    tracing = setup_tracing(TracingSettings(), "stello")
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve_worker(settings, json.loads(sys.argv[1]), role))
    except FailedPrecondition as exc:  # one line; the supervisor says a worker did not start
        log.error("stello up worker %d: %s", role.index, exc)
        raise SystemExit(1) from None
    finally:
        if tracing is not None:
            tracing.shutdown()


if __name__ == "__main__":
    main()
