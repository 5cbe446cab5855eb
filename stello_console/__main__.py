"""`python -m stello_console`: the web console of a deployment, in front of a running gateway.

Usage: ``python -m stello_console --gateway gateway.example:50063 [--ca-file ca.pem]
[--host 0.0.0.0] [--port 50064] [--allowed-host console.example.com]``. The page
asks for an API key and a space id and keeps them in the browser's
sessionStorage (never in a URL); every API call forwards that key.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from stello.config.env_names import warn_unknown
from stello.errors import StelloError
from stello.serving.runner import event_loop_factory
from stello.telemetry.logs import LogSettings, configure_logging
from stello_client.connection.flags import port, resolve_tls, tls_options
from stello_client.errors import ClientError
from stello_console.app import DEFAULT_PORT, ConsoleOptions, running_console

log = logging.getLogger("stello_console")


def build_parser() -> argparse.ArgumentParser:
    """The console's flags: gateway, TLS as the client commands take it, where to listen."""
    # No abbreviations: `--key` (the CLI's flag) was read as `--key-file`.
    parser = argparse.ArgumentParser(
        prog="python -m stello_console", description=__doc__, allow_abbrev=False
    )
    parser.add_argument("--gateway", help="gateway host:port (STELLO_GATEWAY)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 = any free"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a Host header the console answers besides loopback names, as browsers send it "
        "(e.g. console.example.com, or console.example.com:8080); repeatable",
    )
    tls_options(parser.add_argument_group("TLS to the gateway (default: plaintext)"))
    return parser


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGINT/SIGTERM."""
    gateway = args.gateway or os.environ.get("STELLO_GATEWAY", "").strip()
    if not gateway:
        raise ClientError("no gateway address: pass --gateway HOST:PORT or set STELLO_GATEWAY")
    options = ConsoleOptions(
        gateway=gateway,
        host=args.host,
        port=args.port,
        tls=resolve_tls(args),
        allowed_hosts=frozenset(args.allowed_host),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_console(options) as console:
        print(f"console: {console.url}", flush=True)  # noqa: T201 (the address to open)
        await stop.wait()
    print("stopped", flush=True)  # noqa: T201


def main(argv: Sequence[str] | None = None) -> None:
    """Run the console; a bad configuration is one line on stderr and exit code 1."""
    args = build_parser().parse_args(argv)
    configure_logging(LogSettings())
    warn_unknown()  # a misspelt STELLO_ variable, named with the closest known one
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve(args))
    except (ClientError, StelloError, OSError) as exc:
        print(f"stello_console: {' '.join(str(exc).split())}", file=sys.stderr)  # noqa: T201
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
