"""Gateway replies as plain dicts: the CLI's `--json` and the console's API speak them.

The dicts use short names (`"status": "active"`, `"role": "user"`) and plain
numbers rather than the proto3 JSON mapping, so a script can read them without
knowing the protos.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
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


def optional(message: Message, name: str) -> Any:
    """The field `name` of `message`, or None when unset."""
    return getattr(message, name) if message.HasField(name) else None


def session_dict(session: common_pb2.SessionSummary) -> JsonDict:
    """A SessionSummary as a plain dict."""
    return {
        "id": session.id,
        "parent_id": optional(session, "parent_id"),
        "label": session.label,
        "status": status_name(session.status),
        "turn_count": session.turn_count,
        "created_at": iso(session.created_at),
        "updated_at": iso(session.updated_at),
        "last_active_at": iso(session.last_active_at),
        "pinned": session.pinned,
    }


def node_dict(node: common_pb2.TreeNode) -> JsonDict:
    """A TreeNode as a plain dict."""
    return {
        "id": node.id,
        "parent_id": optional(node, "parent_id"),
        "depth": node.depth,
        "index": node.index,
        "label": node.label,
        "status": status_name(node.status),
        "turn_count": node.turn_count,
        "source_session_id": optional(node, "source_session_id"),
    }


def digest_dict(digest: common_pb2.SessionDigest) -> JsonDict:
    """A SessionDigest as a plain dict."""
    return {
        "id": digest.id,
        "parent_id": optional(digest, "parent_id"),
        "label": digest.label,
        "status": status_name(digest.status),
        "turn_count": digest.turn_count,
        "memory": optional(digest, "memory"),
        "insight": optional(digest, "insight"),
        "pinned": digest.pinned,
        "metadata": dict(sorted(digest.metadata.items())),
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
        "parent_id": optional(node, "parent_id"),
        "label": node.label,
        "status": status_name(node.status),
        "turn_count": view.turn_count,
        "source_session_id": optional(node, "source_session_id"),
        "children": list(node.children),
        "refs": list(node.refs),
        "created_at": iso(view.created_at),
        "updated_at": iso(view.updated_at),
        "last_active_at": iso(view.last_active_at),
        "config": config_dict(view.config) if view.HasField("config") else None,
        "system_prompt": optional(view, "system_prompt"),
        "memory": optional(view, "memory"),
        "insight": optional(view, "insight"),
        "pinned": view.pinned,
        "metadata": dict(sorted(view.metadata.items())),
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
        "tool_call_id": optional(record, "tool_call_id"),
        "created_at": iso(record.created_at),
        "metadata": json_format.MessageToDict(record.metadata),
    }
    if is_inherited(record):
        found["inherited"] = True
    return found


def hit_dict(hit: common_pb2.RecordHit) -> JsonDict:
    """A SearchRecords hit as a plain dict (matches: [start, end) in code points)."""
    return {
        "session_id": hit.session_id,
        "label": hit.label,
        "seq": hit.seq,
        "role": role_name(hit.role),
        "created_at": iso(hit.created_at),
        "snippet": hit.snippet,
        "snippet_offset": hit.snippet_offset,
        "matches": [[m.start, m.end] for m in hit.matches],
        "reader_count": hit.reader_count,
        "rank": hit.rank,
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


def profile_dict(profile: agent_pb2.ProfileInfo) -> JsonDict:
    """A ProfileInfo as a plain dict."""
    return {
        "name": profile.name,
        "system_prompt": optional(profile, "system_prompt"),
        "system_prompt_mode": agent_pb2.SystemPromptMode.Name(profile.system_prompt_mode)
        .removeprefix("SYSTEM_PROMPT_MODE_")
        .lower(),
        "context": context_name(profile.context),
        "prompt": optional(profile, "prompt"),
        "skills": list(profile.skills.names) if profile.HasField("skills") else None,
        "variables": list(profile.variables),
        "compressor_prompt": optional(profile, "compressor_prompt"),
        "consolidator_prompt": optional(profile, "consolidator_prompt"),
    }


def dumps(value: Any) -> str:
    """One line of JSON."""
    return json.dumps(value, ensure_ascii=False)


def when(stamp: Timestamp) -> datetime | None:
    """The aware datetime of a Timestamp; None when it is unset."""
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime(tzinfo=UTC)
