"""Request validation that depends on configured limits: `RequestParser`.

Records, slots, caches and lease lifetimes are bounded by the settings, and a
Transact's operations are validated as their RPC would be, so the parser that
knows the limits parses them too. The fields that need no limit are parsed in
their rooms (`sessions.wire`, `records.wire`, `slots.wire`, `turns.wire`,
`transact.wire`, `keys.wire`, `events.wire`, `search.wire`). Each adds violations
under the field's path (``records[2].role``, ``operations[1].put_insight.session_id``),
so one InvalidArgument names them all and a bad request changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from stello import validation
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.formats.timestamps import stored_time
from stello.rules import memory_rules
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from stello.validation import parse_uuid
from storage_service.config import StorageSettings
from storage_service.convert import struct_to_dict
from storage_service.jobs import wire
from storage_service.models import CompressionCache, NewRecord, ToolCall
from storage_service.records.wire import keep_recent, role
from storage_service.sessions.wire import meta_update
from storage_service.transact.operations import (
    ActiveCheck,
    AppendOp,
    BumpTurnOp,
    ClearInsightOp,
    InsightCheck,
    LastSeqCheck,
    LeaseCheck,
    Operation,
    Precondition,
    PutCacheOp,
    PutSessionOp,
    PutSlotOp,
    ReleaseTurnOp,
    TrimOp,
)
from storage_service.transact.wire import copy_prompt_op, inherit_op, remember

MAX_TTL_S = 86_400


class RequestParser:
    """The validations that depend on configured limits (record, slot and lease sizes)."""

    def __init__(self, settings: StelloSettings, config: StorageSettings) -> None:
        self._max_record = settings.max_record_bytes
        self._max_slot = settings.max_slot_bytes
        self._max_ttl = min(config.max_turn_ttl_s, MAX_TTL_S)

    def records(
        self, records: Sequence[common_pb2.Record], path: str, v: Violations
    ) -> tuple[NewRecord, ...]:
        """Records to append, each checked for role, timestamp and size."""
        parsed = []
        for i, record in enumerate(records):
            name = f"{path}[{i}]"
            size = record.ByteSize()
            if size > self._max_record:
                v.add(name, f"is {size} bytes, over the limit of {self._max_record}")
            created_at = None
            if record.HasField("created_at"):
                try:
                    created_at = stored_time(record.created_at)
                except (ValueError, OverflowError):
                    v.add(f"{name}.created_at", "is not a representable timestamp")
            for j, call in enumerate(record.tool_calls):
                at = f"{name}.tool_calls[{j}]"
                validation.tool_call(call.id, call.name, call.arguments_json, at, v)
            named = role(record.role, f"{name}.role", v)
            answers = record.tool_call_id if record.HasField("tool_call_id") else None
            validation.record_tool_fields(named, bool(record.tool_calls), answers, name, v)
            parsed.append(
                NewRecord(
                    role=named or "user",
                    content=record.content,
                    tool_calls=tuple(
                        ToolCall(c.id, c.name, c.arguments_json) for c in record.tool_calls
                    ),
                    tool_call_id=answers,
                    created_at=created_at,
                    metadata=struct_to_dict(record.metadata)
                    if record.HasField("metadata")
                    else None,
                )
            )
        return tuple(parsed)

    def memory_entry(
        self, request: storage_pb2.UpsertSharedMemoryEntryRequest, v: Violations
    ) -> None:
        """An upsert's slug, summary and body, by the shared memory rules."""
        memory_rules.check_entry(request.slug, request.summary, request.body, self._max_slot, v)

    def slot(self, content: str, name: str, v: Violations) -> str:
        """A slot value within the size limit ("" is a value)."""
        return validation.utf8_within(content, self._max_slot, name, v)

    def cache(
        self, present: bool, cache: storage_pb2.CompressionCache, path: str, v: Violations
    ) -> CompressionCache:
        """A compression cache: required, covered_until_seq non-negative."""
        if not present:
            v.add(path, "is required")
        if cache.covered_until_seq < 0:
            v.add(f"{path}.covered_until_seq", "must not be negative")
        return CompressionCache(
            self.slot(cache.summary, f"{path}.summary", v), cache.covered_until_seq, cache.lossy
        )

    def ttl(self, value: int, v: Violations) -> int:
        """A lease lifetime within 1..the configured maximum."""
        if not 1 <= value <= self._max_ttl:
            v.add("ttl_s", f"must be within 1..{self._max_ttl} seconds, got {value}")
        return value

    def precondition(
        self, message: storage_pb2.Precondition, index: int, v: Violations
    ) -> Precondition | None:
        """One Transact precondition; None (and a violation) when no kind is set."""
        path = f"preconditions[{index}]"
        kind = message.WhichOneof("kind")
        if kind == "session_last_seq":
            check = message.session_last_seq
            sid = parse_uuid(check.session_id, f"{path}.{kind}.session_id", v)
            if check.expected < 0:
                v.add(f"{path}.{kind}.expected", "must not be negative (0: no record appended)")
            return LastSeqCheck(sid, check.expected)
        if kind == "insight_unchanged":
            insight = message.insight_unchanged
            sid = parse_uuid(insight.session_id, f"{path}.{kind}.session_id", v)
            return InsightCheck(sid, insight.expected if insight.HasField("expected") else None)
        if kind == "turn_lease":
            lease = message.turn_lease
            sid = parse_uuid(lease.session_id, f"{path}.{kind}.session_id", v)
            if not lease.token:
                v.add(f"{path}.{kind}.token", "is required")
            return LeaseCheck(sid, lease.token)
        if kind == "session_active":
            active = message.session_active
            return ActiveCheck(parse_uuid(active.session_id, f"{path}.{kind}.session_id", v))
        if kind == "background_job":
            return wire.job_check(message.background_job, f"{path}.{kind}", v)
        if kind == "memory_version":
            return wire.memory_version_check(message.memory_version, f"{path}.{kind}", v)
        v.add(path, "must set exactly one kind")
        return None

    def operation(
        self, message: storage_pb2.Operation, index: int, v: Violations
    ) -> Operation | None:
        """One Transact operation, validated as its RPC would; None when no kind is set."""
        kind = message.WhichOneof("kind")
        if kind is None:
            v.add(f"operations[{index}]", "must set exactly one kind")
            return None
        path = f"operations[{index}].{kind}"
        if kind == "remember_result":
            return remember(message.remember_result, path, v)
        if kind == "put_session":
            put = message.put_session
            return PutSessionOp(
                meta_update(put.HasField("session"), put.session, f"{path}.session", v)
            )
        body = getattr(message, kind)
        sid = parse_uuid(body.session_id, f"{path}.session_id", v)
        if kind == "append_records":
            return AppendOp(sid, self.records(body.records, f"{path}.records", v))
        if kind == "inherit_records":
            return inherit_op(sid, body, path, v)
        if kind == "copy_system_prompt":
            return copy_prompt_op(sid, body, path, v)
        if kind in ("put_system_prompt", "put_insight", "put_memory"):
            content = self.slot(body.content, f"{path}.content", v)
            covered = body.covered_until_seq if kind == "put_memory" else None
            if covered is not None and body.HasField("covered_until_seq"):
                if covered < 0:
                    v.add(f"{path}.covered_until_seq", "must not be negative")
                return PutSlotOp(sid, "memory", content, covered)
            return PutSlotOp(sid, kind.removeprefix("put_"), content)
        if kind == "clear_insight":
            return ClearInsightOp(sid)
        if kind == "put_compression_cache":
            cache = self.cache(body.HasField("cache"), body.cache, f"{path}.cache", v)
            return PutCacheOp(sid, cache, body.keep_newer)
        if kind == "update_job":
            return wire.update_job_op(sid, body, path, v)
        if kind == "trim_records":
            present = body.HasField("keep_recent")
            return TrimOp(sid, keep_recent(present, body.keep_recent, f"{path}.keep_recent", v))
        if kind == "bump_turn":
            if body.turns < 0:
                v.add(f"{path}.turns", "must not be negative")
            return BumpTurnOp(sid, body.touch_only, body.turns or 1)
        if not body.token:
            v.add(f"{path}.token", "is required")
        return ReleaseTurnOp(sid, body.token)

    def transact(
        self, request: storage_pb2.TransactRequest, v: Violations
    ) -> tuple[list[Precondition], list[Operation]]:
        """Every precondition and operation of a Transact."""
        checks = [self.precondition(p, i, v) for i, p in enumerate(request.preconditions)]
        ops = [self.operation(o, i, v) for i, o in enumerate(request.operations)]
        return [c for c in checks if c is not None], [o for o in ops if o is not None]
