"""`stello memory list|get|put|rm`, `stello skills`, `stello lineage`: what sessions share.

`stello memory` keeps its session form (`stello memory SESSION [TEXT]`, in
`sessions`): its first argument is a shared memory action (`list`, `get`,
`put`, `rm`) or a session, and no session reference is one of those words (a
SESSION is hex digits). The shared memory is the space's (DESIGN §4.5); skills
are the gateway's (`STELLO_GATEWAY_SKILLS_FILE`); a lineage is a session's
ancestors nearest first, with their memory and insight.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from stello_cli.gateway import gateway, session_id
from stello_cli.output import format as fmt
from stello_cli.output.style import Style, write
from stello_cli.parser import text_argument
from stello_client import dicts
from stello_client.errors import UsageError

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.types import SharedMemoryEntry

ACTIONS = ("list", "get", "put", "rm")


def entry_dict(entry: SharedMemoryEntry) -> dict[str, Any]:
    """A shared memory entry as JSON (the body only when it was read); `entry_id` is what
    the space's shared memory events name it by."""
    data: dict[str, Any] = {
        "slug": entry.slug,
        "entry_id": entry.entry_id,
        "summary": entry.summary,
    }
    if entry.HasField("body"):
        data["body"] = entry.body
    data["created_at"] = dicts.iso(entry.created_at)
    data["updated_at"] = dicts.iso(entry.updated_at)
    return data


def _slug(args: argparse.Namespace) -> str:
    if len(args.rest) != 1:
        raise UsageError(f"memory {args.target} takes one SLUG, got {len(args.rest)} arguments")
    slug: str = args.rest[0]
    return slug


async def cmd_shared_memory(args: argparse.Namespace) -> int:
    """`stello memory ACTION ...` on the space's shared memory."""
    if args.summary is not None and args.target != "put":
        raise UsageError("--summary: only with `stello memory put`")
    if args.summary is None and args.target == "put":  # before any call
        raise UsageError("--summary: required by `stello memory put` (the line the index shows)")
    async with gateway(args) as client:
        if args.target == "list":
            if args.rest:
                raise UsageError("memory list takes no arguments")
            await _list(args, client)
        elif args.target == "get":
            await _get(args, client, _slug(args))
        elif args.target == "put":
            await _put(args, client)
        else:
            await _remove(args, client, _slug(args))
    return 0


async def _list(args: argparse.Namespace, client: AsyncClient) -> None:
    entries = [entry async for entry in client.shared_memory()]
    if args.json:
        write(dicts.dumps([entry_dict(e) for e in entries]))
    elif not entries:
        write(
            "no shared memory yet: add an entry with `stello memory put SLUG --summary TEXT BODY`"
        )
    else:
        style = Style.of(sys.stdout)
        write("\n".join(f"{style.bold(e.slug)}: {e.summary}" for e in entries))


async def _get(args: argparse.Namespace, client: AsyncClient, slug: str) -> None:
    entry = await client.get_shared_memory_entry(slug)
    write(dicts.dumps(entry_dict(entry)) if args.json else entry.body)


async def _put(args: argparse.Namespace, client: AsyncClient) -> None:
    if len(args.rest) != 2:
        raise UsageError("memory put takes SLUG and BODY (- reads stdin), and --summary TEXT")
    slug, body = args.rest
    reply = await client.upsert_shared_memory_entry(
        slug, summary=args.summary, body=text_argument(body)
    )
    if args.json:
        write(dicts.dumps({**entry_dict(reply.entry), "created": reply.created}))
    else:
        write(f"{slug} {'created' if reply.created else 'replaced'}")


async def _remove(args: argparse.Namespace, client: AsyncClient, slug: str) -> None:
    removed = await client.remove_shared_memory_entry(slug)
    if args.json:
        write(dicts.dumps({"slug": slug, "removed": removed}))
    else:
        write(f"{slug} removed" if removed else f"no entry {slug} (nothing removed)")


NO_SKILLS = "no skills: the gateway reads them from STELLO_GATEWAY_SKILLS_FILE (TOML)"


async def cmd_skills(args: argparse.Namespace) -> int:
    """List the gateway's skills, or those SESSION may activate."""
    async with gateway(args) as client:
        session = await session_id(client, args.session) if args.session is not None else None
        skills = await client.list_skills(session_id=session)
        empty = await _why_none(client, session) if not skills else NO_SKILLS
    if args.json:
        found = [
            {"name": s.name, "description": s.description, "content": s.content} for s in skills
        ]
        write(dicts.dumps(found))
    elif not skills:
        write(empty)
    else:
        style = Style.of(sys.stdout)
        write("\n".join(f"{style.bold(s.name)}: {s.description}" for s in skills))
    return 0


async def _why_none(client: AsyncClient, session: str | None) -> str:
    """Why `session` may activate no skill: the gateway has none, its allow-list is empty,
    or it names only skills the gateway lacks."""
    if session is None or not await client.list_skills():
        return NO_SKILLS
    config = (await client.get_session(session)).config
    allowed = list(config.skills.names) if config.HasField("skills") else None
    if allowed:
        return (
            f"no skills for this session: its config allows only {', '.join(allowed)}, which "
            "the gateway does not have (`stello skills` lists those it has)"
        )
    return 'no skills for this session: its config allows none (--skills "")'


async def cmd_lineage(args: argparse.Namespace) -> int:
    """Show SESSION's ancestors nearest first, with their memory and insight."""
    async with gateway(args) as client:
        found = [d async for d in client.lineage(await session_id(client, args.session))]
    if args.json:
        write(dicts.dumps([dicts.digest_dict(digest) for digest in found]))
    elif found:
        write("\n".join(fmt.digests_lines(found, Style.of(sys.stdout))))
    else:
        write("a root: no ancestors")
    return 0


TAKES = {"list": (), "get": ("SLUG",), "put": ("SLUG", "BODY"), "rm": ("SLUG",)}
"""What each action's usage line names its arguments (the session form's: TEXT)."""


def argument_names(args: argparse.Namespace, dest: str, index: int) -> str | None:
    """`stello memory`'s arguments as its usage lines name them (`ArgumentNames`): the
    first a SESSION (not an action), then the action's SLUG and BODY or the session's
    TEXT, and ARG past those (the parser's name, ARG, said nothing)."""
    if dest == "target":
        return "SESSION"
    if dest != "rest":
        return None
    taken = TAKES.get(args.target, ("TEXT",))
    return taken[index] if index < len(taken) else "ARG"


def add_memory_actions(memory: argparse.ArgumentParser) -> None:
    """Give `stello memory`'s parser its shared memory form (see the module docstring)."""
    memory.set_defaults(argument_names=argument_names)
    memory.add_argument(
        "--summary", metavar="TEXT", help="memory put: the entry's one-line summary"
    )


def register_views(commands: Any) -> None:
    """Add skills and lineage (`stello memory` is registered by `sessions`)."""
    skills = commands.client(
        "skills",
        cmd_skills,
        "list the gateway's skills, or those a session may activate",
        flags={"session_id": "SESSION"},
    )
    skills.add_argument("session", nargs="?", metavar="SESSION", help="only this session's")
    lineage = commands.client(
        "lineage",
        cmd_lineage,
        "show a session's ancestors, nearest first, with their memory and insight",
    )
    lineage.add_argument("session", metavar="SESSION", help="the session whose ancestors to show")
