"""tree, digests, profiles, whoami (and skills, lineage from `shared`): what is in the space,
and who is asking.

`tree` previews each session's newest record: one small ListRecords per
session (at most PREVIEW_CALLS at once), and only for trees of at most
MAX_PREVIEWED sessions, so a large forest costs one GetTree, as without
previews (``--no-preview`` skips them always).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from stello_cli.gateway import gateway, names_space, session_id
from stello_cli.output import format as fmt
from stello_cli.output.style import Style, one_line, write
from stello_cli.parser import Commands, int32
from stello_cli.sessions.fork_options import profile_vars
from stello_cli.sessions.shared import register_views
from stello_cli.turns.talk import newest_records
from stello_client import dicts

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.types import DigestFilter, TreeNode

STATUSES: dict[str, Literal["active", "archived"] | None] = {
    "all": None,
    "active": "active",
    "archived": "archived",
}
MAX_PREVIEWED = 200
PREVIEW_CALLS = 8


async def previews(client: AsyncClient, nodes: Sequence[TreeNode]) -> dict[str, str]:
    """Each session's newest record on one line ("" when it has none)."""
    gate = asyncio.Semaphore(PREVIEW_CALLS)

    async def one(session_id: str) -> tuple[str, str]:
        async with gate:
            newest = await newest_records(client, session_id, 1)
        return session_id, fmt.preview(newest[-1] if newest else None)

    return dict(await asyncio.gather(*(one(node.id) for node in nodes)))


async def tree_nodes(
    client: AsyncClient, root: str | None = None, depth: int | None = None
) -> list[TreeNode]:
    """The forest (or the subtree under `root`), in pre-order."""
    return await client.get_tree(root_id=root, max_depth=depth)


async def draw_tree(
    client: AsyncClient,
    nodes: Sequence[TreeNode],
    *,
    preview: bool = True,
    mark: str | None = None,
) -> list[str]:
    """The lines `stello tree` prints for `nodes` (previews when few enough)."""
    shown = await previews(client, nodes) if preview and len(nodes) <= MAX_PREVIEWED else None
    return fmt.tree_lines(nodes, Style.of(sys.stdout), shown, mark)


async def cmd_tree(args: argparse.Namespace) -> int:
    """Show the forest as an indented tree."""
    async with gateway(args) as client:
        root = await session_id(client, args.root, "--root") if args.root is not None else None
        nodes = await tree_nodes(client, root, args.depth)
        if args.json:
            write(dicts.dumps([dicts.node_dict(node) for node in nodes]))
        elif not nodes:
            write("no sessions yet: create one with `stello root`")
        else:
            write("\n".join(await draw_tree(client, nodes, preview=args.preview)))
    return 0


async def cmd_digests(args: argparse.Namespace) -> int:
    """List every session's digest, all pages."""
    where = profile_vars(args.where, "--where")
    filters: DigestFilter = {}
    if where:
        filters["metadata"] = where
    if args.label_prefix is not None:
        filters["label_prefix"] = args.label_prefix
    if args.roots:
        filters["roots_only"] = True
    async with gateway(args) as client:
        if args.parent:
            filters["parent_id"] = await session_id(client, args.parent, "--parent")
        if args.root:
            filters["root_id"] = await session_id(client, args.root, "--root")
        found = [d async for d in client.digests(status=STATUSES[args.status], **filters)]
    if args.json:
        write(dicts.dumps([dicts.digest_dict(digest) for digest in found]))
    elif found:
        write("\n".join(fmt.digests_lines(found, Style.of(sys.stdout))))
    elif filters:
        write("no sessions match these filters")
    elif args.status == "all":
        write("no sessions yet: create one with `stello root`")
    else:
        write(f"no {args.status} sessions")
    return 0


async def cmd_profiles(args: argparse.Namespace) -> int:
    """List the gateway's fork profiles."""
    async with gateway(args) as client:
        profiles = await client.list_profiles()
    if args.json:
        write(dicts.dumps([dicts.profile_dict(p) for p in profiles]))
    elif not profiles:
        write("no profiles: the gateway reads them from STELLO_GATEWAY_PROFILES_FILE (TOML)")
    else:
        style = Style.of(sys.stdout)
        for profile in profiles:
            write("\n".join(fmt.profile_lines(profile, style)))
    return 0


async def cmd_whoami(args: argparse.Namespace) -> int:
    """Who the key belongs to, and the spaces it reaches."""
    from stello.agent.v1 import agent_pb2

    async with gateway(args, settle=False) as client:
        reply = await client.who_am_i()
        # A key reaching several spaces needs none chosen to say which it reaches.
        chosen = len(reply.spaces) == 1 or names_space(args)
        space = await client.space_id() if chosen else None
    scope = agent_pb2.KeyScope.Name(reply.scope).removeprefix("KEY_SCOPE_").lower()
    if args.json:
        spaces = [{"id": s.id, "name": s.name} for s in reply.spaces]
        body = {"principal": reply.principal, "key_id": reply.key_id, "scope": scope}
        write(dicts.dumps({**body, "spaces": spaces, "space_id": space}))
        return 0
    write(f"principal: {one_line(reply.principal)}")
    write(f"key: {reply.key_id} ({scope})")
    for found in reply.spaces:
        current = "  (in use)" if found.id == space else ""
        write(f"space: {one_line(found.name)}  {found.id}{current}")
    return 0


def register(commands: Commands) -> None:
    """Add tree, digests, profiles and whoami."""
    tree = commands.client(
        "tree",
        cmd_tree,
        "show the forest: labels, status, turns, short ids and the newest record of each",
        flags={"root_id": "--root", "max_depth": "--depth"},
    )
    tree.add_argument("--root", metavar="SESSION", help="only the tree under SESSION")
    tree.add_argument("--depth", type=int32, metavar="N", help="at most N levels below the top")
    tree.add_argument(
        "--no-preview",
        dest="preview",
        action="store_false",
        help="leave out each session's newest record (one call less per session)",
    )
    digests = commands.client(
        "digests",
        cmd_digests,
        "list every session with its memory, insight and metadata (filters: --where ...)",
        flags={
            "filter.metadata": "--where",
            "filter.label_prefix": "--label-prefix",
            "filter.parent_id": "--parent",
            "filter.root_id": "--root",
            "filter.roots_only": "--roots",
        },
    )
    digests.add_argument(
        "--status", choices=sorted(STATUSES), default="all", help="only these (default all)"
    )
    digests.add_argument(
        "--where",
        action="append",
        metavar="K=V",
        help="only sessions whose metadata has K=V (repeat: all must hold)",
    )
    digests.add_argument("--label-prefix", metavar="TEXT", help="only labels starting with TEXT")
    digests.add_argument("--parent", metavar="SESSION", help="only the children of SESSION")
    digests.add_argument("--root", metavar="SESSION", help="only the tree under SESSION")
    digests.add_argument("--roots", action="store_true", help="only roots")
    commands.client("profiles", cmd_profiles, "list the fork profiles of the gateway")
    commands.client("whoami", cmd_whoami, "show the key's owner and the spaces it reaches")
    register_views(commands)
