"""The server factory every service uses: the call chain, health, reflection, limits.

`create_server(app, address)` builds and binds a server without starting it
(tests call it with port 0); `serve(app, address)` runs one until SIGTERM or
SIGINT, then shuts down gracefully: health NOT_SERVING, streams that would never
end by themselves ended at once (`ServiceApp.at_shutdown`), stop accepting, let
in-flight calls finish within the grace period.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import asyncpg
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from stello.auth import KeyStore
from stello.channels import read_pem
from stello.db.periodic import RoundsCollector, periodic_tasks
from stello.db.tasks import Steps
from stello.errors import new_error_id
from stello.serving.access_log import AccessLog
from stello.serving.health import HealthMonitor
from stello.serving.inproc import LocalServer
from stello.serving.interceptors import CallChain
from stello.serving.space_calls import SpaceCalls
from stello.settings import StelloSettings
from stello.telemetry.metrics import PoolCollector, RpcMetrics

log = logging.getLogger(__name__)


class PortInUse(OSError):
    """Raised when a server cannot bind its address (DESIGN §7: one deployment per port)."""


class MetricsPortInUse(PortInUse):
    """Raised when a server cannot serve /metrics on its metrics port (the message names the
    setting that chose it)."""


class Background(Protocol):
    """A task a service runs beside its server (e.g. the tree's provisional sweeper)."""

    def start(self) -> None:
        """Begin running (called once the server is bound)."""

    async def stop(self) -> None:
        """Stop and wait for the task (called during shutdown)."""


@dataclass(slots=True)
class ServiceApp:
    """What a service hands the factory: its gRPC services and its collaborators."""

    name: str
    service_names: tuple[str, ...]
    register: Callable[[grpc.aio.Server], None]
    pool: asyncpg.Pool
    keys: KeyStore
    settings: StelloSettings
    admin_methods: frozenset[str] = frozenset()
    metrics_port: int | None = None
    metrics_setting: str = "the metrics port setting"
    """What chose `metrics_port` (STELLO_GATEWAY_METRICS_PORT, ...), for the message when it
    is taken."""
    background: tuple[Background, ...] = ()
    at_shutdown: tuple[Callable[[], Awaitable[None]], ...] = ()
    """Called as shutdown begins, before the grace: each ends calls that would otherwise
    hold the whole grace (the gateway's WatchSpace streams, which never end by themselves
    and whose clients resume elsewhere)."""
    monitor: HealthMonitor | None = field(default=None)
    metrics: RpcMetrics | None = field(default=None)
    local: LocalServer | None = field(default=None)
    """What the server serves, callable in-process (`stello.serving.inproc`; `create_server`
    sets it)."""
    chain: CallChain | None = field(default=None)
    """The server's call chain (`create_server` sets it): shutdown waits for its calls."""


class GenericOnly:
    """A server as the generated ``add_*_to_server`` functions see it: every method served
    through its service's generic handler, none as a pre-registered method.

    grpc.aio keeps one task waiting per pre-registered method and, for every call that
    arrives, ``asyncio.wait``s on all of them (grpc 1.85): a call to storage's 34 methods
    (with health and reflection) paid for 34 futures, about 60-80 us of CPU per call in a
    microbenchmark of one service (the bare servers of bench/ register generic handlers
    only). The generic handlers hold the same methods and handlers, so calls are served
    and intercepted as before; `local` is given them too (in-process calls). Anything else
    goes to the server.
    """

    def __init__(self, server: grpc.aio.Server, local: LocalServer) -> None:
        self._server = server
        self._local = local

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        """Handlers of every method of a service (what serves its calls)."""
        self._server.add_generic_rpc_handlers(handlers)
        self._local.add_handlers(handlers)

    def add_registered_method_handlers(
        self, service_name: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        """Not registered: the service's generic handler serves these methods."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class RawReplies(grpc.GenericRpcHandler):
    """A service's handlers, with `methods` (full names) answering bytes already serialized.

    A servicer method that builds its reply's bytes itself (the tree's GetTree) or
    passes on another server's (the gateway's GetTree) returns them as they are:
    its handler has no response serializer. Every other method is served unchanged.
    """

    def __init__(self, inner: grpc.GenericRpcHandler, methods: frozenset[str]) -> None:
        self._inner = inner
        self._methods = methods
        self._raw: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        """The inner handler of the method, without a response serializer when it is raw."""
        handler = self._inner.service(handler_call_details)
        method = handler_call_details.method
        if handler is None or method not in self._methods:
            return handler
        raw = self._raw.get(method)
        if raw is None:
            assert handler.unary_unary is not None, f"{method}: only unary methods are raw"
            raw = grpc.unary_unary_rpc_method_handler(
                handler.unary_unary, request_deserializer=handler.request_deserializer
            )
            self._raw[method] = raw
        return raw


class _RawRegistration:
    """A server as a generated ``add_*_to_server`` function sees it (`raw_replies`)."""

    def __init__(self, server: grpc.aio.Server, methods: frozenset[str]) -> None:
        self._server = server
        self._methods = methods

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        """The service's handlers, the raw methods' without a response serializer."""
        self._server.add_generic_rpc_handlers([RawReplies(h, self._methods) for h in handlers])

    def add_registered_method_handlers(
        self, service_name: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        """Not registered: the generic handler serves them (see `GenericOnly`)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def raw_replies(server: grpc.aio.Server, methods: frozenset[str]) -> grpc.aio.Server:
    """`server` for a generated ``add_*_to_server`` call whose `methods` (full names,
    ``/package.Service/Method``) return their replies' bytes (`RawReplies`)."""
    return cast(grpc.aio.Server, _RawRegistration(server, methods))


def _server_options(settings: StelloSettings, worker: bool) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        # One deployment per port (DESIGN §7): with SO_REUSEPORT a second server would bind
        # the same port and the kernel would split the connections between the two. A
        # supervisor's workers share theirs, which the supervisor claimed (`stello.serving.ports`).
        ("grpc.so_reuseport", 1 if worker else 0),
        *KEEPALIVE,
    ]


# Keepalive (README "Clients in other languages"): a client may ping every
# `PING_EVERY_MS` or more, with or without calls in flight, however long a stream
# stays idle (an idle WatchSpace sends nothing for hours). gRPC core's defaults
# allowed one ping without data per five minutes and answered the third early one
# with GOAWAY too_many_pings, which ended a healthy watch of a grpc-js client
# keeping its load balancer's connection alive (RESOURCE_EXHAUSTED, after 20 s
# with a 5 s keepalive). The server pings a connection with calls in flight after
# `SERVER_PING_MS` of silence too, and drops it when no answer comes in
# `PING_TIMEOUT_MS`: a client gone without a word frees its streams.
CLEANUP_S = 5.0
"""How long shutdown waits, after grpc's stop, for the cancelled calls' cleanup (a turn giving
its lease back) before it stops the background tasks that cleanup hands work to."""
PING_EVERY_MS = 4_000
SERVER_PING_MS = 60_000
PING_TIMEOUT_MS = 20_000
KEEPALIVE: tuple[tuple[str, int], ...] = (
    ("grpc.http2.min_recv_ping_interval_without_data_ms", PING_EVERY_MS),
    ("grpc.http2.min_ping_interval_without_data_ms", PING_EVERY_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_time_ms", SERVER_PING_MS),
    ("grpc.keepalive_timeout_ms", PING_TIMEOUT_MS),
)


def _bind(server: grpc.aio.Server, address: str, settings: StelloSettings) -> int:
    if not settings.tls_cert_file:
        return server.add_insecure_port(address)
    cert = read_pem(settings.tls_cert_file, "STELLO_TLS_CERT_FILE")
    key = read_pem(settings.tls_key_file or "", "STELLO_TLS_KEY_FILE")
    client_ca = (
        read_pem(settings.tls_client_ca_file, "STELLO_TLS_CLIENT_CA_FILE")
        if settings.tls_client_ca_file
        else None
    )
    credentials = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
    return server.add_secure_port(address, credentials)


async def create_server(
    app: ServiceApp, address: str, *, worker: bool = False
) -> tuple[grpc.aio.Server, int]:
    """Build a server for `app` bound to `address`; return it (not started) and its port.

    A `worker` (`stello.serving.workers`) shares the port its supervisor claimed with the
    other workers (SO_REUSEPORT), and serves its /metrics on loopback for the
    supervisor to merge (`app.metrics_port` 0 = a free port, set to the one bound).
    """
    app.metrics = RpcMetrics(app.name)
    app.metrics.registry.register(RoundsCollector(periodic_tasks(app.background)))
    app.metrics.registry.register(PoolCollector(app.pool))
    chain = CallChain(
        app.keys,
        app.metrics,
        admin_methods=app.admin_methods,
        access=AccessLog.of(app.settings),
        space_calls=SpaceCalls(app.settings.max_calls_per_space),
        space_watches=SpaceCalls(
            app.settings.max_watches_per_space,
            "WatchSpace streams open",
            "STELLO_MAX_WATCHES_PER_SPACE",
        ),
    )
    app.chain = chain
    server = grpc.aio.server(interceptors=[chain], options=_server_options(app.settings, worker))
    app.local = LocalServer(app.settings.max_message_bytes)
    app.local.set_interceptors([chain])
    adding = cast(grpc.aio.Server, GenericOnly(server, app.local))
    app.register(adding)
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, adding)
    reflection.enable_server_reflection(
        (
            *app.service_names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        adding,
    )
    try:
        port = _bind(server, address, app.settings)
    except RuntimeError as exc:  # grpc: "Failed to bind to address ..."
        port = 0
        cause: BaseException | None = exc
    else:
        cause = None
    if port == 0:
        raise PortInUse(
            f"cannot listen on {address}: the port is in use (or the address is not this "
            "machine's); one process per port"
        ) from cause
    if app.metrics_port is not None:
        # /metrics on the interface the server listens on (0.0.0.0 in a container); a
        # worker's on loopback, where only its supervisor reads them.
        host = "127.0.0.1" if worker else address.rpartition(":")[0].strip("[]") or "127.0.0.1"
        try:
            app.metrics_port = app.metrics.serve(app.metrics_port, host)
        except OSError as exc:
            await server.stop(None)
            raise MetricsPortInUse(
                f"cannot serve /metrics on {host}:{app.metrics_port} ({exc.strerror or exc}): "
                f"choose another port with {app.metrics_setting}, 0 = any free one"
            ) from None
    app.monitor = HealthMonitor(
        servicer, app.service_names, app.pool, app.settings.health_interval_s
    )
    await app.monitor.check_once()
    app.monitor.start()
    for task in app.background:
        task.start()
    return server, port


async def shutdown(app: ServiceApp, server: grpc.aio.Server, grace_s: float) -> None:
    """Graceful stop: NOT_SERVING, refuse new calls (in-process ones too), end the streams
    `app.at_shutdown` ends, drain the other calls in flight (those past the grace cancelled,
    their cleanup waited for: `CLEANUP_S`), then the background tasks.

    Every step is taken even when one before it fails: each failure is logged (ERROR, with
    an error id) and the first is raised after the last step. A step raising CancelledError
    of its own (a task it awaited was cancelled) is such a failure ("it was cancelled"); a
    cancellation of the shutdown itself is raised at once, the later steps not taken
    (`stello.db.tasks.Steps`).
    """

    def failed(what: str, exc: BaseException) -> None:
        # The server still stops, and every background task, a pool or poller among them.
        log.error(
            "%s: %s failed during shutdown: %s (error id %s)",
            app.name,
            what,
            "it was cancelled" if isinstance(exc, asyncio.CancelledError) else exc,
            new_error_id(),
            exc_info=exc,
        )

    steps = Steps(failed)
    if app.monitor is not None:
        await steps.take("stopping the health monitor", app.monitor.stop())
    if app.local is not None:
        app.local.stopping = True
    for end in app.at_shutdown:
        await steps.take(f"ending calls ({_name_of(end)})", end())
    await steps.take("stopping the server", server.stop(grace_s))
    if app.chain is not None:
        late = await app.chain.ended(CLEANUP_S)
        if late:
            log.warning("%s: %d calls had not ended %g s after the stop", app.name, late, CLEANUP_S)
    for task in reversed(app.background):
        await steps.take(f"stopping {_name_of(task)}", task.stop())
    steps.raise_first()


async def shutdown_all(
    running: Sequence[tuple[ServiceApp, grpc.aio.Server]], grace_s: float
) -> None:
    """`shutdown` each of `running`, last started first; one that fails stops none of the
    others from shutting down, and the first failure is raised after the last."""
    steps = Steps()  # each failure logged by shutdown
    for app, server in reversed(running):
        await steps.take(app.name, shutdown(app, server, grace_s))
    steps.raise_first()


def _name_of(thing: object) -> str:
    """What a shutdown step is about, for its log line (a function's or an object's class's
    name)."""
    return getattr(thing, "__qualname__", None) or type(thing).__name__


async def serve(
    app: ServiceApp,
    address: str,
    on_ready: Callable[[int], None] | None = None,
    *,
    worker: bool = False,
) -> None:
    """Run `app` on `address` until SIGTERM/SIGINT, then shut down gracefully
    (`worker`: see `create_server`)."""
    server, port = await create_server(app, address, worker=worker)
    await server.start()
    if on_ready is not None:
        on_ready(port)
    log.info("%s listening on port %d", app.name, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await shutdown(app, server, app.settings.shutdown_grace_s)
