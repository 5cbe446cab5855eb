"""Request validation: protos into domain input, every bad field named (BadRequest).

Each ``parse_*`` collects violations under the field's path (``records[2].role``,
``operations[1].put_insight.session_id``) and raises one InvalidArgument
naming them all, so a bad request changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from stello import memory_rules, validation
from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.idempotency import MAX_REQUEST_ID_CHARS, fingerprint
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from stello.timestamps import stored_time
from stello.validation import MAX_PAGE_SIZE, label, parse_uuid, space_uuid
from storage_service.config import StorageSettings
from storage_service.convert import (
    ROLE_FROM_PROTO,
    STATUS_FROM_PROTO,
    struct_to_dict,
)
from storage_service.jobs import wire
from storage_service.models import (
    BusyPolicy,
    CompressionCache,
    Idempotency,
    IndexCaps,
    MetaUpdate,
    NewRecord,
    RecordQuery,
    Role,
    SlotName,
    Status,
    ToolCall,
    TurnBudget,
    TurnBusy,
    TurnKey,
)
from storage_service.search.service import RecordSearch
from storage_service.transact.operations import (
    ActiveCheck,
    AppendOp,
    BumpTurnOp,
    ClearInsightOp,
    CopyPromptOp,
    InheritOp,
    InsightCheck,
    LastSeqCheck,
    LeaseCheck,
    Operation,
    Precondition,
    PutCacheOp,
    PutSessionOp,
    PutSlotOp,
    ReleaseTurnOp,
    RememberOp,
    TrimOp,
)

MAX_BATCH_IDS = 1000
MAX_TTL_S = 86_400
MAX_SCOPE_CHARS = 100
MAX_REQUEST_HASH_BYTES = 64
RESERVED_SCOPE_PREFIX = "storage."
"""Storage's own idempotency scopes; callers may not write or read under them."""


class Target(Protocol):
    """A request naming one session of one space."""

    @property
    def space_id(self) -> str:
        """The tenant space."""
        ...

    @property
    def session_id(self) -> str:
        """The session."""
        ...


def target(request: Target, v: Violations | None = None) -> tuple[uuid.UUID, uuid.UUID]:
    """The (space_id, session_id) of a request; raises for malformed ids unless `v` collects."""
    own = v or Violations()
    space_id = space_uuid(request.space_id, own)
    session_id = parse_uuid(request.session_id, "session_id", own)
    if v is None:
        own.raise_if_any()
    return space_id, session_id


def idempotency(
    request: storage_pb2.AppendRecordsRequest
    | storage_pb2.TransactRequest
    | storage_pb2.UpsertSharedMemoryEntryRequest
    | storage_pb2.RemoveSharedMemoryEntryRequest,
    v: Violations,
) -> Idempotency | None:
    """The request's idempotency key and fingerprint (request_id cleared), or None."""
    if not request.request_id:
        return None
    if len(request.request_id) > MAX_REQUEST_ID_CHARS:
        v.add("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")
    return Idempotency(request.request_id, fingerprint(request))


def remembered_key(scope: str, request_id: str, path: str, v: Violations) -> None:
    """Check the key of a remembered result: a caller's scope and a request id."""
    prefix = f"{path}." if path else ""
    if not scope:
        v.add(f"{prefix}scope", "is required")
    elif len(scope) > MAX_SCOPE_CHARS:
        v.add(f"{prefix}scope", f"must be at most {MAX_SCOPE_CHARS} characters")
    elif scope.startswith(RESERVED_SCOPE_PREFIX):
        v.add(f"{prefix}scope", f"must not start with {RESERVED_SCOPE_PREFIX!r} (storage's own)")
    if not request_id:
        v.add(f"{prefix}request_id", "is required")
    elif len(request_id) > MAX_REQUEST_ID_CHARS:
        v.add(f"{prefix}request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters")


def remember(
    message: storage_pb2.Operation.RememberResultOp, path: str, v: Violations
) -> RememberOp:
    """A RememberResultOp: a valid key, a 1..64-byte request hash, the ids of the sessions
    it holds data of."""
    remembered_key(message.scope, message.request_id, path, v)
    if not 1 <= len(message.request_hash) <= MAX_REQUEST_HASH_BYTES:
        v.add(f"{path}.request_hash", f"must be 1..{MAX_REQUEST_HASH_BYTES} bytes")
    if len(message.session_ids) > MAX_BATCH_IDS:
        v.add(f"{path}.session_ids", f"must list at most {MAX_BATCH_IDS} ids")
    sessions = tuple(
        parse_uuid(value, f"{path}.session_ids[{i}]", v)
        for i, value in enumerate(message.session_ids[:MAX_BATCH_IDS])
    )
    return RememberOp(
        message.scope,
        message.request_id,
        message.request_hash,
        message.response,
        message.require_new,
        tuple(dict.fromkeys(sessions)),
    )


def other_source(session_id: uuid.UUID, value: str, path: str, v: Violations) -> uuid.UUID:
    """The `source_id` of an operation that reads another session into `session_id`."""
    source = parse_uuid(value, path, v)
    if value and source == session_id:
        v.add(path, "must name another session than session_id")
    return source


def inherit_op(
    session_id: uuid.UUID,
    message: storage_pb2.Operation.InheritRecordsOp,
    path: str,
    v: Violations,
) -> InheritOp:
    """An InheritRecordsOp: a source other than the session, a non-negative until_seq."""
    source = other_source(session_id, message.source_id, f"{path}.source_id", v)
    until = message.until_seq if message.HasField("until_seq") else None
    if until is not None and until < 0:
        v.add(f"{path}.until_seq", "must not be negative")
    return InheritOp(session_id, source, until)


def copy_prompt_op(
    session_id: uuid.UUID,
    message: storage_pb2.Operation.CopySystemPromptOp,
    path: str,
    v: Violations,
) -> CopyPromptOp:
    """A CopySystemPromptOp: a source other than the session."""
    return CopyPromptOp(
        session_id, other_source(session_id, message.source_id, f"{path}.source_id", v)
    )


MAX_WINDOW_TOKENS = 2**40


def turn_key(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnKey | None:
    """BeginTurn's remembered key: none without a request_id, else a valid scope with it."""
    if not request.request_id:
        return None
    remembered_key(request.scope, request.request_id, "", v)
    return TurnKey(request.scope, request.request_id)


def turn_budget(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnBudget | None:
    """BeginTurn's window: none when unset; window_tokens >= 1, reserve_tokens >= 0."""
    if not request.HasField("window"):
        return None
    window = request.window
    if not 1 <= window.window_tokens <= MAX_WINDOW_TOKENS:
        v.add("window.window_tokens", f"must be within 1..{MAX_WINDOW_TOKENS}")
    if not 0 <= window.reserve_tokens <= MAX_WINDOW_TOKENS:
        v.add("window.reserve_tokens", f"must be within 0..{MAX_WINDOW_TOKENS}")
    return TurnBudget(window.window_tokens, window.reserve_tokens, _index_caps(request, v))


MAX_WAITERS = 10_000
BUSY_POLICIES: dict[int, BusyPolicy] = {
    common_pb2.BUSY_POLICY_UNSPECIFIED: "reject",
    common_pb2.BUSY_POLICY_REJECT: "reject",
    common_pb2.BUSY_POLICY_ENQUEUE: "enqueue",
    common_pb2.BUSY_POLICY_INTERRUPT: "interrupt",
    common_pb2.BUSY_POLICY_ROLLBACK: "interrupt",
}


def turn_busy(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnBusy:
    """BeginTurn's busy policy: a known one; other than REJECT only with a window; ENQUEUE
    with a waiter UUID and a cap within 1..MAX_WAITERS."""
    policy = BUSY_POLICIES.get(request.busy)
    if policy is None:
        v.add("busy", f"is not a BusyPolicy value: {request.busy}")
        return TurnBusy(continuation=request.continuation)
    if policy != "reject" and not request.HasField("window"):
        v.add("busy", "needs `window` (only a whole turn can wait or interrupt)")
    if policy != "enqueue":
        return TurnBusy(policy, continuation=request.continuation)
    waiter = parse_uuid(request.waiter, "waiter", v)
    if not 1 <= request.max_waiters <= MAX_WAITERS:
        v.add("max_waiters", f"must be within 1..{MAX_WAITERS}, got {request.max_waiters}")
    return TurnBusy(policy, waiter, request.max_waiters, request.continuation)


def _index_caps(request: storage_pb2.BeginTurnRequest, v: Violations) -> IndexCaps | None:
    """BeginTurn's shared memory index caps: none when unset."""
    if not request.HasField("memory_index"):
        return None
    caps = request.memory_index
    if not 1 <= caps.max_entries <= MAX_PAGE_SIZE:
        v.add("memory_index.max_entries", f"must be within 1..{MAX_PAGE_SIZE}")
    for name in ("max_tokens", "overhead_tokens"):
        if not 0 <= getattr(caps, name) <= MAX_WINDOW_TOKENS:
            v.add(f"memory_index.{name}", f"must be within 0..{MAX_WINDOW_TOKENS}")
    return IndexCaps(caps.max_entries, caps.max_tokens, caps.overhead_tokens)


def role(value: int, name: str, v: Violations, *, allow_unspecified: bool = False) -> Role | None:
    """A role enum value; UNSPECIFIED only where it means "no filter"."""
    if value == common_pb2.RECORD_ROLE_UNSPECIFIED and allow_unspecified:
        return None
    found = ROLE_FROM_PROTO.get(value)
    if found is None:
        described = "UNSPECIFIED" if value == 0 else f"unknown value {value}"
        v.add(name, f"must be a record role, got {described}")
    return found


def status(
    value: int, name: str, v: Violations, *, allow_unspecified: bool = False
) -> Status | None:
    """A session status; UNSPECIFIED only where it means "no filter"."""
    if value == common_pb2.SESSION_STATUS_UNSPECIFIED and allow_unspecified:
        return None
    found = STATUS_FROM_PROTO.get(value)
    if found is None:
        described = "UNSPECIFIED" if value == 0 else f"unknown value {value}"
        v.add(name, f"must be ACTIVE or ARCHIVED, got {described}")
    return found


def meta_update(
    present: bool, message: common_pb2.SessionMeta, path: str, v: Violations
) -> MetaUpdate:
    """The id, label and status of a put (other meta fields are output only); required."""
    if not present:
        v.add(path, "is required")
        return MetaUpdate(uuid.UUID(int=0), "", "active")
    return MetaUpdate(
        session_id=parse_uuid(message.id, f"{path}.id", v),
        label=label(message.label, v, f"{path}.label"),
        status=status(message.status, f"{path}.status", v) or "active",
    )


def record_query(request: storage_pb2.ListRecordsRequest, v: Violations) -> RecordQuery:
    """ListRecords options: limit unset = the maximum page, 0 = none, bounds exclusive."""
    limit = request.limit if request.HasField("limit") else MAX_PAGE_SIZE
    if limit < 0:
        v.add("limit", "must not be negative")
    elif limit > MAX_PAGE_SIZE:
        v.add("limit", f"must be at most {MAX_PAGE_SIZE}, got {limit}")
    if request.offset < 0:
        v.add("offset", "must not be negative")
    return RecordQuery(
        limit=limit,
        offset=request.offset,
        role=role(request.role, "role", v, allow_unspecified=True),
        after_seq=request.after_seq if request.HasField("after_seq") else None,
        before_seq=request.before_seq if request.HasField("before_seq") else None,
        newest_first=request.newest_first,
        page_token=request.page_token,
    )


def keep_recent(present: bool, value: int, name: str, v: Violations) -> int:
    """A trim's keep_recent: required and non-negative."""
    if not present:
        v.add(name, "is required (how many of the newest records to keep)")
    elif value < 0:
        v.add(name, "must not be negative")
    return value


def batch_ids(values: Sequence[str], v: Violations) -> list[uuid.UUID]:
    """BatchGetSlots' ids: at most 1000, each a UUID."""
    if len(values) > MAX_BATCH_IDS:
        v.add("session_ids", f"must list at most {MAX_BATCH_IDS} ids, got {len(values)}")
        return []
    return [parse_uuid(value, f"session_ids[{i}]", v) for i, value in enumerate(values)]


def max_reply_bytes(value: int, v: Violations) -> int:
    """A reply's byte budget: 0 (the server's limit) or more."""
    if value < 0:
        v.add("max_reply_bytes", "must not be negative (0 = the server's message limit)")
    return max(value, 0)


SLOT_KINDS: dict[int, SlotName] = {
    storage_pb2.SLOT_KIND_SYSTEM_PROMPT: "system_prompt",
    storage_pb2.SLOT_KIND_MEMORY: "memory",
    storage_pb2.SLOT_KIND_INSIGHT: "insight",
}


def slot_kinds(values: Sequence[int], v: Violations) -> frozenset[SlotName]:
    """BatchGetSlots' slot selection: the named slots, or all three when none is named."""
    if not values:
        return frozenset(SLOT_KINDS.values())
    for i, value in enumerate(values):
        if value not in SLOT_KINDS:
            v.add(f"slots[{i}]", f"must be a SlotKind other than UNSPECIFIED, got {value}")
    return frozenset(SLOT_KINDS[value] for value in values if value in SLOT_KINDS)


def session_slots(values: Sequence[int], v: Violations) -> frozenset[SlotName]:
    """GetSession's slot selection: the named slots, none when none is named."""
    return slot_kinds(values, v) if values else frozenset()


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
                validation.tool_arguments(
                    call.arguments_json, f"{name}.tool_calls[{j}].arguments_json", v
                )
            parsed.append(
                NewRecord(
                    role=role(record.role, f"{name}.role", v) or "user",
                    content=record.content,
                    tool_calls=tuple(
                        ToolCall(c.id, c.name, c.arguments_json) for c in record.tool_calls
                    ),
                    tool_call_id=record.tool_call_id if record.HasField("tool_call_id") else None,
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


MAX_EVENTS_PAGE = 1000
DEFAULT_EVENTS_PAGE = 500


def read_events(request: storage_pb2.ReadEventsRequest, v: Violations) -> tuple[int | None, int]:
    """ReadEvents' position (None: unset) and page size (default 500, at most 1000)."""
    after = request.after_position if request.HasField("after_position") else None
    if after is not None and after < 0:
        v.add("after_position", "must not be negative")
    limit = request.limit if request.HasField("limit") else DEFAULT_EVENTS_PAGE
    if not 0 <= limit <= MAX_EVENTS_PAGE:
        v.add("limit", f"must be between 0 and {MAX_EVENTS_PAGE}")
    return after, limit


MAX_SEARCH_PAGE = 100
DEFAULT_SEARCH_PAGE = 20


def search_page_size(value: int, v: Violations) -> int:
    """A search's page size: 0 = 20, at most 100."""
    if not 0 <= value <= MAX_SEARCH_PAGE:
        v.add("page_size", f"must be within 0..{MAX_SEARCH_PAGE}, got {value}")
    return value or DEFAULT_SEARCH_PAGE


def record_search(request: storage_pb2.SearchRecordsRequest, v: Violations) -> RecordSearch:
    """A SearchRecords request as its domain input (the query is parsed by the service)."""
    space_id = space_uuid(request.space_id, v)
    session_id = parse_uuid(request.session_id, "session_id", v) if request.session_id else None
    root_id = parse_uuid(request.root_id, "root_id", v) if request.root_id else None
    if request.session_id and request.root_id:
        v.add("root_id", "must be empty when session_id is set (one scope at most)")
    if request.order not in (
        common_pb2.SEARCH_ORDER_UNSPECIFIED,
        common_pb2.SEARCH_ORDER_NEWEST,
        common_pb2.SEARCH_ORDER_RELEVANCE,
    ):
        v.add("order", f"must be NEWEST or RELEVANCE, got unknown value {request.order}")
    size = search_page_size(request.page_size, v)
    return RecordSearch(
        space_id=space_id,
        query=request.query,
        session_id=session_id,
        root_id=root_id,
        relevance=request.order == common_pb2.SEARCH_ORDER_RELEVANCE,
        page_size=size,
        page_token=request.page_token,
    )
