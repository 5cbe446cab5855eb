"""How the `stello` client commands show gateway replies: plain dicts for `--json`, text else.

The dicts use short names (`"status": "active"`, `"role": "user"`) and plain
numbers rather than the proto3 JSON mapping, so a script can read them without
knowing the protos.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2

JsonDict = dict[str, Any]


def status_name(value: int) -> str:
    """`SESSION_STATUS_ACTIVE` → `active`."""
    return common_pb2.SessionStatus.Name(value).removeprefix("SESSION_STATUS_").lower()


def role_name(value: int) -> str:
    """`RECORD_ROLE_USER` → `user`."""
    return common_pb2.RecordRole.Name(value).removeprefix("RECORD_ROLE_").lower()


def _time(stamp: Timestamp) -> str | None:
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime().isoformat() + "Z"


def session_dict(session: common_pb2.SessionSummary) -> JsonDict:
    """A SessionSummary as a plain dict."""
    return {
        "id": session.id,
        "parent_id": session.parent_id if session.HasField("parent_id") else None,
        "label": session.label,
        "status": status_name(session.status),
        "turn_count": session.turn_count,
        "created_at": _time(session.created_at),
        "updated_at": _time(session.updated_at),
        "last_active_at": _time(session.last_active_at),
    }


def node_dict(node: common_pb2.TreeNode) -> JsonDict:
    """A TreeNode as a plain dict."""
    return {
        "id": node.id,
        "parent_id": node.parent_id if node.HasField("parent_id") else None,
        "depth": node.depth,
        "index": node.index,
        "label": node.label,
        "status": status_name(node.status),
        "turn_count": node.turn_count,
        "source_session_id": (
            node.source_session_id if node.HasField("source_session_id") else None
        ),
    }


def digest_dict(digest: common_pb2.SessionDigest) -> JsonDict:
    """A SessionDigest as a plain dict."""
    return {
        "id": digest.id,
        "parent_id": digest.parent_id if digest.HasField("parent_id") else None,
        "label": digest.label,
        "status": status_name(digest.status),
        "turn_count": digest.turn_count,
        "memory": digest.memory if digest.HasField("memory") else None,
        "insight": digest.insight if digest.HasField("insight") else None,
    }


def tool_call_dict(call: common_pb2.ToolCall) -> JsonDict:
    """A ToolCall as a plain dict."""
    return {"id": call.id, "name": call.name, "arguments_json": call.arguments_json}


def record_dict(record: common_pb2.Record) -> JsonDict:
    """A Record as a plain dict."""
    return {
        "seq": record.seq,
        "role": role_name(record.role),
        "content": record.content,
        "tool_calls": [tool_call_dict(call) for call in record.tool_calls],
        "tool_call_id": record.tool_call_id if record.HasField("tool_call_id") else None,
        "created_at": _time(record.created_at),
        "metadata": json_format.MessageToDict(record.metadata),
    }


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


def dumps(value: Any) -> str:
    """One line of JSON."""
    return json.dumps(value, ensure_ascii=False)


def one_line(text: str, width: int = 0) -> str:
    """`text` with its whitespace runs collapsed; cut to `width` characters when given."""
    flat = " ".join(text.split())
    if width and len(flat) > width:
        return flat[: width - 1] + "…"
    return flat


def _turns(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"


def session_lines(session: common_pb2.SessionSummary) -> list[str]:
    """A created session as `name: value` lines (the style of `stello up`)."""
    lines = [f"id: {session.id}", f"label: {session.label}"]
    if session.HasField("parent_id"):
        lines.append(f"parent_id: {session.parent_id}")
    lines += [f"status: {status_name(session.status)}", f"turns: {session.turn_count}"]
    return lines


def tree_lines(nodes: Sequence[common_pb2.TreeNode]) -> list[str]:
    """The forest in pre-order as an indented tree: label, status, turns and id per line.

    Built with an explicit stack, so a chain thousands deep draws as well as a bush.
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
        lines.append(
            f"{prefix}{node.label}  [{status_name(node.status)}, {_turns(node.turn_count)}]"
            f"  {node.id}"
        )
        kids = children.get(node.id, [])
        for position, child in reversed(list(enumerate(kids))):
            last = position == len(kids) - 1
            stack.append(
                (child, carry + ("└─ " if last else "├─ "), carry + ("   " if last else "│  "))
            )
    return lines


def digest_lines(digest: common_pb2.SessionDigest) -> list[str]:
    """One digest: a summary line, then its memory and insight when set."""
    lines = [
        f"{digest.id}  {digest.label}  [{status_name(digest.status)}, {_turns(digest.turn_count)}]"
    ]
    if digest.HasField("memory"):
        lines.append(f"    memory: {one_line(digest.memory, 200)}")
    if digest.HasField("insight"):
        lines.append(f"    insight: {one_line(digest.insight, 200)}")
    return lines


def record_lines(record: common_pb2.Record) -> list[str]:
    """One record: `[seq] role: content`, continuation lines indented, then its tool calls."""
    head = f"[{record.seq}] {role_name(record.role)}"
    if record.HasField("tool_call_id"):
        head += f" ({record.tool_call_id})"
    text_lines = record.content.splitlines() or [""]
    lines = [f"{head}: {text_lines[0]}"]
    lines += [f"    {line}" for line in text_lines[1:]]
    lines += [f"    → {call.name}({call.arguments_json})  {call.id}" for call in record.tool_calls]
    return lines


def rpc_error_line(error: grpc.aio.AioRpcError, target: str = "") -> str:
    """A failed call as one line: status code and details (with a hint when unreachable)."""
    code = error.code()
    name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    details = one_line(error.details() or "")
    line = f"{name}: {details}" if details else name
    if code == grpc.StatusCode.UNAVAILABLE and target:
        line += f" ({_unreachable_hint(details, target)})"
    return line


def _unreachable_hint(details: str, target: str) -> str:
    """What to check when `target` did not answer, from how the connection failed."""
    lowered = details.lower()
    if "handshake" in lowered or "ssl" in lowered or "certificate" in lowered:
        return (
            f"the TLS handshake with {target} failed: check --ca-file, --server-name, "
            "and --cert-file/--key-file if the server wants a client certificate"
        )
    if "socket closed" in lowered:
        return (
            f"{target} closed the connection: if it serves TLS, pass --ca-file "
            "(and --cert-file/--key-file for mutual TLS)"
        )
    return f"is a gateway listening at {target}? start one with `stello up`"
