"""Retention's requests and replies on the wire (tree.proto): policies, actions, page tokens."""

from __future__ import annotations

from datetime import UTC, datetime, time

from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.formats.timestamps import set_timestamp
from tree_service.encoding import decode_page_token, encode_page_token
from tree_service.retention.repository import Cursor, Policy
from tree_service.retention.service import Action, Applied, validate_days

POLICY_REQUIRED = "is required (an empty RetentionPolicy, neither step set, expires nothing)"
"""PutRetention's `policy` left unset (PutConfig's `config` likewise): a client that forgot
it must not have a policy it never gave stored in its place."""

PAGE_TOKEN_DRY_RUN_ONLY = (
    "is a dry run's (set dry_run, or leave page_token empty: a run that changes "
    "things goes on from where the space's sweep stands)"
)
"""ApplyRetention's `page_token` without `dry_run`: applied from the first root, the run
would archive and delete what the page the client meant to start at left out."""

KINDS = {
    "archive": common_pb2.RetentionAction.KIND_ARCHIVE,
    "delete": common_pb2.RetentionAction.KIND_DELETE,
}


def policy_from_proto(message: common_pb2.RetentionPolicy, v: Violations) -> Policy:
    """A policy with its days checked (each violation named under `policy.`)."""
    archive = message.archive_after_days if message.HasField("archive_after_days") else None
    delete = message.delete_after_days if message.HasField("delete_after_days") else None
    for value, name in ((archive, "archive_after_days"), (delete, "delete_after_days")):
        why = validate_days(value, name)
        if why is not None:
            v.add(f"policy.{name}", why)
    return Policy(archive, delete)


def policy_to_proto(policy: Policy) -> common_pb2.RetentionPolicy:
    """The wire form of a policy (unset: that step never happens)."""
    message = common_pb2.RetentionPolicy()
    if policy.archive_after_days is not None:
        message.archive_after_days = policy.archive_after_days
    if policy.delete_after_days is not None:
        message.delete_after_days = policy.delete_after_days
    return message


def page_cursor(token: str) -> Cursor | None:
    """A dry run's page token as a cursor ("" = from the first root)."""
    if not token:
        return None
    created_at, root_id = decode_page_token(token)
    return Cursor(created_at, root_id)


def page_token(cursor: Cursor | None) -> str:
    """The token of a dry run's next page ("" = none)."""
    return "" if cursor is None else encode_page_token(cursor.created_at, cursor.id)


def action_to_proto(action: Action) -> common_pb2.RetentionAction:
    """One root's action on the wire."""
    message = common_pb2.RetentionAction(
        root_id=str(action.root.id),
        kind=KINDS[action.kind],
        label=action.root.label,
        session_ids=[str(i) for i in action.session_ids],
    )
    # The day of the newest turn, as its midnight UTC (the judgement's precision).
    day = datetime.combine(action.root.last_active, time(), UTC)
    set_timestamp(message.last_active_at, day)
    return message


def actions_to_proto(applied: Applied) -> list[common_pb2.RetentionAction]:
    """Every action of a run, in root order."""
    return [action_to_proto(action) for action in applied.actions]
