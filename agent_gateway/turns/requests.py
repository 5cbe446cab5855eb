"""Send, SendStream, SubmitToolResults and SubmitToolResultsStream requests -> validated turn
input (and replies back).

Every bad field is named at once (BadRequest), before anything is read or
written and before any model is called: a content is checked against the
gateway's content limit and against the record limit storage enforces
(``STELLO_MAX_RECORD_BYTES``), as the record the turn would store it in.

The request_id's fingerprint is the deterministic encoding of the
request with request_id and the busy policy cleared (how to wait is not what
to do); SendStream is fingerprinted as the Send it equals (same fields), so
the two share one idempotency scope, and SubmitToolResultsStream as the
SubmitToolResults it equals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent_gateway.clients import RequestKey
from agent_gateway.history.records import new_record, tool_call_proto
from agent_gateway.llm import Role, TextDelta, ToolCallEvent
from agent_gateway.tools.base import client_tools
from agent_gateway.turns.state import (
    SEND_SCOPE,
    SUBMIT_SCOPE,
    SendInput,
    SubmitInput,
    ToolResultInput,
    TurnDone,
    TurnEvent,
)
from stello import validation
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Violations, cut
from stello.stored.idempotency import MAX_REQUEST_ID_CHARS, fingerprint
from stello.validation import not_one_of


def _key(
    scope: str,
    request: agent_pb2.SendRequest | agent_pb2.SubmitToolResultsRequest,
    v: Violations,
) -> RequestKey | None:
    """The request_id's key; its fingerprint leaves `busy` out (a retry under another
    policy is the same request)."""
    if not request.request_id:
        return None
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        v.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    bare = type(request).FromString(request.SerializeToString())
    bare.ClearField("busy")
    return RequestKey(scope, request.request_id, fingerprint(bare))


def _busy(value: int, v: Violations) -> int:
    """A BusyPolicy value the gateway knows."""
    if value not in common_pb2.BusyPolicy.values():
        v.add("busy", not_one_of(common_pb2.BusyPolicy, value))
    return value


@dataclass(frozen=True, slots=True)
class ContentLimits:
    """The gateway's content limit and storage's record limit (both in bytes)."""

    content_bytes: int
    record_bytes: int


# The largest seq and timestamp a stored record can carry: a record is measured at its worst.
_LAST_SEQ = 2**63 - 1
_LAST_TIME = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def record_size(role: Role, content: str, *, tool_call_id: str | None = None) -> int:
    """The encoded size of the record a turn stores `content` in (as storage measures it)."""
    record = new_record(
        role,
        content,
        seq=_LAST_SEQ,
        created_at=_LAST_TIME,
        tool_call_id=tool_call_id,
        is_error=role == "tool",
    )
    return record.ByteSize()


def _content(
    text: str,
    name: str,
    limits: ContentLimits,
    v: Violations,
    *,
    required: bool,
    tool_call_id: str | None = None,
) -> str:
    if required and not text.strip():
        v.add(name, "must not be empty")
    size = len(text.encode())
    if size > limits.content_bytes:
        v.add(name, f"is {size} bytes, over the limit of {limits.content_bytes}")
        return text
    role: Role = "user" if tool_call_id is None else "tool"
    stored = record_size(role, text, tool_call_id=tool_call_id)
    if stored > limits.record_bytes:
        v.add(
            name,
            f"makes a record of {stored} bytes, over the record limit of {limits.record_bytes}",
        )
    return text


def send_input(
    request: agent_pb2.SendRequest | agent_pb2.SendStreamRequest, *, limits: ContentLimits
) -> SendInput:
    """A Send or SendStream request, validated."""
    send = (
        request
        if isinstance(request, agent_pb2.SendRequest)
        else agent_pb2.SendRequest.FromString(request.SerializeToString())
    )
    v = Violations()
    space_id = validation.parse_uuid(send.space_id, "space_id", v)
    session_id = validation.parse_uuid(send.session_id, "session_id", v)
    content = _content(send.content, "content", limits, v, required=True)
    tools = client_tools(send.tools, v)
    key = _key(SEND_SCOPE, send, v)
    busy = _busy(send.busy, v)
    v.raise_if_any()
    memory_tools = send.memory_tools if send.HasField("memory_tools") else None
    return SendInput(space_id, session_id, content, tuple(tools), key, memory_tools, busy)


def submit_input(
    request: agent_pb2.SubmitToolResultsRequest | agent_pb2.SubmitToolResultsStreamRequest,
    *,
    limits: ContentLimits,
) -> SubmitInput:
    """A SubmitToolResults or SubmitToolResultsStream request, validated (ids non-empty and
    unique)."""
    if not isinstance(request, agent_pb2.SubmitToolResultsRequest):
        request = agent_pb2.SubmitToolResultsRequest.FromString(request.SerializeToString())
    v = Violations()
    space_id = validation.parse_uuid(request.space_id, "space_id", v)
    session_id = validation.parse_uuid(request.session_id, "session_id", v)
    if not request.results:
        v.add("results", "must answer the pending tool calls (none given)")
    seen: set[str] = set()
    results = []
    for i, result in enumerate(request.results):
        name = f"results[{i}]"
        if not result.tool_call_id:
            v.add(f"{name}.tool_call_id", "is required")
        elif result.tool_call_id in seen:
            v.add(f"{name}.tool_call_id", f"{cut(result.tool_call_id, 64)!r} is answered twice")
        seen.add(result.tool_call_id)
        _content(
            result.content,
            f"{name}.content",
            limits,
            v,
            required=False,
            tool_call_id=result.tool_call_id,
        )
        results.append(ToolResultInput(result.tool_call_id, result.content, result.is_error))
    tools = client_tools(request.tools, v)
    key = _key(SUBMIT_SCOPE, request, v)
    busy = _busy(request.busy, v)
    v.raise_if_any()
    memory_tools = request.memory_tools if request.HasField("memory_tools") else None
    return SubmitInput(space_id, session_id, tuple(results), tuple(tools), key, memory_tools, busy)


def stream_event(event: TurnEvent) -> agent_pb2.SendStreamResponse:
    """One SendStream event."""
    if isinstance(event, TurnDone):
        return agent_pb2.SendStreamResponse(done=event.response)
    return agent_pb2.SendStreamResponse(**_progress(event))


def submit_stream_event(event: TurnEvent) -> agent_pb2.SubmitToolResultsStreamResponse:
    """One SubmitToolResultsStream event (`done`: what SubmitToolResults answers)."""
    if isinstance(event, TurnDone):
        return agent_pb2.SubmitToolResultsStreamResponse(done=submit_response(event.response))
    return agent_pb2.SubmitToolResultsStreamResponse(**_progress(event))


def _progress(event: TextDelta | ToolCallEvent) -> dict[str, Any]:
    """The oneof field of a streamed event before `done` (both streams number it alike)."""
    if isinstance(event, TextDelta):
        return {"text_delta": agent_pb2.TextDelta(text=event.text)}
    return {"tool_call": tool_call_proto(event.call)}


def submit_response(response: agent_pb2.SendResponse) -> agent_pb2.SubmitToolResultsResponse:
    """A turn's reply as SubmitToolResults answers it (the same fields)."""
    return agent_pb2.SubmitToolResultsResponse.FromString(response.SerializeToString())
