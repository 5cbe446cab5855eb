"""How the client commands show gateway replies: plain dicts for `--json`, lines of text else.

The dicts use short names (`"status": "active"`, `"role": "user"`) and plain
numbers rather than the proto3 JSON mapping, so a script can read them without
knowing the protos. Text lines take a `Style` (colour on a terminal only).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.style import PLAIN, Style, ago, one_line, plural, short_id, when

JsonDict = dict[str, Any]
PREVIEW_CHARS = 60


def status_name(value: int) -> str:
    """`SESSION_STATUS_ACTIVE` → `active`."""
    return common_pb2.SessionStatus.Name(value).removeprefix("SESSION_STATUS_").lower()


def role_name(value: int) -> str:
    """`RECORD_ROLE_USER` → `user`."""
    return common_pb2.RecordRole.Name(value).removeprefix("RECORD_ROLE_").lower()


def context_name(value: int) -> str | None:
    """`FORK_CONTEXT_INHERIT` → `inherit`; None for UNSPECIFIED."""
    if value == common_pb2.FORK_CONTEXT_UNSPECIFIED:
        return None
    return common_pb2.ForkContext.Name(value).removeprefix("FORK_CONTEXT_").lower()


def iso(stamp: Timestamp) -> str | None:
    """An ISO-8601 UTC time, or None when unset."""
    moment = when(stamp)
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def is_inherited(record: Message) -> bool:
    """Whether the record was read through a fork's lineage (the `inherited` Record field).

    Messages without the field (another record-like message) are never inherited.
    """
    field = record.DESCRIPTOR.fields_by_name.get("inherited")
    return bool(field is not None and getattr(record, field.name))


def _optional(message: Message, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def session_dict(session: common_pb2.SessionSummary) -> JsonDict:
    """A SessionSummary as a plain dict."""
    return {
        "id": session.id,
        "parent_id": _optional(session, "parent_id"),
        "label": session.label,
        "status": status_name(session.status),
        "turn_count": session.turn_count,
        "created_at": iso(session.created_at),
        "updated_at": iso(session.updated_at),
        "last_active_at": iso(session.last_active_at),
    }


def node_dict(node: common_pb2.TreeNode) -> JsonDict:
    """A TreeNode as a plain dict."""
    return {
        "id": node.id,
        "parent_id": _optional(node, "parent_id"),
        "depth": node.depth,
        "index": node.index,
        "label": node.label,
        "status": status_name(node.status),
        "turn_count": node.turn_count,
        "source_session_id": _optional(node, "source_session_id"),
    }


def digest_dict(digest: common_pb2.SessionDigest) -> JsonDict:
    """A SessionDigest as a plain dict."""
    return {
        "id": digest.id,
        "parent_id": _optional(digest, "parent_id"),
        "label": digest.label,
        "status": status_name(digest.status),
        "turn_count": digest.turn_count,
        "memory": _optional(digest, "memory"),
        "insight": _optional(digest, "insight"),
    }


def config_dict(config: common_pb2.SessionConfig) -> JsonDict:
    """A SessionConfig as a plain dict: every set field by its name (a missing key = unset),
    skills as a list of names."""
    found: JsonDict = {}
    for field in config.DESCRIPTOR.fields:
        if config.HasField(field.name):
            value = getattr(config, field.name)
            found[field.name] = list(value.names) if field.name == "skills" else value
    return found


def config_from_dict(value: JsonDict) -> common_pb2.SessionConfig:
    """The SessionConfig of `config_dict`'s form.

    Raises:
        ValueError: a key that is no SessionConfig field.
    """
    config = common_pb2.SessionConfig()
    for name, item in value.items():
        if name not in config.DESCRIPTOR.fields_by_name:
            raise ValueError(f"config has no field {name!r}")
        if name == "skills":
            config.skills.SetInParent()
            config.skills.names.extend(str(skill) for skill in item)
        else:
            setattr(config, name, str(item))
    return config


def view_dict(view: agent_pb2.SessionView) -> JsonDict:
    """GetSession's joined view as a plain dict."""
    node = view.node
    return {
        "id": node.id,
        "parent_id": _optional(node, "parent_id"),
        "label": node.label,
        "status": status_name(node.status),
        "turn_count": view.turn_count,
        "source_session_id": _optional(node, "source_session_id"),
        "children": list(node.children),
        "refs": list(node.refs),
        "created_at": iso(view.created_at),
        "updated_at": iso(view.updated_at),
        "last_active_at": iso(view.last_active_at),
        "config": config_dict(view.config) if view.HasField("config") else None,
        "system_prompt": _optional(view, "system_prompt"),
        "memory": _optional(view, "memory"),
        "insight": _optional(view, "insight"),
    }


def tool_call_dict(call: common_pb2.ToolCall) -> JsonDict:
    """A ToolCall as a plain dict."""
    return {"id": call.id, "name": call.name, "arguments_json": call.arguments_json}


def record_dict(record: common_pb2.Record) -> JsonDict:
    """A Record as a plain dict."""
    found = {
        "seq": record.seq,
        "role": role_name(record.role),
        "content": record.content,
        "tool_calls": [tool_call_dict(call) for call in record.tool_calls],
        "tool_call_id": _optional(record, "tool_call_id"),
        "created_at": iso(record.created_at),
        "metadata": json_format.MessageToDict(record.metadata),
    }
    if is_inherited(record):
        found["inherited"] = True
    return found


def turn_dict(done: agent_pb2.SendResponse) -> JsonDict:
    """The final event of a SendStream as a plain dict."""
    return {
        "assistant": record_dict(done.assistant),
        "records": [record_dict(record) for record in done.records],
        "pending_tool_calls": [tool_call_dict(call) for call in done.pending_tool_calls],
        "usage": {
            "prompt_tokens": done.usage.prompt_tokens,
            "completion_tokens": done.usage.completion_tokens,
            "total_tokens": done.usage.total_tokens,
        },
    }


def profile_dict(profile: agent_pb2.ProfileInfo) -> JsonDict:
    """A ProfileInfo as a plain dict."""
    return {
        "name": profile.name,
        "system_prompt": _optional(profile, "system_prompt"),
        "system_prompt_mode": agent_pb2.SystemPromptMode.Name(profile.system_prompt_mode)
        .removeprefix("SYSTEM_PROMPT_MODE_")
        .lower(),
        "context": context_name(profile.context),
        "prompt": _optional(profile, "prompt"),
        "skills": list(profile.skills.names) if profile.HasField("skills") else None,
        "variables": list(profile.variables),
        "compressor_prompt": _optional(profile, "compressor_prompt"),
        "consolidator_prompt": _optional(profile, "consolidator_prompt"),
    }


def dumps(value: Any) -> str:
    """One line of JSON."""
    return json.dumps(value, ensure_ascii=False)


def _status(status: int, turns: int) -> str:
    return f"[{status_name(status)}, {plural(turns, 'turn')}]"


def session_lines(session: common_pb2.SessionSummary) -> list[str]:
    """A created or changed session as `name: value` lines (the style of `stello up`)."""
    lines = [f"id: {session.id}", f"label: {session.label}"]
    if session.HasField("parent_id"):
        lines.append(f"parent_id: {session.parent_id}")
    lines += [f"status: {status_name(session.status)}", f"turns: {session.turn_count}"]
    return lines


def record_text(record: common_pb2.Record) -> str:
    """A record's text, or the tools it calls when it has none."""
    return record.content or ", ".join(f"→ {call.name}" for call in record.tool_calls)


def preview(record: common_pb2.Record | None, width: int = PREVIEW_CHARS) -> str:
    """`role: text` of a record on one line."""
    if record is None:
        return ""
    return one_line(f"{role_name(record.role)}: {record_text(record)}", width)


def tree_lines(
    nodes: Sequence[common_pb2.TreeNode],
    style: Style = PLAIN,
    previews: Mapping[str, str] | None = None,
    mark: str | None = None,
) -> list[str]:
    """The forest in pre-order as an indented tree: label, status, turns, short id, preview.

    Built with an explicit stack, so a chain thousands deep draws as well as a
    bush. `mark` (a session id) gets a `◀` after it (the chat's current session).
    """
    known = {node.id for node in nodes}
    children: dict[str, list[common_pb2.TreeNode]] = {}
    roots: list[common_pb2.TreeNode] = []
    for node in nodes:
        if node.HasField("parent_id") and node.parent_id in known:
            children.setdefault(node.parent_id, []).append(node)
        else:
            roots.append(node)
    lines: list[str] = []
    # (node, prefix of its own line, prefix its children continue with)
    stack: list[tuple[common_pb2.TreeNode, str, str]] = [(root, "", "") for root in reversed(roots)]
    while stack:
        node, prefix, carry = stack.pop()
        line = f"{prefix}{style.bold(node.label)}  {_status(node.status, node.turn_count)}"
        line += f"  {style.dim(short_id(node.id))}"
        if previews and previews.get(node.id):
            line += f"  {style.dim(previews[node.id])}"
        if mark == node.id:
            line += "  ◀"
        lines.append(line)
        kids = children.get(node.id, [])
        for position, child in reversed(list(enumerate(kids))):
            last = position == len(kids) - 1
            stack.append(
                (child, carry + ("└─ " if last else "├─ "), carry + ("   " if last else "│  "))
            )
    return lines


def digest_lines(digest: common_pb2.SessionDigest, style: Style = PLAIN) -> list[str]:
    """One digest: a summary line, then its memory and insight when set."""
    head = f"{style.dim(short_id(digest.id))}  {style.bold(digest.label)}  "
    lines = [head + _status(digest.status, digest.turn_count)]
    if digest.HasField("memory"):
        lines.append(f"    memory: {one_line(digest.memory, 200)}")
    if digest.HasField("insight"):
        lines.append(f"    insight: {one_line(digest.insight, 200)}")
    return lines


def record_lines(
    record: common_pb2.Record,
    style: Style = PLAIN,
    now: datetime | None = None,
    *,
    width: int = 0,
) -> list[str]:
    """`[seq] role · 5 min ago: content`, continuation lines indented, then its tool calls.

    Records a fork inherited say so (`· inherited`). With `width`, one line: the
    content collapsed and cut to that many characters.
    """
    head = f"[{record.seq}] {style.role(role_name(record.role))}"
    if record.HasField("tool_call_id"):
        head += f" ({record.tool_call_id})"
    head += style.dim(f" · {ago(record.created_at, now)}")
    if is_inherited(record):
        head += style.dim(" · inherited")
    if width:
        return [f"{head}: {one_line(record_text(record), width)}"]
    text_lines = record.content.splitlines() or [""]
    lines = [f"{head}: {text_lines[0]}"]
    lines += [f"    {line}" for line in text_lines[1:]]
    lines += [
        f"    → {call.name}({call.arguments_json})  {style.dim(call.id)}"
        for call in record.tool_calls
    ]
    return lines


def _block(name: str, text: str | None) -> list[str]:
    if text is None:
        return [f"{name}: (none)"]
    if not text:
        return [f"{name}: (empty)"]
    return [f"{name}:", *(f"    {line}" for line in text.splitlines())]


def _skills(config: common_pb2.SessionConfig) -> str:
    if not config.HasField("skills"):
        return "inherited"
    return ", ".join(config.skills.names) or "none"


def view_lines(view: agent_pb2.SessionView, style: Style = PLAIN) -> list[str]:
    """GetSession's joined view for people: topology, meta with relative times, config, slots."""
    node = view.node
    lines = [
        f"{style.bold(node.label)}  {style.dim(node.id)}",
        f"status: {status_name(node.status)}, {plural(view.turn_count, 'turn')}, "
        f"last active {ago(view.last_active_at)}, created {ago(view.created_at)}",
        f"parent: {node.parent_id if node.HasField('parent_id') else '(a root)'}",
    ]
    if node.HasField("source_session_id"):
        lines.append(f"forked from: {node.source_session_id}")
    if node.children:
        lines.append(f"children: {', '.join(short_id(c) for c in node.children)}")
    if node.refs:
        lines.append(f"refs: {', '.join(short_id(r) for r in node.refs)}")
    if view.HasField("config"):
        lines.append(f"skills: {_skills(view.config)}")
        for name in ("compressor_prompt", "consolidator_prompt"):
            if view.config.HasField(name):
                lines.append(
                    f"{name.replace('_', ' ')}: {one_line(getattr(view.config, name), 100)}"
                )
    else:
        lines.append("config: (none stored)")
    lines += _block("system prompt", _optional(view, "system_prompt"))
    lines += _block("memory", _optional(view, "memory"))
    lines += _block("insight", _optional(view, "insight"))
    return lines


def profile_lines(profile: agent_pb2.ProfileInfo, style: Style = PLAIN) -> list[str]:
    """One profile: its name and what a fork or root using it gets."""
    info = profile_dict(profile)
    lines = [style.bold(profile.name)]
    if info["system_prompt"] is not None:
        lines.append(f"    system prompt ({info['system_prompt_mode']}): {info['system_prompt']}")
    if info["variables"]:
        lines.append(f"    variables: {', '.join(info['variables'])}  (give each with --var)")
    if info["context"]:
        lines.append(f"    context: {info['context']}")
    if info["prompt"] is not None:
        lines.append(f"    opening message: {info['prompt']}")
    if info["skills"] is not None:
        lines.append(f"    skills: {', '.join(info['skills']) or 'none'}")
    for name in ("compressor_prompt", "consolidator_prompt"):
        if info[name] is not None:
            lines.append(f"    {name.replace('_', ' ')}: {info[name]}")
    return lines
