"""ImportSession requests -> validated `ImportInput`, every bad field named at once.

The checks storage would make are made here first (roles, timestamps, sizes,
U+0000), so a refused import writes nothing, not even a provisional row. A
record's size is its encoding, bounded by STELLO_GATEWAY_MAX_CONTENT_BYTES (keep
it at or below storage's STELLO_STORAGE_MAX_RECORD_BYTES); slots likewise.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator

from google.protobuf import struct_pb2

from agent_gateway.imports import ImportInput
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.idempotency import MAX_REQUEST_ID_CHARS, fingerprint
from stello.timestamps import from_timestamp

ROLES = frozenset(
    (
        common_pb2.RECORD_ROLE_SYSTEM,
        common_pb2.RECORD_ROLE_USER,
        common_pb2.RECORD_ROLE_ASSISTANT,
        common_pb2.RECORD_ROLE_TOOL,
    )
)
STATUSES = {
    common_pb2.SESSION_STATUS_UNSPECIFIED: False,
    common_pb2.SESSION_STATUS_ACTIVE: False,
    common_pb2.SESSION_STATUS_ARCHIVED: True,
}
SLOTS = ("system_prompt", "memory", "insight")
MAX_STRUCT_DEPTH = 16


def import_input(request: agent_pb2.ImportSessionRequest, *, max_content_bytes: int) -> ImportInput:
    """An ImportSession request, validated."""
    v = Violations()
    space_id = validation.parse_uuid(request.space_id, "space_id", v)
    parent_id = _optional_uuid(request, "parent_id", v)
    source_id = _optional_uuid(request, "source_session_id", v)
    _text(validation.label(request.label, v), "label", v)
    if request.status not in STATUSES:
        v.add("status", f"must be a SessionStatus, got {request.status}")
    if request.HasField("config"):
        _config(request.config, v)
    slots = {name: getattr(request, name) for name in SLOTS if request.HasField(name)}
    for name, value in slots.items():
        _text(value, name, v)
        if len(value.encode()) > max_content_bytes:
            v.add(name, f"is {len(value.encode())} bytes, over the limit of {max_content_bytes}")
    until = request.inherit_until_seq if request.HasField("inherit_until_seq") else None
    if until is not None and until < 0:
        v.add("inherit_until_seq", "must not be negative")
    if until is not None and source_id is None:
        v.add("inherit_until_seq", "needs source_session_id: the session to inherit from")
    if request.turn_count < 0:
        v.add("turn_count", "must not be negative")
    records = tuple(
        _record(r, f"records[{i}]", max_content_bytes, v) for i, r in enumerate(request.records)
    )
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        v.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    v.raise_if_any()
    return ImportInput(
        space_id=space_id,
        label=request.label,
        parent_id=parent_id,
        source_id=source_id,
        archived=STATUSES[request.status],
        config=request.config if request.HasField("config") else None,
        slots=slots,
        inherit_until_seq=until,
        records=records,
        turn_count=request.turn_count,
        request_id=request.request_id,
        request_hash=fingerprint(request) if request.request_id else b"",
    )


def _optional_uuid(
    request: agent_pb2.ImportSessionRequest, name: str, v: Violations
) -> uuid.UUID | None:
    if not request.HasField(name):
        return None
    return validation.parse_uuid(getattr(request, name), name, v)


def _text(value: str, name: str, v: Violations) -> None:
    """PostgreSQL text cannot hold U+0000."""
    if "\x00" in value:
        v.add(name, "must not contain U+0000 (NUL)")


def _config(config: common_pb2.SessionConfig, v: Violations) -> None:
    for field in config.DESCRIPTOR.fields:
        if field.type == field.TYPE_STRING and config.HasField(field.name):
            _text(getattr(config, field.name), f"config.{field.name}", v)
    for i, skill in enumerate(config.skills.names):
        _text(skill, f"config.skills.names[{i}]", v)


def _record(
    record: common_pb2.Record, name: str, max_bytes: int, v: Violations
) -> common_pb2.Record:
    """The record to store (seq cleared), its problems recorded under `name`."""
    if record.role not in ROLES:
        described = "UNSPECIFIED" if record.role == 0 else f"unknown value {record.role}"
        v.add(f"{name}.role", f"must be a record role, got {described}")
    size = record.ByteSize()
    if size > max_bytes:
        v.add(name, f"is {size} bytes, over the limit of {max_bytes}")
    if record.HasField("created_at"):
        try:
            from_timestamp(record.created_at)
        except (ValueError, OverflowError):
            v.add(f"{name}.created_at", "is not a representable timestamp")
    _text(record.content, f"{name}.content", v)
    if record.HasField("tool_call_id"):
        _text(record.tool_call_id, f"{name}.tool_call_id", v)
    for i, call in enumerate(record.tool_calls):
        path = f"{name}.tool_calls[{i}]"
        if not call.name:
            v.add(f"{path}.name", "is required")
        for part in ("id", "name", "arguments_json"):
            _text(getattr(call, part), f"{path}.{part}", v)
    if record.HasField("metadata"):
        _struct(record.metadata, f"{name}.metadata", v)
    stored = common_pb2.Record()
    stored.CopyFrom(record)
    stored.ClearField("seq")
    return stored


def _struct(struct: struct_pb2.Struct, name: str, v: Violations) -> None:
    """At most MAX_STRUCT_DEPTH levels; no U+0000 in a key or string, no NaN or infinity."""
    for depth, text in _walk(struct, 1):
        if depth > MAX_STRUCT_DEPTH:
            v.add(name, f"must nest at most {MAX_STRUCT_DEPTH} levels")
            return
        if "\x00" in text:
            v.add(name, "must be JSON: no U+0000 (NUL) in text, no NaN or infinite number")
            return


def _walk(value: struct_pb2.Struct | struct_pb2.ListValue, depth: int) -> Iterator[tuple[int, str]]:
    """(depth, key or string) of everything in `value`, depth first (no recursion limit hit:
    the depth check stops the walk long before Python's)."""
    items: list[tuple[str, struct_pb2.Value]]
    if isinstance(value, struct_pb2.Struct):
        items = list(value.fields.items())
    else:
        items = [("", item) for item in value.values]
    for key, item in items:
        yield depth, key
        kind = item.WhichOneof("kind")
        if kind == "string_value":
            yield depth, item.string_value
        elif kind == "number_value" and not math.isfinite(item.number_value):
            yield depth, "\x00"  # JSON has no NaN or infinity: refused as text would be
        elif kind in ("struct_value", "list_value"):
            if depth >= MAX_STRUCT_DEPTH:
                yield depth + 1, ""
                return
            yield from _walk(getattr(item, kind), depth + 1)
