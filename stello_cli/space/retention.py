"""retention: a space's retention policy — show it, set it, apply it now (or see what it would
do with --dry-run), and pin the sessions it must keep (issue #38).

The gateway's GetRetention, PutRetention, ApplyRetention and PinSession; the tree
service also applies the policy on its own (STELLO_TREE_RETENTION_INTERVAL_S).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from stello.common.v1 import common_pb2
from stello.rules.retention_days import days_problem
from stello_cli.gateway import gateway, session_id
from stello_cli.output.style import one_line, plural, short_id, write
from stello_cli.parser import Commands, session_argument, whole
from stello_client import dicts
from stello_client.errors import ClientError, UsageError

if TYPE_CHECKING:
    from stello_client.aio import AsyncClient
    from stello_client.types import RetentionAction, RetentionPolicy

KIND_NAMES = {
    common_pb2.RetentionAction.KIND_ARCHIVE: "archive",
    common_pb2.RetentionAction.KIND_DELETE: "delete",
}


NO_POLICY = "this space has no retention policy: nothing expires; `stello retention set` makes one"
"""What `apply` says of a space whose policy was never set or was set to none (`set
--none`): the gateway refuses the first (NO_RETENTION_POLICY) and applies nothing for the
second, and `show` says the same of both, so the command treats them alike."""


def has_steps(policy: RetentionPolicy | None) -> bool:
    """Whether the policy archives or deletes anything."""
    return policy is not None and (
        policy.HasField("archive_after_days") or policy.HasField("delete_after_days")
    )


def policy_line(policy: RetentionPolicy | None) -> str:
    """The policy in one line."""
    if policy is None or not has_steps(policy):
        return "no retention policy: nothing expires"
    parts = []
    if policy.HasField("archive_after_days"):
        parts.append(f"archive subtrees idle {plural(policy.archive_after_days, 'day')}")
    if policy.HasField("delete_after_days"):
        parts.append(f"delete subtrees archived {plural(policy.delete_after_days, 'day')}")
    return "; ".join(parts)


def action_line(action: RetentionAction) -> str:
    """One root's action: kind, label, short id, last activity, sessions."""
    when = action.last_active_at.ToDatetime().strftime("%Y-%m-%d")
    count = f", {plural(len(action.session_ids), 'session')}" if action.session_ids else ""
    kind = KIND_NAMES.get(action.kind, "?")
    label = one_line(action.label)
    return f"{kind:<8} {label}  {short_id(action.root_id)}  (last active {when}{count})"


def _message(message: Any) -> Any:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


async def cmd_show(args: argparse.Namespace) -> int:
    """Show the space's retention policy."""
    async with gateway(args) as client:
        policy = await client.get_retention()
    if args.json:
        write(dicts.dumps(_message(policy) if policy is not None else None))
    else:
        write(policy_line(policy))
    return 0


async def cmd_set(args: argparse.Namespace) -> int:
    """Set the space's retention policy (a step left out never happens)."""
    steps = args.archive_after is not None or args.delete_after is not None
    if not steps and not args.none:
        raise UsageError(
            "--archive-after, --delete-after or --none: give one (the policy's steps, or no policy)"
        )
    if steps and args.none:
        raise UsageError(
            "--none: not with --archive-after or --delete-after (it sets no policy: give it "
            "alone, or the steps without it)"
        )
    for flag, days in (
        ("--archive-after", args.archive_after),
        ("--delete-after", args.delete_after),
    ):
        problem = None if days is None else days_problem(days)
        if problem is not None:  # the gateway's words, also for a number no int32 carries
            raise UsageError(f"{flag}: {problem}")
    async with gateway(args) as client:
        policy = await client.put_retention(
            archive_after_days=args.archive_after, delete_after_days=args.delete_after
        )
    write(dicts.dumps(_message(policy)) if args.json else policy_line(policy))
    return 0


async def cmd_apply(args: argparse.Namespace) -> int:
    """Apply the policy now, or with --dry-run list what it would archive or delete."""
    from stello_client.exceptions import NoRetentionPolicy

    async with gateway(args) as client:
        if not has_steps(await client.get_retention()):
            raise ClientError(NO_POLICY)
        try:
            actions = await _applied(client, dry_run=args.dry_run)
        except NoRetentionPolicy:  # removed since the line above
            raise ClientError(NO_POLICY) from None
    if args.json:
        write(dicts.dumps([_message(a) for a in actions]))
        return 0
    for action in actions:
        write(action_line(action))
    verb = "would change" if args.dry_run else "changed"
    write(f"{verb} {len(actions)} subtree{'s' if len(actions) != 1 else ''}")
    return 0


async def _applied(client: AsyncClient, *, dry_run: bool) -> list[RetentionAction]:
    """ApplyRetention's actions (a dry run's every page)."""
    actions: list[RetentionAction] = []
    token = ""
    while True:
        reply = await client.apply_retention(dry_run=dry_run, page_token=token)
        actions.extend(reply.actions)
        token = reply.next_page_token
        if not (dry_run and token):
            return actions


async def cmd_pin(args: argparse.Namespace) -> int:
    """Pin (or with --off unpin) a session: retention keeps its whole subtree."""
    async with gateway(args) as client:
        session = await session_id(client, args.session)
        pinned = await client.pin_session(session, not args.off)
    write(dicts.dumps({"pinned": pinned}) if args.json else ("pinned" if pinned else "unpinned"))
    return 0


def register(commands: Commands) -> None:
    """Add retention show|set|apply|pin."""
    group = commands.group(
        "retention", "what of the space expires (its retention policy)", client=True
    )
    commands.client("show", cmd_show, "show the space's retention policy", parent=group)
    put = commands.client(
        "set",
        cmd_set,
        "set the space's retention policy",
        "Set the space's retention policy: a root's subtree idle for --archive-after\n"
        "days is archived; one whose sessions have all been archived for --delete-after\n"
        "days is deleted (everything it holds erased). A step left out never happens.",
        parent=group,
        flags={
            "policy.archive_after_days": "--archive-after",
            "policy.delete_after_days": "--delete-after",
        },
    )
    put.add_argument("--archive-after", type=whole, metavar="DAYS", help="archive after DAYS idle")
    put.add_argument(
        "--delete-after", type=whole, metavar="DAYS", help="delete DAYS after archiving"
    )
    put.add_argument("--none", action="store_true", help="no policy: nothing expires")
    apply = commands.client(
        "apply", cmd_apply, "apply the policy now (--dry-run: only list)", parent=group
    )
    apply.add_argument(
        "--dry-run", action="store_true", help="list what would be archived or deleted"
    )
    pin = commands.client(
        "pin", cmd_pin, "pin a session: retention keeps its whole subtree", parent=group
    )
    session_argument(pin)
    pin.add_argument("--off", action="store_true", help="unpin it")
