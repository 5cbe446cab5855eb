"""Session commands: root, fork, show, rename, archive, unarchive, delete, insight, memory,
consolidate. Each is one or two gateway calls; SESSION arguments take an id or its first
digits."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import Any

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli import format as fmt
from stello_cli import shared
from stello_cli.parser import Commands, session_argument
from stello_cli.style import Style, plural, short_id, write
from stello_client import dicts
from stello_client.connect import Client, gateway
from stello_client.errors import ClientError, UsageError

CONTEXTS: dict[str | None, common_pb2.ForkContext] = {
    None: common_pb2.FORK_CONTEXT_UNSPECIFIED,
    "none": common_pb2.FORK_CONTEXT_NONE,
    "inherit": common_pb2.FORK_CONTEXT_INHERIT,
    "compress": common_pb2.FORK_CONTEXT_COMPRESS,
}


def profile_vars(pairs: list[str] | None) -> dict[str, str]:
    """`--var NAME=VALUE` flags as a dict."""
    found: dict[str, str] = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--var wants NAME=VALUE, got {pair!r}")
        found[name] = value
    return found


def show_session(args: argparse.Namespace, session: common_pb2.SessionSummary) -> None:
    """A created or changed session: JSON, only its id (-q), or `name: value` lines."""
    if args.json:
        write(dicts.dumps(dicts.session_dict(session)))
    elif getattr(args, "quiet", False):
        write(session.id)
    else:
        write("\n".join(fmt.session_lines(session)))


def skill_list(value: str | None) -> common_pb2.SkillList | None:
    """--skills NAMES: comma-separated names; "" = none; absent (None) = inherit."""
    if value is None:
        return None
    return common_pb2.SkillList(names=[name.strip() for name in value.split(",") if name.strip()])


def fork_context(args: argparse.Namespace) -> common_pb2.ForkContext:
    """The ForkContext of --context; --up-to alone means inherit (it copies records)."""
    if args.up_to is not None and args.context not in (None, "inherit"):
        raise UsageError(
            f"--up-to SEQ inherits the records up to SEQ, so it needs --context inherit "
            f"(or no --context), not --context {args.context}"
        )
    if args.up_to is not None and args.up_to < 0:
        raise UsageError(f"--up-to: must not be negative, got {args.up_to}")
    return CONTEXTS["inherit" if args.up_to is not None else args.context]


def text_argument(value: str) -> str:
    """A TEXT/MESSAGE argument; `-` reads it from stdin."""
    return sys.stdin.read() if value == "-" else value


async def cmd_root(args: argparse.Namespace) -> int:
    """Create a root session."""
    values = profile_vars(args.var)  # a bad --var fails before any call
    async with gateway(args) as client:
        request = agent_pb2.CreateRootRequest(
            space_id=client.space_id, profile_vars=values, request_id=_rid()
        )
        for name in ("label", "system_prompt", "profile"):
            if getattr(args, name) is not None:
                setattr(request, name, getattr(args, name))
        skills = skill_list(args.skills)
        if skills is not None:
            request.skills.CopyFrom(skills)
        reply = await client.call(client.stub.CreateRoot, request)
    show_session(args, reply.session)
    return 0


async def cmd_fork(args: argparse.Namespace) -> int:
    """Fork a session into a new child."""
    if args.label is None:
        raise UsageError("--label is required (the new session's label)")
    context = fork_context(args)
    values = profile_vars(args.var)
    async with gateway(args) as client:
        request = agent_pb2.ForkRequest(
            space_id=client.space_id,
            source_session_id=await client.session(args.source, "SOURCE"),
            label=args.label,
            profile_vars=values,
            context=context,
            request_id=_rid(),
        )
        if args.parent is not None:
            request.topology_parent_id = await client.session(args.parent, "--parent")
        for field, value in (
            ("profile", args.profile),
            ("system_prompt", args.system_prompt),
            ("inherit_until_seq", args.up_to),
            ("prompt", args.prompt),
        ):
            if value is not None:
                setattr(request, field, value)
        skills = skill_list(args.skills)
        if skills is not None:
            request.skills.CopyFrom(skills)
        reply = await client.call(client.stub.Fork, request)
    show_session(args, reply.session)
    return 0


async def view_of(client: Client, session_id: str) -> agent_pb2.SessionView:
    """GetSession's joined view."""
    request = agent_pb2.GetSessionRequest(space_id=client.space_id, session_id=session_id)
    reply: agent_pb2.GetSessionResponse = await client.call(client.stub.GetSession, request)
    return reply.session


async def cmd_show(args: argparse.Namespace) -> int:
    """Show a session: topology, turns, times, config, system prompt, memory and insight."""
    async with gateway(args) as client:
        view = await view_of(client, await client.session(args.session))
    if args.json:
        write(dicts.dumps(dicts.view_dict(view)))
    else:
        write("\n".join(fmt.view_lines(view, Style.of(sys.stdout))))
    return 0


async def cmd_rename(args: argparse.Namespace) -> int:
    """Give a session a new label."""
    async with gateway(args) as client:
        request = agent_pb2.UpdateLabelRequest(
            space_id=client.space_id,
            session_id=await client.session(args.session),
            label=args.label,
        )
        reply = await client.call(client.stub.UpdateLabel, request)
    show_session(args, reply.session)
    return 0


async def _set_status(args: argparse.Namespace, archive: bool) -> int:
    async with gateway(args) as client:
        session_id = await client.session(args.session)
        if archive:
            request: Any = agent_pb2.ArchiveRequest(space_id=client.space_id, session_id=session_id)
            reply = await client.call(client.stub.Archive, request)
        else:
            request = agent_pb2.UnarchiveRequest(space_id=client.space_id, session_id=session_id)
            reply = await client.call(client.stub.Unarchive, request)
    show_session(args, reply.session)
    return 0


async def cmd_archive(args: argparse.Namespace) -> int:
    """Archive a session (it keeps everything; turns are refused until unarchived)."""
    return await _set_status(args, archive=True)


async def cmd_unarchive(args: argparse.Namespace) -> int:
    """Make an archived session active again."""
    return await _set_status(args, archive=False)


async def _confirm(question: str) -> bool:
    write(f"{question} [y/N] ", end="")
    answer = await asyncio.to_thread(sys.stdin.readline)
    return answer.strip().lower() in ("y", "yes")


async def cmd_delete(args: argparse.Namespace) -> int:
    """Erase a session and its whole subtree, after asking (or with --yes)."""
    if not args.yes and not sys.stdin.isatty():
        raise UsageError("refusing to erase without --yes (stdin is not a terminal to ask on)")
    async with gateway(args) as client:
        session_id = await client.session(args.session)
        if not args.yes:
            tree = await client.call(
                client.stub.GetTree,
                agent_pb2.GetTreeRequest(space_id=client.space_id, root_id=session_id),
            )
            top, below = tree.nodes[0], len(tree.nodes) - 1
            extra = f" and its {plural(below, 'descendant')}" if below else ""
            question = f'Erase "{top.label}" ({short_id(top.id)}){extra}, records and all?'
            if not await _confirm(question):
                raise ClientError("nothing was deleted")
        request = agent_pb2.DeleteSessionRequest(space_id=client.space_id, session_id=session_id)
        reply = await client.call(client.stub.DeleteSession, request)
    if args.json:
        write(dicts.dumps({"deleted_ids": list(reply.deleted_ids)}))
    else:
        write(f"deleted {plural(len(reply.deleted_ids), 'session')}")
    return 0


async def _slot(args: argparse.Namespace, name: str) -> int:
    """Show the insight or memory, or replace it with TEXT."""
    async with gateway(args) as client:
        session_id = await client.session(args.session)
        if args.text is None:
            view = await view_of(client, session_id)
            value = getattr(view, name) if view.HasField(name) else None
            if args.json:
                write(dicts.dumps({name: value}))
            else:
                write(value if value is not None else f"(no {name})")
            return 0
        if name == "insight":
            await client.call(
                client.stub.PutInsight,
                agent_pb2.PutInsightRequest(
                    space_id=client.space_id,
                    session_id=session_id,
                    content=text_argument(args.text),
                ),
            )
        else:
            await client.call(
                client.stub.PutMemory,
                agent_pb2.PutMemoryRequest(
                    space_id=client.space_id,
                    session_id=session_id,
                    content=text_argument(args.text),
                ),
            )
    write(dicts.dumps({name: "set"}) if args.json else f"{name} set")
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


MEMORY_HELP = """stello memory SESSION [TEXT]     show, or set (- reads stdin), a session's memory
                                 (never sent to the model)
stello memory list               the space's shared memory: slug and summary of each entry
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
    memory.add_argument("rest", nargs="*", metavar="ARG", help="TEXT, or the action's SLUG [BODY]")
    memory.set_defaults(more_positionals="rest")
    shared.add_memory_actions(memory)


async def cmd_consolidate(args: argparse.Namespace) -> int:
    """Rewrite the session's memory with the model, and show it."""
    async with gateway(args) as client:
        request = agent_pb2.ConsolidateRequest(
            space_id=client.space_id, session_id=await client.session(args.session)
        )
        reply = await client.call(client.stub.Consolidate, request)
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


def _rid() -> str:
    return uuid.uuid4().hex


def profile_options(parser: argparse.ArgumentParser) -> None:
    """--profile, --var and --skills."""
    parser.add_argument(
        "--profile", metavar="NAME", help="a profile of the gateway's file (`stello profiles`)"
    )
    parser.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="a value of the profile's {NAME} variables (repeat for each)",
    )
    parser.add_argument(
        "--skills",
        metavar="NAMES",
        help='the skills it may activate, comma-separated ("" = none; default: inherit)',
    )


def register(commands: Commands) -> None:
    """Add the session commands."""
    root = commands.client("root", cmd_root, "create a root session")
    root.add_argument("--label", help='its label (default "Root")')
    root.add_argument("--system-prompt", metavar="TEXT", help="its system prompt")
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
    )
    session_argument(fork, "source", "SOURCE")
    fork.add_argument("--label", help="the new session's label (required)")
    profile_options(fork)
    fork.add_argument("--context", choices=["none", "inherit", "compress"], help="see above")
    fork.add_argument(
        "--up-to", type=int, metavar="SEQ", help="inherit SOURCE's records up to SEQ only"
    )
    fork.add_argument("--prompt", metavar="TEXT", help="an opening assistant message")
    fork.add_argument("--system-prompt", metavar="TEXT", help="the child's system prompt")
    fork.add_argument("--parent", metavar="SESSION", help="place the child under SESSION")
    fork.add_argument("-q", "--quiet", action="store_true", help="print only the new id")
