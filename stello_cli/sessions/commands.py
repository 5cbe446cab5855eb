"""Session commands: root, fork, show, rename, archive, unarchive, delete, insight, memory,
consolidate. Each is one or two gateway calls; SESSION arguments take an id or its first
digits."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from stello_cli.gateway import gateway, session_id
from stello_cli.output import format as fmt
from stello_cli.output.style import Style, confirm, one_line, plural, short_id, write
from stello_cli.parser import Commands, int64, session_argument, text_argument
from stello_cli.sessions import shared
from stello_cli.sessions.fork_options import (
    check_template_values,
    fork_context,
    profile_options,
    profile_vars,
    skill_list,
    template_values,
)
from stello_client import dicts
from stello_client.errors import ClientError, UsageError

if TYPE_CHECKING:
    from stello_client.types import SessionSummary


def show_session(args: argparse.Namespace, session: SessionSummary) -> None:
    """A created or changed session: JSON, only its id (-q), or `name: value` lines."""
    if args.json:
        write(dicts.dumps(dicts.session_dict(session)))
    elif getattr(args, "quiet", False):
        write(session.id)
    else:
        write("\n".join(fmt.session_lines(session)))


async def cmd_root(args: argparse.Namespace) -> int:
    """Create a root session."""
    values = template_values(args)  # a bad --var fails before any call
    pairs = profile_vars(args.meta, "--meta")
    async with gateway(args) as client:
        await check_template_values(client, args.profile, values)
        session = await client.create_root(
            label=args.label,
            system_prompt=args.system_prompt,
            skills=skill_list(args.skills),
            profile=args.profile,
            profile_vars=values,
            metadata=pairs,
        )
    show_session(args, session)
    return 0


async def cmd_fork(args: argparse.Namespace) -> int:
    """Fork a session into a new child."""
    if args.label is None:
        raise UsageError("--label: required (the new session's label)")
    context = fork_context(args)
    values = template_values(args)
    pairs = profile_vars(args.meta, "--meta")
    async with gateway(args) as client:
        await check_template_values(client, args.profile, values)
        source = await session_id(client, args.source, "SOURCE")
        parent = await session_id(client, args.parent, "--parent") if args.parent else None
        session = await client.fork(
            source,
            args.label,
            context=context,
            inherit_until_seq=args.up_to,
            topology_parent_id=parent,
            profile=args.profile,
            profile_vars=values,
            system_prompt=args.system_prompt,
            skills=skill_list(args.skills),
            prompt=args.prompt,
            metadata=pairs,
            copy_metadata=args.copy_meta,
        )
    show_session(args, session)
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    """Show a session: topology, turns, times, config, system prompt, memory and insight."""
    async with gateway(args) as client:
        view = await client.get_session(await session_id(client, args.session))
    if args.json:
        write(dicts.dumps({**dicts.view_dict(view), "progress": fmt.progress_dict(view.progress)}))
    else:
        write("\n".join(fmt.view_lines(view, Style.of(sys.stdout))))
    return 0


async def cmd_meta(args: argparse.Namespace) -> int:
    """Show a session's metadata, or change it (K=V pairs set, --remove K) at once."""
    pairs = profile_vars(args.pairs, "K=V")
    both = [key for key in args.remove or () if key in pairs]
    if both:  # the gateway's refusal named its field ("is also in set")
        raise UsageError(f"--remove: {both[0]} is set by a K=V too: give one or the other")
    async with gateway(args) as client:
        found = await session_id(client, args.session)
        if pairs or args.remove:
            metadata = await client.update_session_metadata(found, pairs, args.remove or ())
        else:
            metadata = dict((await client.get_session(found)).metadata)
    if args.json:
        write(dicts.dumps(dict(sorted(metadata.items()))))
    elif metadata:
        write("\n".join(f"{key}={one_line(value)}" for key, value in sorted(metadata.items())))
    else:
        write("(no metadata)")
    return 0


async def cmd_rename(args: argparse.Namespace) -> int:
    """Give a session a new label; say what changed."""
    async with gateway(args) as client:
        found = await session_id(client, args.session)
        old = (await client.get_session(found)).node.label
        session = await client.update_label(found, args.label)
    if args.json:
        show_session(args, session)
    elif old == session.label:
        write(f'{short_id(found)} is already labelled "{old}": nothing changed')
    else:
        write(f'renamed {short_id(found)} from "{one_line(old)}" to "{one_line(session.label)}"')
    return 0


def status_line(label: str, session: str, archive: bool, already: bool) -> str:
    """What archive/unarchive did, in one line."""
    short = short_id(session)
    if already:
        state = "archived" if archive else "active (not archived)"
        return f'"{label}" ({short}) was already {state}: nothing changed'
    if archive:
        return f'archived "{label}" ({short}): turns are refused until `stello unarchive {short}`'
    return f'unarchived "{label}" ({short}): it takes turns again'


async def _set_status(args: argparse.Namespace, archive: bool) -> int:
    from stello.common.v1 import common_pb2  # loaded when the command runs (start-up speed)

    async with gateway(args) as client:
        found = await session_id(client, args.session)
        before = await client.get_session(found)
        archived = before.node.status == common_pb2.SESSION_STATUS_ARCHIVED
        session = await (client.archive(found) if archive else client.unarchive(found))
    if args.json:
        show_session(args, session)
    else:
        write(status_line(one_line(session.label), found, archive, already=archived == archive))
    return 0


async def cmd_archive(args: argparse.Namespace) -> int:
    """Archive a session (it keeps everything; turns are refused until unarchived)."""
    return await _set_status(args, archive=True)


async def cmd_unarchive(args: argparse.Namespace) -> int:
    """Make an archived session active again."""
    return await _set_status(args, archive=False)


async def cmd_delete(args: argparse.Namespace) -> int:
    """Erase a session and its whole subtree, after asking (or with --yes)."""
    if not args.yes and not sys.stdin.isatty():
        raise UsageError(
            "--yes: required when stdin is not a terminal to ask on (nothing was erased)"
        )
    async with gateway(args) as client:
        found = await session_id(client, args.session)
        if not args.yes:
            nodes = await client.get_tree(root_id=found)
            top, below = nodes[0], len(nodes) - 1
            extra = f" and its {plural(below, 'descendant')}" if below else ""
            question = (
                f'Erase "{one_line(top.label)}" ({short_id(top.id)}){extra}, records and all?'
            )
            # With --json, stdout holds the one JSON value: the question goes to stderr.
            if not await confirm(question, sys.stderr if args.json else None):
                raise ClientError("nothing was deleted")
        if args.json:
            write(dicts.dumps({"deleted_ids": await client.delete_session(found)}))
        else:  # the count alone: a subtree of any size fits the reply
            count = await client.delete_session_counted(found)
            write(f"deleted {plural(count, 'session')}")
    return 0


async def _slot(args: argparse.Namespace, name: str) -> int:
    """Show the insight or memory, or replace it with TEXT."""
    async with gateway(args) as client:
        found = await session_id(client, args.session)
        if args.text is None:
            view = await client.get_session(found)
            value = getattr(view, name) if view.HasField(name) else None
            if args.json:
                write(dicts.dumps({name: value}))
            else:  # an emptied one too (it printed an empty line)
                write(value or f"(no {name})")
            return 0
        put = client.put_insight if name == "insight" else client.put_memory
        text = text_argument(args.text)
        await put(found, text)
    write(dicts.dumps({name: "set"}) if args.json else f"{name} {'set' if text else 'emptied'}")
    return 0


async def cmd_insight(args: argparse.Namespace) -> int:
    """Show the insight, or set it (the next turn reads it once)."""
    return await _slot(args, "insight")


async def cmd_memory(args: argparse.Namespace) -> int:
    """Show or set a session's memory; or, with an action first, the space's shared memory."""
    if args.target in shared.ACTIONS:
        return await shared.cmd_shared_memory(args)
    if len(args.rest) > 1 or args.summary is not None:
        raise UsageError(
            "memory SESSION takes at most one TEXT (the shared memory: memory list|get|put|rm)"
        )
    args.session, args.text = args.target, (args.rest[0] if args.rest else None)
    return await _slot(args, "memory")


MEMORY_HELP = """stello memory SESSION [TEXT]     show, or set (- = stdin), a session's memory
                                 (never sent to the model)
stello memory list               the space's shared memory: each entry's slug
                                 and summary
stello memory get SLUG           an entry's body
stello memory put SLUG --summary TEXT BODY
                                 create or replace an entry (BODY - reads stdin)
stello memory rm SLUG            remove an entry

The shared memory is the space's: every session's model may recall its entries
(memory tools, README "Shared memory")."""


def _register_memory(commands: Commands) -> None:
    memory = commands.client(
        "memory",
        cmd_memory,
        "a session's memory, or the space's shared memory (list, get, put, rm)",
        MEMORY_HELP,
        flags={"content": "TEXT", "slug": "SLUG", "summary": "--summary", "body": "BODY"},
    )
    memory.add_argument(
        "target", metavar="SESSION|ACTION", help=f"a session, or one of {', '.join(shared.ACTIONS)}"
    )
    # default=[]: without one argparse names an absent ARG among the missing arguments
    memory.add_argument(
        "rest", nargs="*", default=[], metavar="ARG", help="TEXT, or the action's SLUG [BODY]"
    )
    memory.set_defaults(more_positionals="rest")
    shared.add_memory_actions(memory)


async def cmd_consolidate(args: argparse.Namespace) -> int:
    """Rewrite the session's memory with the model, and show it."""
    from stello.common.v1 import common_pb2  # loaded when the command runs (start-up speed)

    async with gateway(args) as client:
        reply = await client.consolidate(await session_id(client, args.session))
    memory = reply.memory if reply.HasField("memory") else None
    spent = reply.status == common_pb2.JOB_STATUS_BUDGET_SPENT
    if args.json:
        write(
            dicts.dumps(
                {
                    "memory": memory,
                    "complete": not spent,
                    "covered_until_seq": reply.covered_until_seq,
                    "last_seq": reply.last_seq,
                    "model_calls": reply.model_calls,
                }
            )
        )
        return 0
    write(memory or "(no memory)")
    if spent:
        write(
            f"(stopped at the gateway's model-call budget: the memory covers records through "
            f"seq {reply.covered_until_seq} of {reply.last_seq}; run it again to continue)"
        )
    return 0


def _meta_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--meta",
        action="append",
        metavar="K=V",
        help="a metadata pair of the new session (repeat for more; at most 16)",
    )


def register(commands: Commands) -> None:
    """Add the session commands."""
    root = commands.client("root", cmd_root, "create a root session", flags={"metadata": "--meta"})
    root.add_argument("--label", help='its label (default "Root")')
    root.add_argument("--system-prompt", metavar="TEXT", help="its system prompt")
    _meta_option(root)
    profile_options(root)
    root.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
    _register_fork(commands)
    show = commands.client(
        "show", cmd_show, "show a session: its place, turns, config, prompt, memory, insight"
    )
    session_argument(show)
    rename = commands.client(
        "rename", cmd_rename, "give a session a new label", flags={"label": "LABEL"}
    )
    session_argument(rename)
    rename.add_argument("label", metavar="LABEL", help="the new label (1..200 characters)")
    meta = commands.client(
        "meta",
        cmd_meta,
        "show or change a session's metadata (K=V sets, --remove K removes, at once)",
        flags={"set": "K=V", "remove": "--remove"},
    )
    session_argument(meta)
    meta.add_argument("pairs", nargs="*", default=[], metavar="K=V", help="keys to add or replace")
    meta.add_argument(
        "--remove", action="append", metavar="K", help="a key to remove (repeat for more)"
    )
    for name, run, help_ in (
        ("archive", cmd_archive, "archive a session (kept, read-only for turns; never cascades)"),
        ("unarchive", cmd_unarchive, "make an archived session active again"),
    ):
        session_argument(commands.client(name, run, help_))
    delete = commands.client(
        "delete", cmd_delete, "erase a session and its whole subtree (asks first)"
    )
    session_argument(delete)
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask")
    insight = commands.client(
        "insight",
        cmd_insight,
        "show or set the insight: a note the next turn reads once",
        flags={"content": "TEXT"},
    )
    session_argument(insight)
    insight.add_argument("text", nargs="?", metavar="TEXT", help="the new insight (- reads stdin)")
    _register_memory(commands)
    consolidate = commands.client(
        "consolidate", cmd_consolidate, "rewrite a session's memory with the model"
    )
    session_argument(consolidate)


def _register_fork(commands: Commands) -> None:
    fork = commands.client(
        "fork",
        cmd_fork,
        "fork a session into a new child",
        "Fork SOURCE into a new session, placed under SOURCE (or --parent).\n\n"
        "--context picks what the child starts with: none (nothing), inherit (a copy\n"
        "of SOURCE's records, all or up to --up-to SEQ), compress (a summary of them\n"
        "made by the model, in its system prompt). --up-to alone means inherit.",
        flags={"metadata": "--meta"},
    )
    session_argument(fork, "source", "SOURCE")
    fork.add_argument("--label", help="the new session's label (required)")
    profile_options(fork)
    fork.add_argument("--context", choices=["none", "inherit", "compress"], help="see above")
    fork.add_argument(
        "--up-to", type=int64, metavar="SEQ", help="inherit SOURCE's records up to SEQ only"
    )
    fork.add_argument("--prompt", metavar="TEXT", help="an opening assistant message")
    fork.add_argument("--system-prompt", metavar="TEXT", help="the child's system prompt")
    fork.add_argument("--parent", metavar="SESSION", help="place the child under SESSION")
    _meta_option(fork)
    fork.add_argument(
        "--copy-meta",
        action="store_true",
        help="start from SOURCE's metadata (--meta on top); a fork copies none otherwise",
    )
    fork.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
