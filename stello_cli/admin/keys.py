"""Operator commands on keys and spaces: keys create|revoke|list, spaces list|delete.

They work on the database directly (``STELLO_DATABASE_URL``, else the embedded one; given
neither, the database `stello up` saved, `stello_cli.admin.databases`), migrating it first.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from stello_cli.admin.databases import admin_settings, settings_of
from stello_cli.admin.nodes import keys_node_out_of_reach
from stello_cli.output.style import confirm, one_line, pad, plural, write
from stello_cli.parser import Commands
from stello_client.dicts import dumps
from stello_client.errors import ClientError, UsageError

if TYPE_CHECKING:  # imported when a command runs (a client needs none)
    from stello.auth import KeyStore
    from stello.settings import StelloSettings


async def _with_keys(
    args: argparse.Namespace,
    work: Callable[[KeyStore], Awaitable[int]],
    given: StelloSettings | None = None,
) -> int:
    settings = admin_settings(given or settings_of(args))
    try:
        with _pool_warnings_muted():
            return await _work_on(settings, work)
    except Exception as exc:
        line = keys_node_out_of_reach(exc)
        if line is None:
            raise
        raise ClientError(line) from exc


@contextmanager
def _pool_warnings_muted() -> Iterator[None]:
    """Keep the pool's outage warnings (`stello.db.pool`, a service's log lines) off the
    command's stderr: a command that fails says so in its one line, which names the node
    out of reach; printed too, the warning came first, as a second message."""
    logger = logging.getLogger("stello.db.pool")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


async def _work_on(settings: StelloSettings, work: Callable[[KeyStore], Awaitable[int]]) -> int:
    from stello.auth import KeyStore
    from stello.db.embedded import database_url
    from stello.db.migrate import migrate_dsn
    from stello.db.pool import create_pool

    async with database_url(settings.database_url, settings.data_dir) as dsn:
        await migrate_dsn(settings.direct_dsn(dsn))
        async with create_pool(dsn, settings) as pool:
            return await work(KeyStore(pool, 0))


def check_names(args: argparse.Namespace) -> None:
    """The space's, owner's and note's names follow the labels' rule (one line, no control
    character, at most 200 characters; the note may be empty): every listing prints them
    one per line, and a terminal would act on an escape one carried.

    Raises:
        UsageError: naming the flag.
    """
    from stello import validation
    from stello.errors import Violations, listed

    found = Violations()
    if args.space:
        validation.label(args.space, found, "--space")
    validation.label(args.principal, found, "--principal")
    if args.name:
        validation.label(args.name, found, "--name")
    if found.items:
        raise UsageError(listed(found.items))


async def cmd_keys_create(args: argparse.Namespace) -> int:
    """Create a key (and the space when missing); print it once."""
    if not args.admin and not args.space:
        raise UsageError("--space: required for a tenant key (or --admin for an admin key)")
    if args.admin and args.space:
        raise UsageError(
            "--space: an admin key reaches every space, so it takes none: leave --space out, "
            "or --admin out for a key of that one space"
        )
    check_names(args)

    async def work(keys: KeyStore) -> int:
        created = await keys.create_key(
            space=args.space if not args.admin else None,
            scope="admin" if args.admin else "tenant",
            principal=args.principal,
            name=args.name,
        )
        if getattr(args, "json", False):
            made: dict[str, object] = {"key_id": str(created.key_id), "key": created.secret}
            if created.space_id is not None:
                made |= {
                    "space_id": str(created.space_id),
                    "space": args.space,
                    "space_created": created.space_created,
                }
            write(dumps(made))
            return 0
        if created.space_id is not None:
            # A new space is said so: a mistyped name would otherwise make one unnoticed.
            how = "created now" if created.space_created else "existing"
            write(f"space: {one_line(args.space)} ({how})")
            write(f"space_id: {created.space_id}")
        write(f"key_id: {created.key_id}")
        write(f"key: {created.secret}")
        return 0

    return await _with_keys(args, work)


async def cmd_keys_revoke(args: argparse.Namespace) -> int:
    """Revoke a key by id, saying how long a running service may still accept it: each
    caches a key it resolved for STELLO_AUTH_CACHE_TTL_S, so the revocation is not at once."""
    try:
        key_id = uuid.UUID(args.key_id)
    except ValueError:
        raise UsageError(f"KEY_ID: {args.key_id!r} is not a key id (a UUID)") from None
    settings = settings_of(args)

    async def work(keys: KeyStore) -> int:
        if not await keys.revoke(key_id):
            raise ClientError(f"no live key with id {key_id}")
        if getattr(args, "json", False):
            ttl = settings.auth_cache_ttl_s
            default = type(settings).model_fields["auth_cache_ttl_s"].default
            made = {"revoked": str(key_id), "auth_cache_ttl_s": ttl}
            write(dumps(made | {"auth_cache_ttl_s_default": default}))
            return 0
        write(f"revoked: {key_id}\n{revocation_lag(settings)}")
        return 0

    return await _with_keys(args, work, settings)


def revocation_lag(settings: StelloSettings) -> str:
    """The line saying a running service may accept a revoked key for up to its cache's
    time: this environment's STELLO_AUTH_CACHE_TTL_S (the services' may differ) and the
    default's."""
    default = type(settings).model_fields["auth_cache_ttl_s"].default
    return (
        f"running services may still accept it for up to {settings.auth_cache_ttl_s:g} s "
        f"(STELLO_AUTH_CACHE_TTL_S, default {default:g}): each caches a key it resolved "
        "that long"
    )


async def cmd_keys_list(args: argparse.Namespace) -> int:
    """List keys (never their secrets): id, scope, space, live or revoked, and the note; with
    --json one array of {"id", "scope", "space" (null: an admin key's every space), "state",
    "name"}."""

    async def work(keys: KeyStore) -> int:
        listed = [
            {
                "id": str(row["id"]),
                "scope": row["scope"],
                "space": row["space"],
                "state": "revoked" if row["revoked_at"] else "live",
                "name": row["name"],
            }
            for row in await keys.list_keys()
        ]
        if getattr(args, "json", False):
            write(dumps(listed))
            return 0
        for key in listed:
            space = one_line(key["space"]) if key["space"] else "*"
            line = f"{key['id']}  {key['scope']:<6}  {pad(space, 24)}  {key['state']:<7}"
            write(f"{line}  {one_line(key['name'])}".rstrip())
        return 0

    return await _with_keys(args, work)


async def cmd_spaces_list(args: argparse.Namespace) -> int:
    """List spaces with their owners and session counts; with --json one array of {"id",
    "name", "principal" (the owner), "sessions"}."""

    async def work(keys: KeyStore) -> int:
        spaces = await keys.list_spaces()
        if getattr(args, "json", False):
            listed = [
                {"id": str(s.id), "name": s.name, "principal": s.principal, "sessions": s.sessions}
                for s in spaces
            ]
            write(dumps(listed))
            return 0
        for space in spaces:
            name, owner = one_line(space.name), one_line(space.principal)
            sessions = plural(space.sessions, "session")
            write(f"{space.id}  {pad(name, 24)}  {pad(owner, 16)}  {sessions}")
        return 0

    return await _with_keys(args, work)


SESSIONS_COUNTED = 10_000
"""`spaces delete` counts a space's sessions up to this many (more are "more than")."""


async def cmd_spaces_delete(args: argparse.Namespace) -> int:
    """Erase a space and all of its data (sessions, records, keys), after asking (or with
    --yes); as `stello delete`, it refuses to ask where stdin is not a terminal."""
    if not args.yes and not sys.stdin.isatty():
        raise UsageError(
            "--yes: required when stdin is not a terminal to ask on (nothing was erased)"
        )

    async def work(keys: KeyStore) -> int:
        found = await keys.find_spaces(args.space, most_sessions=SESSIONS_COUNTED)
        if not found:
            raise ClientError(f"no space named or with id {args.space!r}")
        if len(found) > 1:
            owners = ", ".join(f"{s.id} of {one_line(s.principal)}" for s in found)
            raise ClientError(
                f"{len(found)} spaces are named {args.space!r} ({owners}): give the id"
            )
        [space] = found
        if not args.yes:
            sessions = (
                f"more than {SESSIONS_COUNTED} sessions"
                if space.sessions > SESSIONS_COUNTED
                else plural(space.sessions, "session")
            )
            question = (
                f'Erase space "{one_line(space.name)}" ({space.id}, owner '
                f"{one_line(space.principal)}) with its {sessions} and "
                f"{plural(space.keys, 'key')}, records and all?"
            )
            # With --json, stdout holds the one JSON value: the question goes to stderr.
            if not await confirm(question, sys.stderr if getattr(args, "json", False) else None):
                raise ClientError("nothing was deleted")
        deleted = await keys.delete_space(space.id)
        if deleted is None:  # erased meanwhile
            raise ClientError(f"no space named or with id {args.space!r}")
        if getattr(args, "json", False):
            gone = {"deleted": str(deleted), "name": space.name, "principal": space.principal}
            write(dumps(gone))
            return 0
        write(f"deleted: {deleted}")
        return 0

    return await _with_keys(args, work)


def register_keys(commands: Commands) -> None:
    """Add `keys` and `spaces` (registered by `stello_cli.admin.commands`, in its place in the
    help)."""
    keys = commands.group("keys", "manage API keys (on the database directly)")
    create = commands.local("create", cmd_keys_create, "create a key (and its space)", parent=keys)
    create.add_argument(
        "--space",
        metavar="NAME",
        help="the space's name (created when missing: the output says `(created now)`)",
    )
    create.add_argument("--admin", action="store_true", help="an admin-scope key (every space)")
    create.add_argument(
        "--principal", default="default", help="the space's owner (default %(default)s)"
    )
    create.add_argument(
        "--name", default="", help="a note to recognise the key by (`stello keys list` shows it)"
    )
    create.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    commands.database_option(create)
    revoke = commands.local("revoke", cmd_keys_revoke, "revoke a key by its id", parent=keys)
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (from `stello keys list`)")
    revoke.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    commands.database_option(revoke)
    listing = commands.local("list", cmd_keys_list, "list keys (never their secrets)", parent=keys)
    listing.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    commands.database_option(listing)
    spaces = commands.group("spaces", "manage spaces (on the database directly)")
    space_list = commands.local(
        "list", cmd_spaces_list, "list spaces with owners and sizes", parent=spaces
    )
    space_list.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    commands.database_option(space_list)
    delete = commands.local(
        "delete",
        cmd_spaces_delete,
        "erase a space and all its data: sessions, records, keys (asks first)",
        parent=spaces,
    )
    delete.add_argument("space", metavar="SPACE", help="the space's name or id")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask")
    delete.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    commands.database_option(delete)
