"""Proto <-> domain conversion for the tree servicer, with request validation.

Parsing functions record every problem in a `Violations` collector so one
INVALID_ARGUMENT names all the bad fields.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from google.protobuf import unknown_fields
from google.protobuf.message import Message

from stello import validation
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.formats.timestamps import from_timestamp, set_timestamp
from stello.rules import metadata
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS
from stello.tree.v1 import tree_pb2
from stello.validation import not_one_of, parse_uuid, space_uuid
from tree_service.models import (
    MetadataChange,
    Node,
    SessionConfig,
    SessionFilter,
    Status,
    Summary,
    SweptSession,
    TreeEntry,
    TreeRow,
)

_STATUS_TO_PROTO: dict[Status, common_pb2.SessionStatus] = {
    "active": common_pb2.SESSION_STATUS_ACTIVE,
    "archived": common_pb2.SESSION_STATUS_ARCHIVED,
}
_STATUS_FROM_PROTO: dict[int, Status] = {v: k for k, v in _STATUS_TO_PROTO.items()}


def optional_uuid(
    message: Message, field: str, violations: Violations, name: str | None = None
) -> uuid.UUID | None:
    """An optional UUID field: None when unset, a violation when set but malformed."""
    if not message.HasField(field):
        return None
    return parse_uuid(getattr(message, field), name or field, violations)


def status_filter(value: int, violations: Violations, name: str = "status") -> Status | None:
    """A status filter: UNSPECIFIED = None (no filter); unknown numbers are violations."""
    if value == common_pb2.SESSION_STATUS_UNSPECIFIED:
        return None
    status = _STATUS_FROM_PROTO.get(value)
    if status is None:
        violations.add(name, not_one_of(common_pb2.SessionStatus, value))
    return status


def request_id(value: str, violations: Violations, name: str = "request_id") -> str:
    """An idempotency key: empty = none, at most MAX_REQUEST_ID_CHARS characters."""
    if len(value) > MAX_REQUEST_ID_CHARS:
        violations.add(name, f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return value


def config_from_proto(
    config: common_pb2.SessionConfig,
    violations: Violations,
    max_text_bytes: int,
    name: str = "config",
) -> SessionConfig:
    """A config with the presence of each field kept; fields we do not know are violations,
    and so are a prompt over `max_text_bytes` (the slot limit: storage would refuse it as the
    session's system prompt, and a fork from it would fail on a field its caller never set)
    and a skill name no skill can have (the gateway's rule)."""
    for message, path in ((config, name), (config.skills, f"{name}.skills")):
        unknown = unknown_fields.UnknownFieldSet(message)
        numbers = sorted({unknown[i].field_number for i in range(len(unknown))})
        if numbers:
            violations.add(path, f"has unknown fields {numbers}; only the documented ones")
    for field in ("system_prompt", "compressor_prompt", "consolidator_prompt"):
        validation.utf8_within(
            getattr(config, field), max_text_bytes, f"{name}.{field}", violations
        )
    for index, skill in enumerate(config.skills.names):
        validation.skill_name(skill, f"{name}.skills.names[{index}]", violations)
    return SessionConfig(
        system_prompt=config.system_prompt if config.HasField("system_prompt") else None,
        skills=tuple(config.skills.names) if config.HasField("skills") else None,
        compressor_prompt=(
            config.compressor_prompt if config.HasField("compressor_prompt") else None
        ),
        consolidator_prompt=(
            config.consolidator_prompt if config.HasField("consolidator_prompt") else None
        ),
    )


def config_to_proto(config: SessionConfig) -> common_pb2.SessionConfig:
    """The proto of a stored config, unset fields left unset."""
    message = common_pb2.SessionConfig()
    if config.system_prompt is not None:
        message.system_prompt = config.system_prompt
    if config.skills is not None:
        message.skills.SetInParent()
        message.skills.names.extend(config.skills)
    if config.compressor_prompt is not None:
        message.compressor_prompt = config.compressor_prompt
    if config.consolidator_prompt is not None:
        message.consolidator_prompt = config.consolidator_prompt
    return message


def node_to_proto(node: Node) -> common_pb2.TopologyNode:
    """A TopologyNode; parent and source left unset when absent."""
    return common_pb2.TopologyNode(
        id=str(node.id),
        parent_id=None if node.parent_id is None else str(node.parent_id),
        children=[str(c) for c in node.children],
        refs=[str(r) for r in node.refs],
        depth=node.depth,
        index=node.index,
        label=node.label,
        source_session_id=(None if node.source_session_id is None else str(node.source_session_id)),
        status=_STATUS_TO_PROTO[node.status],
    )


def nodes_to_proto(nodes: list[Node]) -> list[common_pb2.TopologyNode]:
    """TopologyNodes in the given order."""
    return [node_to_proto(n) for n in nodes]


def entries_to_proto(entries: list[TreeEntry]) -> list[common_pb2.TreeNode]:
    """Light TreeNodes in the given (pre-)order."""
    status = _STATUS_TO_PROTO
    tree_node = common_pb2.TreeNode
    return [
        tree_node(
            id=str(e.id),
            parent_id=None if e.parent_id is None else str(e.parent_id),
            depth=e.depth,
            index=e.index,
            label=e.label,
            status=status[e.status],
            turn_count=e.turn_count,
            source_session_id=None if e.source_session_id is None else str(e.source_session_id),
        )
        for e in entries
    ]


def _varint(value: int) -> bytes:
    """The protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while value > 127:
        out.append(value & 127 | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


# GetTree's reply is written as text, one character per byte (U+0000-U+00FF), and
# encoded once as latin-1 (`tree_reply`): ids and ASCII labels go in as they came.
_LOOKED_UP = 16_384
"""Ints below this (two varint bytes or less: depth, index, turn_count, lengths) are looked up."""
_VARINT_TEXT = tuple(_varint(i).decode("latin-1") for i in range(_LOOKED_UP))


def _int_field(tag: str) -> tuple[str, ...]:
    """A proto3 int32 field's text for 0..16,383: its tag and varint, empty for the default 0."""
    return ("", *(tag + varint for varint in _VARINT_TEXT[1:]))


_DEPTH, _INDEX, _LABEL, _TURNS = (_int_field(tag) for tag in ("\x18", "\x20", "\x2a", "\x38"))
"""TreeNode.depth (field 3), index (4), turn_count (7); and label's (5) tag and length."""
_STATUS_FIELD = {"active": "\x30\x01", "archived": "\x30\x02"}
"""TreeNode.status (field 6, varint) of each status."""


def tree_reply(rows: Sequence[TreeRow]) -> bytes:
    """A GetTreeResponse already serialized: `rows` (in pre-order) as its `nodes`.

    GetTree answers up to 200,000 nodes, and building a TreeNode message per row
    then serializing them cost more than reading the rows (profiled: about half a
    10,000-node call's CPU). The fields are written here as protobuf does, in
    field order, defaults left out — the same bytes (tests compare them with
    protobuf's); the server sends them as they are (`stello.serving.server.raw_replies`).
    Each node is one f-string of text whose characters are its bytes (U+0000-U+00FF:
    ids and ASCII labels as they are, another label as its UTF-8 bytes), the
    whole reply one latin-1 encoding (a third of the CPU of joining bytes per field).
    """
    varints, depths, indexes, labels, turn_counts = _VARINT_TEXT, _DEPTH, _INDEX, _LABEL, _TURNS
    statuses = _STATUS_FIELD
    out: list[str] = []
    append = out.append
    for row in rows:
        node_id, parent, depth, index, label, status, turns, source, _ = row
        if not label.isascii():
            label = label.encode().decode("latin-1")
        try:
            tail = (
                f"{depths[depth]}{indexes[index]}{labels[len(label)]}{label}"
                f"{statuses[status]}{turn_counts[turns]}"
            )
            # 1: id and 2: parent_id (36 characters: "$"), 8: source_session_id.
            if parent is None:
                body = f"\n${node_id}{tail}"
            else:
                body = f"\n${node_id}\x12${parent}{tail}"
            if source is not None:
                body = f"{body}B${source}"
            append(f"\n{varints[len(body)]}{body}")  # GetTreeResponse.nodes
        except IndexError:  # an int past the tables (a 16,384-deep chain, say)
            append(
                _node_text(node_id, parent, depth, index, label, statuses[status], turns, source)
            )
    return "".join(out).encode("latin-1")


def _node_text(
    node_id: str,
    parent: str | None,
    depth: int,
    index: int,
    label: str,
    status: str,
    turns: int,
    source: str | None,
) -> str:
    """`tree_reply`'s text of one node, any int (the label's already one character a byte)."""

    def varint(value: int) -> str:
        return _varint(value).decode("latin-1")

    def number(tag: str, value: int) -> str:
        return tag + varint(value) if value else ""

    def text(tag: str, value: str | None) -> str:
        return "" if value is None else tag + varint(len(value)) + value

    body = "".join(
        (
            text("\n", node_id),
            text("\x12", parent),
            number("\x18", depth),
            number("\x20", index),
            text("\x2a", label or None),
            status,
            number("\x38", turns),
            text("B", source),
        )
    )
    return "\n" + varint(len(body)) + body


def add_summaries(target: Any, summaries: Sequence[Summary]) -> None:
    """Append SessionSummaries (three timestamps each) to a repeated field, built in place.

    Filling each message where it lives saves building it apart and copying it
    in: a page of a thousand shows it.
    """
    status = _STATUS_TO_PROTO
    for summary in summaries:
        message = target.add(
            id=str(summary.id),
            label=summary.label,
            status=status[summary.status],
            turn_count=summary.turn_count,
            pinned=summary.pinned,
        )
        if summary.parent_id is not None:
            message.parent_id = str(summary.parent_id)
        set_timestamp(message.created_at, summary.created_at)
        set_timestamp(message.updated_at, summary.updated_at)
        set_timestamp(message.last_active_at, summary.last_active_at)
        if summary.metadata:
            message.metadata.update(summary.metadata)


def swept_ids(removed: list[SweptSession]) -> list[str]:
    """The ids of swept sessions as they travel."""
    return [str(s.id) for s in removed]


def filter_from_proto(message: common_pb2.SessionFilter, violations: Violations) -> SessionFilter:
    """ListAll's `filter`, each bad field named `filter.<field>`."""
    pairs = dict(message.metadata)
    metadata.check_pairs(pairs, violations, "filter.metadata")
    prefix = message.label_prefix if message.HasField("label_prefix") else None
    if prefix is not None:
        validation.label(prefix, violations, "filter.label_prefix")
    parent_id = optional_uuid(message, "parent_id", violations, "filter.parent_id")
    if parent_id is not None and message.roots_only:
        violations.add("filter.roots_only", "cannot be combined with filter.parent_id")
    return SessionFilter(
        metadata=tuple(sorted(pairs.items())),
        label_prefix=prefix,
        parent_id=parent_id,
        root_id=optional_uuid(message, "root_id", violations, "filter.root_id"),
        roots_only=message.roots_only,
        created_after=_time(message, "created_after", violations),
        created_before=_time(message, "created_before", violations),
        updated_after=_time(message, "updated_after", violations),
        updated_before=_time(message, "updated_before", violations),
    )


def _time(message: common_pb2.SessionFilter, name: str, violations: Violations) -> datetime | None:
    if not message.HasField(name):
        return None
    try:
        return from_timestamp(getattr(message, name))
    except (ValueError, OverflowError):
        violations.add(f"filter.{name}", "is not a representable time")
        return None


def metadata_change(
    request: tree_pb2.UpdateSessionMetadataRequest, violations: Violations
) -> MetadataChange:
    """UpdateSessionMetadata's change: `set` and `remove` checked key by key."""
    written = dict(request.set)
    metadata.check_pairs(written, violations, "set")
    metadata.check_keys(request.remove, violations, "remove")
    for index, key in enumerate(request.remove):
        if key in written:
            violations.add(f"remove[{index}]", f"key {key!r} is also in set")
    return MetadataChange(
        space_id=space_uuid(request.space_id, violations),
        session_id=parse_uuid(request.session_id, "session_id", violations),
        set=written,
        remove=tuple(dict.fromkeys(request.remove)),
    )
