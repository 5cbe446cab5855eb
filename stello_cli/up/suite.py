"""`stello up`: the whole suite on one machine, in one process.

Embedded PostgreSQL (unless a database URL is given), migrations, then the
storage, tree and gateway servers on loopback. A local space and key are made
on first run, saved to the user's config dir (mode 0600) and reused after;
so is the web console's signing secret (`console-secret.json` beside them), so
a restart keeps open console tabs signed in until `--new-console-token`. One
`stello up` runs per config dir (`stello_cli.up.process`).
Ctrl-C or SIGTERM stops the servers gracefully, then the embedded database.

Every setting the servers need (STELLO_STORAGE_*, STELLO_TREE_*, STELLO_GATEWAY_*,
the gateway's prompts, profiles and skills files, the LLM provider) is read and
checked before the database starts: a refused one is one line naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import grpc
from pydantic import SecretStr

from stello.auth import KeyStore
from stello.db.embedded import (
    EmbeddedLost,
    EmbeddedPostgres,
    database,
    resolved_data_dir,
    supervised,
)
from stello.db.migrate import migrate_dsn
from stello.db.pool import create_pool
from stello.errors import FailedPrecondition
from stello.serving.inproc import LocalServer
from stello.serving.server import MetricsPortInUse, ServiceApp, create_server, shutdown_all
from stello.settings import StelloSettings
from stello.telemetry import tracing
from stello_cli.admin.databases import with_database
from stello_cli.up.process import one_up, stop_on_signals
from stello_client.connection.credentials import (
    Credentials,
    credentials_path,
    load_credentials,
    save_credentials,
)

if TYPE_CHECKING:  # `stello up` loads the services when it runs (a client needs none)
    from agent_gateway.config import GatewaySettings
    from agent_gateway.files import GatewayFiles
    from storage_service.config import StorageSettings
    from tree_service.config import TreeSettings

LOCAL_SPACE = "local"
CONSOLE_SECRET_FILE = "console-secret.json"


@dataclass(frozen=True, slots=True)
class Ports:
    """Where the three servers listen (0 = any free port)."""

    host: str = "127.0.0.1"
    storage: int = 50061
    tree: int = 50062
    gateway: int = 50063
    console: int | None = 50064  # None = no web console
    new_console_token: bool = False  # a new signing secret: open console tabs sign out


async def local_credentials(keys: KeyStore) -> Credentials:
    """Reuse the saved key while it still works against this database; else make one."""
    saved = load_credentials()
    if saved is not None:
        principal = await keys.resolve(saved.key)
        if principal is not None and str(principal.space_id) == saved.space_id:
            return saved
    created = await keys.create_key(space=LOCAL_SPACE, name="stello up")
    return Credentials(str(created.space_id), created.secret)


@dataclass(frozen=True, slots=True)
class Started:
    """A service that is running: its address, and its handlers for in-process calls."""

    address: str
    local: LocalServer | None


@dataclass(frozen=True, slots=True)
class ServiceConfigs:
    """The services' own settings and the gateway's files, read and checked once."""

    storage: StorageSettings
    tree: TreeSettings
    gateway: GatewaySettings
    files: GatewayFiles


def with_addresses(credentials: Credentials, addresses: Mapping[str, str]) -> Credentials:
    """`credentials` with the servers' addresses (`storage`, `tree`, `gateway`)."""
    return dataclasses.replace(
        credentials,
        storage=addresses["storage"],
        tree=addresses["tree"],
        gateway=addresses["gateway"],
    )


UNBOUND = "127.0.0.1:1"
"""A stand-in for an address not bound yet (a valid host:port, never called)."""


def service_configs() -> ServiceConfigs:
    """Read STELLO_STORAGE_*, STELLO_TREE_*, STELLO_GATEWAY_* and the gateway's prompts,
    profiles and skills files, as `stello up`'s servers will use them.

    Raises:
        pydantic.ValidationError: a variable's value is refused (the CLI names it).
        ValueError: a prompts, profiles or skills file is not valid (file, line, problem).
    """
    from agent_gateway.config import GatewaySettings
    from agent_gateway.files import GatewayFiles
    from storage_service.config import StorageSettings
    from tree_service.config import TreeSettings

    # The gateway's storage and tree addresses are those the servers bind (a port 0 becomes
    # one): `gateway` below sets them at the start; these stand in until then.
    gateway = GatewaySettings(storage_address=UNBOUND, tree_address=UNBOUND)
    return ServiceConfigs(StorageSettings(), TreeSettings(), gateway, GatewayFiles.read(gateway))


def metrics_wanted(configs: ServiceConfigs) -> list[tuple[int, int, str]]:
    """(place in the start order, port, variable) of each service whose /metrics is asked for
    (STELLO_*_METRICS_PORT), for `stello up --workers` to serve them merged."""
    ports = {
        "STORAGE": configs.storage.metrics_port,
        "TREE": configs.tree.metrics_port,
        "GATEWAY": configs.gateway.metrics_port,
    }
    return [
        (place, port, f"STELLO_{name}_METRICS_PORT")
        for place, (name, port) in enumerate(ports.items())
        if port is not None
    ]


Factory = Callable[[StelloSettings, asyncpg.Pool, KeyStore, Mapping[str, Started]], ServiceApp]


def _factories(
    ports: Ports, configs: ServiceConfigs, local_calls: bool, jobs_key: str | None
) -> list[tuple[str, int, Factory]]:
    """The three services in start order, each with its `configs`; the gateway learns the
    others' addresses and, with `local_calls`, calls them in-process (`stello.serving.inproc`)
    instead of over loopback, unless tracing is installed (in-process calls would make no
    spans)."""
    from agent_gateway.app import GatewayClients
    from agent_gateway.app import create_app as gateway_app
    from storage_service.app import create_app as storage_app
    from tree_service.app import create_app as tree_app

    local_calls = local_calls and not tracing.installed()

    def storage(
        s: StelloSettings, p: asyncpg.Pool, k: KeyStore, _: Mapping[str, Started]
    ) -> ServiceApp:
        return storage_app(s, p, k, configs.storage)

    def tree(
        s: StelloSettings, p: asyncpg.Pool, k: KeyStore, _: Mapping[str, Started]
    ) -> ServiceApp:
        return tree_app(s, p, k, configs.tree)

    def gateway(
        s: StelloSettings, p: asyncpg.Pool, k: KeyStore, started: Mapping[str, Started]
    ) -> ServiceApp:
        # The addresses the servers bound (a port 0 became one); checked at the start.
        bound = {
            "storage_address": started["storage"].address,
            "tree_address": started["tree"].address,
        }
        config = configs.gateway.model_copy(update=bound)
        if config.jobs_key is None and jobs_key is not None:
            # The local space's key: a job a stopped `stello up` left is taken over at
            # the next start (the runner's takeover), not at its session's next trigger.
            config = config.model_copy(update={"jobs_key": SecretStr(jobs_key)})
        local = {name: run.local for name, run in started.items() if local_calls and run.local}
        clients = GatewayClients.connect(config, s, local=local)
        return gateway_app(
            s,
            p,
            k,
            config,
            clients=clients,
            prompts=configs.files.prompts,
            profiles=configs.files.profiles,
            skills=configs.files.skills,
        )

    return [
        ("storage", ports.storage, storage),
        ("tree", ports.tree, tree),
        ("gateway", ports.gateway, gateway),
    ]


async def run_up(
    settings: StelloSettings,
    ports: Ports,
    on_ready: Callable[[dict[str, str]], None],
    *,
    local_calls: bool = True,
    workers: int = 1,
    data_dir_source: str | None = None,
) -> None:
    """Run everything until SIGINT/SIGTERM; `on_ready` gets the printed lines as a dict
    (endpoints, provider, space_id, key, and `saved`: the credentials file's path).

    With `workers` above 1 the servers run in that many worker processes sharing
    the ports (`stello_cli.up.workers`); this process supervises them.

    `data_dir_source` says what chose the embedded PostgreSQL's data dir ("--data-dir",
    "STELLO_DATA_DIR", "": the default; None: the variable when the settings name one), as a
    second `stello up` there is told (`stello_cli.up.process.sharing_line`).

    With `local_calls` the gateway calls storage and tree in-process (`stello.serving.inproc`),
    else over loopback gRPC, as separate deployments do; both still listen for clients.

    The signal handlers are installed before anything starts, so a signal during
    start-up unwinds too: servers stop, then the embedded PostgreSQL (`pg_ctl
    stop`), and no process is left behind. A second signal skips the grace period.

    Raises:
        ClientError: another `stello up` runs on the config dir, or the embedded
            PostgreSQL of the data dir (`one_up`), at once.
        pydantic.ValidationError, ValueError: a refused setting or file
            (`service_configs`), before anything starts.
    """
    if data_dir_source is None:
        data_dir_source = "STELLO_DATA_DIR" if settings.data_dir else ""
    data_dir = embedded_data_dir(settings)
    with one_up(credentials_path().parent, data_dir, data_dir_source) as lock:

        def ready(lines: dict[str, str]) -> None:
            lock.say(lines["gateway"])
            on_ready(lines)

        configs = service_configs()
        if workers > 1:
            from stello_cli.up.workers import run_up_workers

            await run_up_workers(
                settings, ports, ready, configs, workers=workers, local_calls=local_calls
            )
            return
        await _run_up(settings, ports, ready, configs, local_calls)


def embedded_data_dir(settings: StelloSettings) -> Path | None:
    """The data directory of the embedded PostgreSQL `stello up` runs (as
    `stello.db.embedded` resolves it); None with a database of STELLO_DATABASE_URL."""
    if settings.database_url:
        return None
    return resolved_data_dir(Path(settings.data_dir) if settings.data_dir else None)


async def _run_up(
    settings: StelloSettings,
    ports: Ports,
    on_ready: Callable[[dict[str, str]], None],
    configs: ServiceConfigs,
    local_calls: bool,
) -> None:
    """`run_up` in this process (no workers), its config dir held."""
    async with stop_on_signals():
        provider = await describe_provider(settings)
        async with database(settings.database_url, settings.data_dir) as db:
            dsn = db.dsn
            await migrate_dsn(settings.direct_dsn(dsn))
            async with create_pool(dsn, settings) as pool:
                keys = KeyStore(pool, settings.auth_cache_ttl_s)
                running: list[tuple[ServiceApp, grpc.aio.Server]] = []
                credentials = await local_credentials(keys)
                try:
                    addresses = await start_servers(
                        settings,
                        ports,
                        pool,
                        keys,
                        running,
                        configs=configs,
                        local_calls=local_calls,
                        jobs_key=credentials.key,
                    )
                    credentials = with_database(with_addresses(credentials, addresses), settings)
                    saved = save_credentials(credentials)
                    async with contextlib.AsyncExitStack() as console_stack:
                        console = await start_console(
                            console_stack, ports, credentials, saved.parent / CONSOLE_SECRET_FILE
                        )
                        on_ready(
                            {
                                "gateway": credentials.gateway,
                                "storage": credentials.storage,
                                "tree": credentials.tree,
                                "provider": provider,
                                "console": console,
                                "space_id": credentials.space_id,
                                "key": credentials.key,
                                "saved": str(saved),
                            }
                        )
                        # Until a signal cancels us, or the embedded PostgreSQL is lost.
                        await kept_up(asyncio.Event().wait(), db.embedded)
                finally:
                    await shutdown_all(running, settings.shutdown_grace_s)


async def kept_up(main: Awaitable[object], embedded: EmbeddedPostgres | None) -> None:
    """Await `main` while the embedded PostgreSQL is kept running (`stello.db.embedded`).

    Raises:
        FailedPrecondition: it died and could not be started again (one line: why, and
            that `stello up` stopped).
    """
    try:
        await supervised(main, embedded)
    except EmbeddedLost as exc:
        raise FailedPrecondition(f"{exc.message}: `stello up` stopped; run it again") from None


async def start_servers(
    settings: StelloSettings,
    ports: Ports,
    pool: asyncpg.Pool,
    keys: KeyStore,
    running: list[tuple[ServiceApp, grpc.aio.Server]],
    *,
    configs: ServiceConfigs | None = None,
    local_calls: bool = True,
    worker: bool = False,
    jobs_key: str | None = None,
) -> dict[str, str]:
    """Start storage, tree and gateway in order (appending to `running`); their addresses
    (`worker`: on ports a supervisor claimed, shared with the other workers, each /metrics
    asked for on a free loopback port, `app.metrics_port`, for it to merge). The gateway's
    background runner takes over orphaned jobs with `jobs_key` unless
    STELLO_GATEWAY_JOBS_KEY names one. `configs` are the services' settings and files
    (None: `service_configs` reads them now)."""
    started: dict[str, Started] = {}
    configs = configs or service_configs()
    for name, port, factory in _factories(ports, configs, local_calls, jobs_key):
        app = factory(settings, pool, keys, started)
        if worker and app.metrics_port is not None:
            app.metrics_port = 0  # on loopback; the supervisor serves them merged
        address = f"{ports.host}:{port}"
        try:
            server, bound = await create_server(app, address, worker=worker)
        except MetricsPortInUse as exc:
            raise FailedPrecondition(str(exc)) from None
        except (RuntimeError, OSError) as exc:  # grpc says RuntimeError("Failed to bind ...")
            raise FailedPrecondition(
                f"the {name} service cannot listen on {address} (in use? is another "
                f"`stello up` running?): choose a port with --{name}-port, 0 = any free one"
            ) from exc
        await server.start()
        running.append((app, server))
        started[name] = Started(f"{ports.host}:{bound}", app.local)
    return {name: run.address for name, run in started.items()}


async def start_console(
    stack: contextlib.AsyncExitStack, ports: Ports, credentials: Credentials, secret_file: Path
) -> str:
    """Serve the web console (DESIGN §8.1) until `stack` closes; its URL, or why it is off.

    Its sign-in comes from the signing secret in `secret_file` (made on first use, or
    anew with `ports.new_console_token`), so the URL and open tabs outlive a restart."""
    if ports.console is None:
        return "off (--no-console)"
    try:
        from stello_console import (
            Caller,
            ConsoleOptions,
            LaunchToken,
            console_secret,
            running_console,
        )
    except ImportError:  # installed without the console's extra
        return "off: pip install 'stello[console]' for the web console"
    secret = console_secret(secret_file, renew=ports.new_console_token)
    options = ConsoleOptions(
        gateway=credentials.gateway,
        host=ports.host,
        port=ports.console,
        caller=Caller(credentials.key, credentials.space_id),
        launch=LaunchToken.from_secret(secret),
    )
    running = await stack.enter_async_context(running_console(options, "--console-port"))
    return running.url


async def describe_provider(settings: StelloSettings) -> str:
    """Build the configured LLM provider once (a missing API key fails here, not at Send)."""
    from agent_gateway.llm import build_provider

    provider = build_provider(settings)
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()
    model = getattr(provider, "model", None)
    return f"{settings.llm_provider} ({model})" if isinstance(model, str) else settings.llm_provider
