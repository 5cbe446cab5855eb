"""The pieces of an export file: records to and from JSON, forks by reference, Markdown.

`stello_cli.transfer.commands` describes the file; this module holds what it is made of.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.rules.tool_groups import kept_tool_group_indices
from stello_cli.output.style import plural
from stello_client import dicts
from stello_client.dicts import when
from stello_client.errors import ClientError, shown

FORMAT_VERSION = 1
ROLES = {
    "system": common_pb2.RECORD_ROLE_SYSTEM,
    "user": common_pb2.RECORD_ROLE_USER,
    "assistant": common_pb2.RECORD_ROLE_ASSISTANT,
    "tool": common_pb2.RECORD_ROLE_TOOL,
}


def _own(record: common_pb2.Record) -> bytes:
    """What identifies a record in any session: everything but its seq and `inherited`."""
    copy = common_pb2.Record()
    copy.CopyFrom(record)
    copy.ClearField("seq")
    copy.ClearField("inherited")
    return copy.SerializeToString(deterministic=True)


def inherited_prefix(
    child: Sequence[common_pb2.Record], source: Sequence[common_pb2.Record]
) -> tuple[int, int, int] | None:
    """How many of `child`'s first records a Fork INHERIT from `source` gave it.

    Answers (how many, the source seq of the cut, how many source records are at
    or before it), or None when the child's records do not start that way. Forks
    by reference (DESIGN §4.4) mark their inherited records, which are the
    source's through the cut verbatim (seqs kept); they are checked against the
    source (a trim on either side since makes them differ: then the child is
    exported with copies). Forks made before that hold copies, recognised by
    content (timestamps included): the source's records through the cut,
    sanitised as such a fork did, must be exactly the child's first ones.
    """
    if any(dicts.is_inherited(r) for r in child):
        count = next((i for i, r in enumerate(child) if not dicts.is_inherited(r)), len(child))
        until = child[count - 1].seq
        through = [r for r in source if r.seq <= until]
        same = [(r.seq, _own(r)) for r in through] == [(r.seq, _own(r)) for r in child[:count]]
        return (count, until, len(through)) if same else None
    count, until = _matched(child, source)
    if count == 0:
        return None
    through = [r for r in source if r.seq <= until]
    kept = _kept_by_a_copying_fork(through)
    if [_own(r) for r in kept] != [_own(r) for r in child[:count]]:
        return None
    return count, until, len(through)


@dataclass(frozen=True, slots=True)
class _Member:
    """A record as the tool-group rule reads it."""

    role: str
    tool_calls: Sequence[common_pb2.ToolCall]
    tool_call_id: str | None


def _kept_by_a_copying_fork(records: Sequence[common_pb2.Record]) -> list[common_pb2.Record]:
    """What a fork that copied records kept of them: spec §4.5.4's rule at its cut."""
    members = [
        _Member(
            dicts.role_name(r.role),
            r.tool_calls,
            r.tool_call_id if r.HasField("tool_call_id") else None,
        )
        for r in records
    ]
    return [records[i] for i in kept_tool_group_indices(members)]


def _matched(
    child: Sequence[common_pb2.Record], source: Sequence[common_pb2.Record]
) -> tuple[int, int]:
    """The child's leading records found in order among the source's, and the last one's seq."""
    wanted = [_own(r) for r in child]
    count, until = 0, 0
    for record in source:
        if count < len(wanted) and _own(record) == wanted[count]:
            count += 1
            until = record.seq
    return count, until


def record_from_dict(value: Any) -> common_pb2.Record:
    """A Record from its export form (`stello_client.dicts.record_dict`); seq is not kept.

    Raises:
        ClientError: the value is not a record of the format (the message names the field).
    """
    if not isinstance(value, dict):
        raise ClientError(f"must be an object with a role and content, got {shown(value)}")
    if value.get("role") not in ROLES:
        raise ClientError(f"role: must be one of {sorted(ROLES)}, got {shown(value.get('role'))}")
    record = common_pb2.Record(
        role=ROLES[value["role"]], content=text_field(value, "content") or ""
    )
    calls = value.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ClientError(f"tool_calls: must be a list of objects, got {shown(calls)}")
    for number, call in enumerate(calls):
        if not isinstance(call, dict):
            raise ClientError(f"tool_calls[{number}]: must be an object, got {shown(call)}")
        try:
            record.tool_calls.add(
                id=text_field(call, "id") or "",
                name=text_field(call, "name") or "",
                arguments_json=text_field(call, "arguments_json") or "",
            )
        except ClientError as exc:
            raise ClientError(f"tool_calls[{number}].{exc}") from None
    if (call_id := text_field(value, "tool_call_id")) is not None:
        record.tool_call_id = call_id
    if value.get("created_at"):
        record.created_at.CopyFrom(_timestamp(value["created_at"]))
    if value.get("metadata"):
        record.metadata.CopyFrom(struct_of(value["metadata"]))
    return record


def text_field(value: dict[str, Any], name: str) -> str | None:
    """`value[name]` when it is text; None when absent or null.

    Raises:
        ClientError: it is something else (the message starts with `name`).
    """
    found = value.get(name)
    if found is None or isinstance(found, str):
        return found
    raise ClientError(f"{name}: must be text, got {shown(found)}")


def _timestamp(text: Any) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    try:
        stamp.FromJsonString(str(text))
    except ValueError:
        raise ClientError(f"created_at: must be an RFC 3339 time, got {shown(text)}") from None
    return stamp


def struct_of(value: Any) -> struct_pb2.Struct:
    """A Struct of a JSON object."""
    if not isinstance(value, dict):
        raise ClientError(f"metadata: must be a JSON object, got {shown(value)}")
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _when(stamp: timestamp_pb2.Timestamp) -> str:
    moment = when(stamp)
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def _quoted(title: str, text: str | None) -> list[str]:
    if not text:
        return []
    return [f"**{title}**", "", *(f"> {line}" for line in text.splitlines()), ""]


def markdown(fetched: Sequence[tuple[agent_pb2.SessionView, list[common_pb2.Record]]]) -> str:
    """The sessions as a page to read: one section each (parents first), every record.

    A section's heading level follows the session's depth in the export (the top one
    `##`, its children `###`, ...), capped at `######`.
    """
    labels = {view.node.id: view.node.label for view, _ in fetched}
    depth: dict[str, int] = {}
    for view, _ in fetched:  # pre-order: a parent comes before its children
        node = view.node
        above = depth.get(node.parent_id) if node.HasField("parent_id") else None
        depth[node.id] = 0 if above is None else above + 1
    exported = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Stello export: {fetched[0][0].node.label}" if fetched else "# Stello export"]
    lines += ["", f"Exported {exported}.", ""]
    for view, records in fetched:
        node = view.node
        lines += [f"{'#' * min(2 + depth[node.id], 6)} {node.label}", ""]
        about = [f"`{node.id}`", dicts.status_name(node.status), plural(view.turn_count, "turn")]
        if node.HasField("parent_id"):
            about.append(f"under {labels.get(node.parent_id, node.parent_id)}")
        if node.HasField("source_session_id"):
            about.append(
                f"forked from {labels.get(node.source_session_id, node.source_session_id)}"
            )
        lines += [" · ".join(about), ""]
        lines += _quoted(
            "System prompt", view.system_prompt if view.HasField("system_prompt") else None
        )
        lines += _quoted("Memory", view.memory if view.HasField("memory") else None)
        lines += _quoted("Insight", view.insight if view.HasField("insight") else None)
        for record in records:
            head = f"**{dicts.role_name(record.role)}** · {_when(record.created_at)}"
            if dicts.is_inherited(record):
                head += " · inherited"
            lines += [head, ""] + ([record.content, ""] if record.content else [])
            lines += [f"→ `{c.name}({c.arguments_json})`" for c in record.tool_calls]
            if record.tool_calls:
                lines.append("")
    return "\n".join(lines).rstrip() + "\n"
