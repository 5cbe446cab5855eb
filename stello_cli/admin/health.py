"""`stello health`: ask a server's grpc health service (what container probes run); exit 0
only while it is SERVING."""

from __future__ import annotations

import argparse
import json
import sys

from stello_cli.output.style import write
from stello_cli.parser import HEALTH_TIMEOUT_S, Commands, call_timeout, seconds
from stello_client.connection.credentials import load_credentials
from stello_client.connection.flags import (
    address_problem,
    gateway_address,
    pick,
    resolve_tls,
    tls_options,
)
from stello_client.errors import ClientError, connection_hint, own_deadline_line


async def cmd_health(args: argparse.Namespace) -> int:
    """Ask a server's grpc health service; exit 0 only when SERVING (container probes)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from stello.channels import open_channel
    from stello_client.calls import Deadline, own_timeout

    address = args.address or getattr(args, "gateway", None)
    if not address:
        saved = load_credentials()
        address = pick(None, "STELLO_GATEWAY", saved.gateway if saved else None)
        problem = address_problem(address) if address else None
        if problem is not None:
            raise ClientError(f"STELLO_GATEWAY: {problem}")
    if not address:
        raise ClientError("no address: give HOST:PORT, set STELLO_GATEWAY, or run `stello up`")
    async with open_channel(address, tls=resolve_tls(args)) as channel:
        deadline = Deadline(call_timeout(args, HEALTH_TIMEOUT_S))
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=deadline.timeout
            )
        except grpc.aio.AioRpcError as err:
            hint = connection_hint(err, address)
            waited = own_timeout(err, deadline)
            if waited is not None:
                hint = own_deadline_line("it did not answer", waited)
            if err.code() == grpc.StatusCode.NOT_FOUND and args.service:
                hint = f"no service {args.service!r} here: give a full name, {SERVICE_NAMES}"
            _said_health(args, address, err.code().name, failed=True, hint=hint)
            return 1
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    _said_health(args, address, name, failed=False)
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


SERVICE_NAMES = (
    "stello.agent.v1.AgentGateway, stello.storage.v1.SessionStorage, stello.tree.v1.SessionTree"
)
"""What `health --service` takes: each server answers for its own."""


def _said_health(
    args: argparse.Namespace, address: str, status: str, *, failed: bool, hint: str | None = None
) -> None:
    """`HOST:PORT: STATUS` (on stderr when the call failed), or with --json one object on
    stdout: {"address": ..., "status": ...} (a failed call's status is its gRPC code). A
    connection that failed as TLS does adds the other commands' hint (`(... pass
    --ca-file ...)`; JSON: "hint")."""
    if getattr(args, "json", False):
        said = {"address": address, "status": status}
        write(json.dumps(said if hint is None else {**said, "hint": hint}))
    else:
        line = f"{address}: {status}" if hint is None else f"{address}: {status} ({hint})"
        write(line, stream=sys.stderr if failed else sys.stdout)


def register_health(commands: Commands) -> None:
    health = commands.local(
        "health",
        cmd_health,
        "check a server's health (exit 0 when SERVING)",
        "Ask a Stello server's grpc health service; exit 0 only while it is SERVING\n"
        "(what container healthchecks run).",
    )
    health.add_argument(
        "address",
        nargs="?",
        type=gateway_address,
        metavar="HOST:PORT",
        help="the server (default: --gateway, STELLO_GATEWAY, else the gateway `stello up` saved)",
    )
    # The global flag, also after the command (as every client command takes it).
    health.add_argument(
        "--gateway",
        type=gateway_address,
        default=argparse.SUPPRESS,
        metavar="HOST:PORT",
        help="the gateway to ask when HOST:PORT is not given (STELLO_GATEWAY)",
    )
    health.add_argument(
        "--service",
        default="",
        help="a service's full name, e.g. stello.agent.v1.AgentGateway (default: the whole server)",
    )
    health.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    # The global flag, also after the command: given on either side it is the wait.
    health.add_argument(
        "--timeout",
        type=seconds,
        default=argparse.SUPPRESS,
        metavar="S",
        help=f"seconds to wait (default {HEALTH_TIMEOUT_S:g})",
    )
    tls_options(health.add_argument_group("TLS (default: plaintext)"), default=argparse.SUPPRESS)
