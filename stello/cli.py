"""The `stello` command line: up, migrate, keys, spaces."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from stello.auth import KeyStore
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
        await migrate_dsn(dsn)
        async with create_pool(dsn, settings) as pool:
            return await work(KeyStore(pool, 0))


async def cmd_migrate(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Apply pending migrations."""
    async with database_url(settings.database_url, settings.data_dir) as dsn:
        applied = await migrate_dsn(dsn)
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
    from stello.up import Ports, run_up

    ports = Ports(args.host, args.storage_port, args.tree_port, args.gateway_port)

    def ready(lines: dict[str, str]) -> None:
        for name, value in lines.items():
            print(f"{name}: {value}")
        print("ready: press Ctrl-C to stop", flush=True)

    await run_up(settings, ports, ready)
    return 0


async def cmd_health(args: argparse.Namespace, settings: StelloSettings) -> int:
    """Ask a server's grpc health service; exit 0 only when SERVING (container probes)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(args.address) as channel:
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
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--storage-port", type=int, default=50061)
    up.add_argument("--tree-port", type=int, default=50062)
    up.add_argument("--gateway-port", type=int, default=50063)
    up.set_defaults(run=cmd_up)

    health = sub.add_parser("health", help="check a server's health (exit 0 when SERVING)")
    health.add_argument("address", help="host:port")
    health.add_argument("--service", default="", help="service name (default: the server)")
    health.add_argument("--timeout", type=float, default=3.0)
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
    for sp in (sub.choices["migrate"], sub.choices["up"]):
        sp.add_argument("--database-url", dest="database_url", default=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run the `stello` command; errors print one line and exit non-zero."""
    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            code = runner.run(args.run(args, settings))
    except (StelloError, OSError, asyncpg.PostgresError, ValueError) as exc:
        print(f"stello: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    raise SystemExit(code)
