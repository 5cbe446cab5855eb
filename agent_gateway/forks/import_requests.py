"""ImportSession requests -> validated `ImportInput`, every bad field named at once.

The checks storage would make are made here first (roles, timestamps, the
shared record and slot limits STELLO_MAX_RECORD_BYTES and STELLO_MAX_SLOT_BYTES,
measured as storage measures them), so a refused import writes nothing, not
even a provisional row. What no stored text or JSON can hold (U+0000, Structs
nested too deep, NaN) is refused before this by the kernel's request check,
as for every RPC.
"""

from __future__ import annotations

import uuid

from agent_gateway.forks.imports import ImportInput
from agent_gateway.forks.inputs import SizeLimits
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.enum_words import given
from stello.errors import Violations
from stello.formats.timestamps import stored_time
from stello.rules import metadata
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS, fingerprint

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


def import_input(request: agent_pb2.ImportSessionRequest, *, limits: SizeLimits) -> ImportInput:
    """An ImportSession request, validated."""
    v = Violations()
    space_id = validation.parse_uuid(request.space_id, "space_id", v)
    parent_id = _optional_uuid(request, "parent_id", v)
    source_id = _optional_uuid(request, "source_session_id", v)
    validation.label(request.label, v)
    if request.status not in STATUSES:
        v.add("status", validation.not_one_of(common_pb2.SessionStatus, request.status))
    slots = {name: getattr(request, name) for name in SLOTS if request.HasField(name)}
    for name, value in slots.items():
        size = len(value.encode())
        if size > limits.slot_bytes:
            v.add(
                name,
                f"is {size} bytes, over the limit of {limits.slot_bytes} (STELLO_MAX_SLOT_BYTES)",
            )
    until = request.inherit_until_seq if request.HasField("inherit_until_seq") else None
    if until is not None and until < 0:
        v.add("inherit_until_seq", "must not be negative")
    if until is not None and source_id is None:
        v.add("inherit_until_seq", "needs source_session_id: the session to inherit from")
    if request.turn_count < 0:
        v.add("turn_count", "must not be negative")
    records = tuple(
        _record(r, f"records[{i}]", limits.record_bytes, v) for i, r in enumerate(request.records)
    )
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        v.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    metadata.check_pairs(dict(request.metadata), v, "metadata")
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
        metadata=dict(request.metadata),
    )


def _optional_uuid(
    request: agent_pb2.ImportSessionRequest, name: str, v: Violations
) -> uuid.UUID | None:
    if not request.HasField(name):
        return None
    return validation.parse_uuid(getattr(request, name), name, v)


def _record(
    record: common_pb2.Record, name: str, max_bytes: int, v: Violations
) -> common_pb2.Record:
    """The record to store (seq cleared), its problems recorded under `name`."""
    if record.role not in ROLES:
        v.add(f"{name}.role", validation.not_one_of(common_pb2.RecordRole, given(record.role)))
    if record.HasField("created_at"):
        try:
            stored_time(record.created_at)
        except (ValueError, OverflowError):
            v.add(f"{name}.created_at", "is not a representable timestamp")
    for i, call in enumerate(record.tool_calls):
        path = f"{name}.tool_calls[{i}]"
        validation.tool_call(call.id, call.name, call.arguments_json, path, v)
    validation.record_message_tools(record, name, v)
    stored = common_pb2.Record()
    stored.CopyFrom(record)
    stored.ClearField("seq")
    # Measured as storage measures the record it is sent (seq cleared).
    size = stored.ByteSize()
    if size > max_bytes:
        v.add(name, f"is {size} bytes, over the limit of {max_bytes} (STELLO_MAX_RECORD_BYTES)")
    return stored
