"""Stored records <-> what a turn works with: context records, tool calls, usage.

A turn writes records with everything decided by the gateway (role, content,
tool calls, created_at at microsecond precision, metadata), so the reply it
answers is exactly what storage then lists. Metadata keys the gateway writes:

- ``is_error`` (tool records): the tool failed; the model sees a failed call;
- ``usage`` (assistant records): the provider-reported tokens of the call that
  produced the record (STELLO-SPEC §4.5.2 item 1; the gateway's count of a
  prompt is calibrated from them, `agent_gateway.history.budget`);
- ``compressed`` (assistant records): the call's context carried a summary in
  place of older records.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2

from agent_gateway.history.context import Record
from agent_gateway.llm import Role, ToolCallSpec, Usage, parse_tool_arguments
from stello.common.v1 import common_pb2
from stello.formats.timestamps import timestamp

ROLES: dict[int, Role] = {
    common_pb2.RECORD_ROLE_SYSTEM: "system",
    common_pb2.RECORD_ROLE_USER: "user",
    common_pb2.RECORD_ROLE_ASSISTANT: "assistant",
    common_pb2.RECORD_ROLE_TOOL: "tool",
}
ROLE_VALUES: dict[Role, common_pb2.RecordRole] = {
    "system": common_pb2.RECORD_ROLE_SYSTEM,
    "user": common_pb2.RECORD_ROLE_USER,
    "assistant": common_pb2.RECORD_ROLE_ASSISTANT,
    "tool": common_pb2.RECORD_ROLE_TOOL,
}


def now_micros() -> datetime:
    """Now, at the microsecond precision PostgreSQL keeps (so replies match listings)."""
    return datetime.now(UTC)


def tool_call_proto(call: ToolCallSpec) -> common_pb2.ToolCall:
    """The wire form of a tool call (arguments as compact JSON text)."""
    return common_pb2.ToolCall(id=call.id, name=call.name, arguments_json=call.arguments_json())


def tool_call_spec(call: common_pb2.ToolCall) -> ToolCallSpec:
    """A stored tool call as the providers take it (arguments decoded)."""
    return ToolCallSpec(
        call.id, call.name, parse_tool_arguments(call.arguments_json, tool=call.name)
    )


def new_record(
    role: Role,
    content: str,
    *,
    seq: int,
    created_at: datetime,
    tool_calls: Sequence[ToolCallSpec] = (),
    tool_call_id: str | None = None,
    is_error: bool = False,
    usage: Usage | None = None,
    compressed: bool = False,
) -> common_pb2.Record:
    """A record as the turn stores it, with the seq storage will assign."""
    record = common_pb2.Record(
        seq=seq,
        role=ROLE_VALUES[role],
        content=content,
        tool_calls=[tool_call_proto(c) for c in tool_calls],
        created_at=timestamp(created_at),
    )
    if tool_call_id is not None:
        record.tool_call_id = tool_call_id
    metadata: dict[str, Any] = {}
    if is_error:
        metadata["is_error"] = True
    if usage is not None:
        metadata["usage"] = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
    if compressed:
        metadata["compressed"] = True
    if metadata:
        struct = struct_pb2.Struct()
        struct.update(metadata)
        record.metadata.CopyFrom(struct)
    return record


def is_error(record: common_pb2.Record) -> bool:
    """Whether a tool record reports a failed call."""
    if not record.HasField("metadata"):
        return False
    value = record.metadata.fields.get("is_error")
    return value is not None and value.bool_value


def context_record(record: common_pb2.Record) -> Record:
    """A stored record as context assembly reads it."""
    return Record(
        seq=record.seq,
        role=ROLES.get(record.role, "user"),
        content=record.content,
        tool_calls=tuple(tool_call_spec(c) for c in record.tool_calls),
        tool_call_id=record.tool_call_id if record.HasField("tool_call_id") else None,
        is_error=is_error(record),
    )
