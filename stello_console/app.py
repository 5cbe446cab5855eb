"""The console's composition root: gateway channel, API, static assets, the guard, uvicorn.

`running_console(...)` starts one on a loopback (or given) address and stops it
at exit; `stello up` and `python -m stello_console` both use it. The static
assets (plain JavaScript modules and CSS, no build step, nothing fetched from
the network) ship in the wheel beside this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import socket
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from stello.channels import ClientTls
from stello.errors import FailedPrecondition
from stello_client.aio import AsyncClient
from stello_client.calls import Retry
from stello_client.exceptions import ConfigurationError, RpcError
from stello_console.api import CallerOf, ConsoleApi, fixed_caller, header_caller
from stello_console.errors import ConsoleInputError
from stello_console.gateway import Caller, ConsoleGateway
from stello_console.live import HEARTBEAT_S, LiveRelay
from stello_console.lookup import Lookup
from stello_console.security import AccessPolicy, Guard, LaunchToken

STATIC = Path(__file__).parent / "static"
DEFAULT_PORT = 50064
# A read that meets a gateway just back (its channel reconnecting) is asked again for about
# a second and a half before the page is shown an outage; writes with a request_id too. A
# busy session is said at once (busy_for_s=0): the page shows it and the person sends again.
RETRY = Retry(
    attempts=5, initial_backoff_s=0.1, max_backoff_s=1.0, busy_for_s=0, unavailable_for_s=0
)


@dataclass(frozen=True, slots=True)
class ConsoleOptions:
    """What a console serves and where it reaches the gateway.

    Attributes:
        gateway: the gateway's host:port.
        host: the interface to listen on.
        port: the port (0 = any free one).
        caller: the key and space every request acts as (the local console of
            `stello up`, signed in by a launch token); None = a deployed console,
            where the page sends the user's key.
        tls: how to reach a TLS gateway; None = plaintext.
        allowed_hosts: Host header values accepted besides loopback names.
        heartbeat_s: how often an idle live stream carries a keep-alive comment.
        launch: the local console's sign-in (`LaunchToken.from_secret` keeps it across
            restarts); None = a new one for this launch. Ignored without `caller`.
    """

    gateway: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    caller: Caller | None = None
    tls: ClientTls | None = None
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    heartbeat_s: float = HEARTBEAT_S
    launch: LaunchToken | None = None


@dataclass(frozen=True, slots=True)
class RunningConsole:
    """A console that listens: its address and, for the local one, the sign-in URL."""

    host: str
    port: int
    launch: LaunchToken | None

    @property
    def url(self) -> str:
        """The page's URL, with the launch token when there is one."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        base = f"http://{host}:{self.port}/"
        return f"{base}?token={self.launch.token}" if self.launch else base


def page_with_key(key: str) -> str:
    """The page as the sign-in answers it: its key in a meta tag for the script to keep (the
    Content Security Policy allows no inline script)."""
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    tag = f'<meta name="stello-page-key" content="{html.escape(key)}">'
    return page.replace('<meta charset="utf-8">', f'<meta charset="utf-8">\n  {tag}', 1)


def create_console(
    gateway: ConsoleGateway,
    live: LiveRelay,
    options: ConsoleOptions,
    launch: LaunchToken | None,
    lookup: Lookup | None = None,
) -> ASGIApp:
    """The ASGI app: the guard around the API (and its live relay, and `lookup`'s finding
    endpoints when given), the page and its assets."""
    caller_of: CallerOf = (
        fixed_caller(options.caller) if options.caller is not None else header_caller
    )
    api = ConsoleApi(
        gateway, live, caller_of, local=options.caller is not None, address=options.gateway
    )

    async def page(request: Request) -> Response:
        key = getattr(request.state, "page_key", None)
        if key is None:
            return FileResponse(STATIC / "index.html")
        return HTMLResponse(page_with_key(key))

    app = Starlette(
        routes=[
            *api.routes(),
            *(lookup.routes() if lookup is not None else ()),
            Route("/", page),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={
            RpcError: api.error_response,
            ConfigurationError: api.error_response,
            ConsoleInputError: api.error_response,
        },
    )
    return Guard(app, AccessPolicy(options.allowed_hosts, launch), on_sign_out=live.sign_out)


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process that embeds it owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@contextlib.asynccontextmanager
async def running_console(
    options: ConsoleOptions, port_flag: str = "--port"
) -> AsyncIterator[RunningConsole]:
    """Serve the console until the block exits; FailedPrecondition (naming `port_flag`) when
    the port is taken."""
    sock = _bind(options.host, options.port, port_flag)
    launch = (options.launch or LaunchToken()) if options.caller is not None else None
    async with AsyncClient.keyless(options.gateway, tls=options.tls, retry=RETRY) as client:
        gateway = ConsoleGateway(client)
        live = LiveRelay(
            gateway, options.gateway, options.heartbeat_s, local=options.caller is not None
        )
        caller_of: CallerOf = (
            fixed_caller(options.caller) if options.caller is not None else header_caller
        )
        lookup = Lookup(gateway, caller_of)
        app = create_console(gateway, live, options, launch, lookup)
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",  # `stello up` is quiet; errors still show
            access_log=False,
            lifespan="off",
            http="h11",
            ws="none",
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=2,
        )
        server = _QuietServer(config)
        task = asyncio.create_task(server.serve(sockets=[sock]), name="stello-console")
        try:
            while not server.started:
                if task.done():
                    task.result()
                    raise FailedPrecondition("the console stopped while starting")
                await asyncio.sleep(0.01)
            yield RunningConsole(options.host, sock.getsockname()[1], launch)
        finally:
            live.stop()  # open live streams end now, not at uvicorn's graceful timeout
            server.should_exit = True
            await task
            sock.close()


def _bind(host: str, port: int, port_flag: str) -> socket.socket:
    """A listening socket, bound before uvicorn starts so a taken port is a clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past TIME_WAIT only
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise FailedPrecondition(
            f"the console cannot listen on {host}:{port} ({exc.strerror or exc}; is another "
            f"console running?): choose a port with {port_flag} (0 = any free one)"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock
