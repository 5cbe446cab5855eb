"""Gateway replies as the console's JSON: the client commands' plain dicts, a session view, events.

Records carry ``inherited``: true for the records a Fork INHERIT shows from
its source (DESIGN §4.4, "Fork by reference"); the page marks them.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_client import dicts

JsonDict = dict[str, Any]


def record_dict(record: common_pb2.Record) -> JsonDict:
    """A record as the client commands show it, with ``inherited`` always present."""
    data = dicts.record_dict(record)
    data["inherited"] = record.inherited
    return data


def _time(stamp: Timestamp) -> str | None:
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime().isoformat() + "Z"


def _optional(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def config_dict(config: common_pb2.SessionConfig) -> JsonDict:
    """A frozen config: system prompt and skills, None where unset (skills unset = inherit)."""
    return {
        "system_prompt": _optional(config, "system_prompt"),
        "skills": list(config.skills.names) if config.HasField("skills") else None,
    }


def view_dict(view: agent_pb2.SessionView) -> JsonDict:
    """GetSession's joined view: topology, meta, config and slots."""
    node = view.node
    return {
        "id": node.id,
        "parent_id": _optional(node, "parent_id"),
        "label": node.label,
        "status": dicts.status_name(node.status),
        "depth": node.depth,
        "children": list(node.children),
        "refs": list(node.refs),
        "source_session_id": _optional(node, "source_session_id"),
        "turn_count": view.turn_count,
        "created_at": _time(view.created_at),
        "updated_at": _time(view.updated_at),
        "last_active_at": _time(view.last_active_at),
        "config": config_dict(view.config) if view.HasField("config") else None,
        "system_prompt": _optional(view, "system_prompt"),
        "memory": _optional(view, "memory"),
        "insight": _optional(view, "insight"),
        "metadata": dict(sorted(view.metadata.items())),
    }


def event_dict(event: common_pb2.SpaceEvent) -> JsonDict:
    """A WatchSpace event: cursor, kind (``records_appended``, ...), the ids and seqs it names."""
    return {
        "cursor": event.cursor,
        "kind": common_pb2.EventKind.Name(event.kind).removeprefix("EVENT_KIND_").lower(),
        "session_id": event.session_id,
        "other_session_id": _optional(event, "other_session_id"),
        "first_seq": _optional(event, "first_seq"),
        "last_seq": _optional(event, "last_seq"),
        "session_ids": list(event.session_ids),
    }
