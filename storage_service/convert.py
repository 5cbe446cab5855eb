"""Domain values to protos and back, and the reply codecs idempotency keys store."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf import json_format

from stello.common.v1 import common_pb2
from stello.formats.timestamps import from_timestamp, set_timestamp, timestamp
from stello.storage.v1 import storage_pb2
from storage_service.events.repository import StoredEvent
from storage_service.models import (
    CompressionCache,
    Role,
    SessionMeta,
    SessionSlots,
    SharedMemoryEntry,
    Status,
    StoredRecord,
    ToolCall,
    TurnStart,
)
from storage_service.search.service import Hit
from storage_service.transact.operations import OperationResult

ROLE_TO_PROTO: dict[Role, common_pb2.RecordRole] = {
    "system": common_pb2.RECORD_ROLE_SYSTEM,
    "user": common_pb2.RECORD_ROLE_USER,
    "assistant": common_pb2.RECORD_ROLE_ASSISTANT,
    "tool": common_pb2.RECORD_ROLE_TOOL,
}
ROLE_FROM_PROTO: dict[int, Role] = {int(v): k for k, v in ROLE_TO_PROTO.items()}

STATUS_TO_PROTO: dict[Status, common_pb2.SessionStatus] = {
    "active": common_pb2.SESSION_STATUS_ACTIVE,
    "archived": common_pb2.SESSION_STATUS_ARCHIVED,
}
STATUS_FROM_PROTO: dict[int, Status] = {int(v): k for k, v in STATUS_TO_PROTO.items()}


def struct_to_dict(struct: Any) -> dict[str, Any]:
    """A google.protobuf.Struct as a JSON-ready dict."""
    value: dict[str, Any] = json_format.MessageToDict(struct)
    return value


def fill_meta(message: common_pb2.SessionMeta, meta: SessionMeta) -> None:
    """Write a session's meta into `message` in place."""
    message.id = str(meta.id)
    message.label = meta.label
    message.status = STATUS_TO_PROTO[meta.status]
    message.turn_count = meta.turn_count
    set_timestamp(message.created_at, meta.created_at)
    set_timestamp(message.updated_at, meta.updated_at)
    set_timestamp(message.last_active_at, meta.last_active_at)
    message.pinned = meta.pinned


def meta_to_proto(meta: SessionMeta) -> common_pb2.SessionMeta:
    """The wire form of a session's meta."""
    message = common_pb2.SessionMeta()
    fill_meta(message, meta)
    return message


def meta_from_proto(meta: common_pb2.SessionMeta) -> SessionMeta:
    """A stored meta back from its wire form (replayed replies)."""
    return SessionMeta(
        id=uuid.UUID(meta.id),
        label=meta.label,
        status=STATUS_FROM_PROTO[meta.status],
        turn_count=meta.turn_count,
        created_at=from_timestamp(meta.created_at),
        updated_at=from_timestamp(meta.updated_at),
        last_active_at=from_timestamp(meta.last_active_at),
        pinned=meta.pinned,
    )


def fill_record(message: common_pb2.Record, record: StoredRecord) -> None:
    """Write a stored record into `message` in place; unset optional fields stay unset."""
    message.seq = record.seq
    message.role = ROLE_TO_PROTO[record.role]
    message.content = record.content
    for call in record.tool_calls:
        message.tool_calls.add(id=call.id, name=call.name, arguments_json=call.arguments_json)
    if record.tool_call_id is not None:
        message.tool_call_id = record.tool_call_id
    set_timestamp(message.created_at, record.created_at)
    if record.metadata is not None:
        message.metadata.SetInParent()
        message.metadata.update(record.metadata)
    if record.inherited:
        message.inherited = True


def add_records(container: Any, records: Iterable[StoredRecord]) -> None:
    """Append the wire form of `records` to a repeated Record field, built in place."""
    add = container.add
    for record in records:
        fill_record(add(), record)


def record_to_proto(record: StoredRecord) -> common_pb2.Record:
    """The wire form of a stored record."""
    message = common_pb2.Record()
    fill_record(message, record)
    return message


def record_from_proto(record: common_pb2.Record) -> StoredRecord:
    """A stored record back from its wire form (replayed replies)."""
    return StoredRecord(
        seq=record.seq,
        role=ROLE_FROM_PROTO[record.role],
        content=record.content,
        tool_calls=tuple(ToolCall(c.id, c.name, c.arguments_json) for c in record.tool_calls),
        tool_call_id=record.tool_call_id if record.HasField("tool_call_id") else None,
        created_at=from_timestamp(record.created_at),
        metadata=struct_to_dict(record.metadata) if record.HasField("metadata") else None,
    )


def add_event(container: Any, event: StoredEvent) -> None:
    """Append `event` as a SpaceEvent (its cursor: the position as decimal text)."""
    message = container.add(
        cursor=str(event.position),
        kind=common_pb2.EventKind.Value(f"EVENT_KIND_{event.kind.upper()}"),
        session_id=str(event.session_id) if event.session_id is not None else "",
        session_ids=[str(i) for i in event.session_ids],
    )
    if event.other_id is not None:
        message.other_session_id = str(event.other_id)
    if event.first_seq is not None:
        message.first_seq = event.first_seq
    if event.last_seq is not None:
        message.last_seq = event.last_seq
    if event.entry_id is not None:
        message.entry_id = str(event.entry_id)
    set_timestamp(message.committed_at, event.created_at)


def entry_to_proto(entry: SharedMemoryEntry) -> common_pb2.SharedMemoryEntry:
    """The wire form of a shared memory entry (body unset when not read)."""
    message = common_pb2.SharedMemoryEntry(slug=entry.slug, summary=entry.summary)
    if entry.entry_id is not None:
        message.entry_id = str(entry.entry_id)
    if entry.body is not None:
        message.body = entry.body
    set_timestamp(message.created_at, entry.created_at)
    set_timestamp(message.updated_at, entry.updated_at)
    return message


def slots_to_proto(slots: SessionSlots) -> storage_pb2.SessionSlots:
    """The wire form of a session's slots; None stays unset, "" is sent as set."""
    message = storage_pb2.SessionSlots(session_id=str(slots.session_id))
    if slots.system_prompt is not None:
        message.system_prompt = slots.system_prompt
    if slots.memory is not None:
        message.memory = slots.memory
    if slots.insight is not None:
        message.insight = slots.insight
    return message


def cache_to_proto(cache: CompressionCache) -> storage_pb2.CompressionCache:
    """The wire form of a compression cache."""
    return storage_pb2.CompressionCache(
        summary=cache.summary, covered_until_seq=cache.covered_until_seq, lossy=cache.lossy
    )


def result_to_proto(result: OperationResult) -> storage_pb2.OperationResult:
    """The wire form of one Transact result, `kind` set as its operation's."""
    message = storage_pb2.OperationResult()
    branch = getattr(message, result.kind)
    branch.SetInParent()
    if result.kind == "append_records":
        add_records(branch.records, result.records)
    elif result.kind in ("put_session", "bump_turn") and result.session is not None:
        fill_meta(branch.session, result.session)
    elif result.kind == "trim_records":
        branch.removed_count = result.removed_count
    elif result.kind == "release_turn":
        branch.released = result.released
    elif result.kind == "inherit_records":
        branch.until_seq = result.until_seq
    elif result.kind == "copy_system_prompt":
        branch.copied = result.copied
    elif result.kind == "update_job":
        branch.updated = result.updated
    return message


def result_from_proto(message: storage_pb2.OperationResult) -> OperationResult:
    """One Transact result back from its wire form (replayed replies)."""
    kind = message.WhichOneof("kind")
    assert kind is not None, "every stored result has its kind"
    branch = getattr(message, kind)
    if kind == "append_records":
        return OperationResult(kind, records=tuple(record_from_proto(r) for r in branch.records))
    if kind in ("put_session", "bump_turn"):
        return OperationResult(kind, session=meta_from_proto(branch.session))
    if kind == "trim_records":
        return OperationResult(kind, removed_count=branch.removed_count)
    if kind == "release_turn":
        return OperationResult(kind, released=branch.released)
    if kind == "inherit_records":
        return OperationResult(kind, until_seq=branch.until_seq)
    if kind == "copy_system_prompt":
        return OperationResult(kind, copied=branch.copied)
    if kind == "update_job":
        return OperationResult(kind, updated=branch.updated)
    return OperationResult(kind)


class RecordsCodec:
    """AppendRecords' reply as the bytes of an AppendRecordsResponse."""

    def encode(self, value: tuple[StoredRecord, ...]) -> bytes:
        """Serialize the stored records."""
        reply = storage_pb2.AppendRecordsResponse()
        add_records(reply.records, value)
        return reply.SerializeToString()

    def decode(self, data: bytes) -> tuple[StoredRecord, ...]:
        """The records a first call answered."""
        reply = storage_pb2.AppendRecordsResponse.FromString(data)
        return tuple(record_from_proto(r) for r in reply.records)


class ResultsCodec:
    """Transact's reply as the bytes of a TransactResponse."""

    def encode(self, value: tuple[OperationResult, ...]) -> bytes:
        """Serialize the operation results."""
        reply = storage_pb2.TransactResponse(results=[result_to_proto(r) for r in value])
        return reply.SerializeToString()

    def decode(self, data: bytes) -> tuple[OperationResult, ...]:
        """The results a first call answered."""
        reply = storage_pb2.TransactResponse.FromString(data)
        return tuple(result_from_proto(r) for r in reply.results)


@dataclass(frozen=True, slots=True)
class ProtoCodecs:
    """The reply codecs the service stores idempotent replies with."""

    records: RecordsCodec
    results: ResultsCodec

    @classmethod
    def create(cls) -> ProtoCodecs:
        """Both codecs."""
        return cls(RecordsCodec(), ResultsCodec())


def turn_start_to_proto(start: TurnStart) -> storage_pb2.BeginTurnResponse:
    """The wire form of BeginTurn's answer."""
    reply = storage_pb2.BeginTurnResponse()
    if start.lease is not None:
        reply.token = str(start.lease.token)
        set_timestamp(reply.expires_at, start.lease.expires_at)
    if start.remembered is not None:
        reply.remembered.request_hash = start.remembered.request_hash
        reply.remembered.response = start.remembered.response
    if start.queued is not None:
        reply.queued.ahead = start.queued.ahead
        set_timestamp(reply.queued.expires_at, start.queued.expires_at)
    if start.interrupted is not None:
        reply.interrupted_token = str(start.interrupted)
    state = start.state
    if state is not None:
        turn = reply.turn
        fill_meta(turn.session, state.session)
        turn.last_seq = state.last_seq
        if state.system_prompt is not None:
            turn.system_prompt = state.system_prompt
        if state.insight is not None:
            turn.insight = state.insight
        if state.cache is not None:
            turn.cache.CopyFrom(cache_to_proto(state.cache))
        add_records(turn.records, state.records)
        turn.tail_tokens = state.tail_tokens
        turn.first_tail_seq = state.first_tail_seq
        turn.memory_index.extend(entry_to_proto(e) for e in state.memory_index)
        turn.memory_total = state.memory_total
        if state.skills is not None:
            turn.skills.names.extend(state.skills)
            turn.skills.SetInParent()
    return reply


def hit_to_proto(hit: Hit) -> common_pb2.RecordHit:
    """A SearchRecords hit as its message."""
    return common_pb2.RecordHit(
        session_id=str(hit.session_id),
        label=hit.label,
        seq=hit.seq,
        role=ROLE_TO_PROTO[cast(Role, hit.role)],
        created_at=timestamp(hit.created_at),
        snippet=hit.snippet,
        snippet_offset=hit.snippet_offset,
        matches=[common_pb2.TextMatch(start=s, end=e) for s, e in hit.matches],
        reader_count=hit.reader_count,
        rank=hit.rank,
    )
