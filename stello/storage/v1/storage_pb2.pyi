import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from stello.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SlotKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SLOT_KIND_UNSPECIFIED: _ClassVar[SlotKind]
    SLOT_KIND_SYSTEM_PROMPT: _ClassVar[SlotKind]
    SLOT_KIND_MEMORY: _ClassVar[SlotKind]
    SLOT_KIND_INSIGHT: _ClassVar[SlotKind]
SLOT_KIND_UNSPECIFIED: SlotKind
SLOT_KIND_SYSTEM_PROMPT: SlotKind
SLOT_KIND_MEMORY: SlotKind
SLOT_KIND_INSIGHT: SlotKind

class GetSessionRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "slots", "progress")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    slots: _containers.RepeatedScalarFieldContainer[SlotKind]
    progress: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[SlotKind, str]]] = ..., progress: _Optional[bool] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session", "slots", "progress")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionMeta
    slots: SessionSlots
    progress: _common_pb2.HistoryProgress
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ..., slots: _Optional[_Union[SessionSlots, _Mapping]] = ..., progress: _Optional[_Union[_common_pb2.HistoryProgress, _Mapping]] = ...) -> None: ...

class PutSessionRequest(_message.Message):
    __slots__ = ("space_id", "session")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session: _common_pb2.SessionMeta
    def __init__(self, space_id: _Optional[str] = ..., session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ...) -> None: ...

class PutSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionMeta
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("space_id", "status", "page_size", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    status: _common_pb2.SessionStatus
    page_size: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.SessionStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionMeta]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[_common_pb2.SessionMeta, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AppendRecordsRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "records", "request_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    request_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class AppendRecordsResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    def __init__(self, records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ...) -> None: ...

class ListRecordsRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "limit", "offset", "role", "after_seq", "before_seq", "newest_first", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    BEFORE_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    limit: int
    offset: int
    role: _common_pb2.RecordRole
    after_seq: int
    before_seq: int
    newest_first: bool
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., role: _Optional[_Union[_common_pb2.RecordRole, str]] = ..., after_seq: _Optional[int] = ..., before_seq: _Optional[int] = ..., newest_first: _Optional[bool] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRecordsResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchRecordsRequest(_message.Message):
    __slots__ = ("space_id", "query", "session_id", "root_id", "order", "page_size", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    query: str
    session_id: str
    root_id: str
    order: _common_pb2.SearchOrder
    page_size: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., query: _Optional[str] = ..., session_id: _Optional[str] = ..., root_id: _Optional[str] = ..., order: _Optional[_Union[_common_pb2.SearchOrder, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchRecordsResponse(_message.Message):
    __slots__ = ("hits", "next_page_token")
    HITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[_common_pb2.RecordHit]
    next_page_token: str
    def __init__(self, hits: _Optional[_Iterable[_Union[_common_pb2.RecordHit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchSessionsRequest(_message.Message):
    __slots__ = ("space_id", "query", "status", "page_size", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    query: str
    status: _common_pb2.SessionStatus
    page_size: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., query: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.SessionStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionMeta]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[_common_pb2.SessionMeta, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class TrimRecordsRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "keep_recent")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    keep_recent: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., keep_recent: _Optional[int] = ...) -> None: ...

class TrimRecordsResponse(_message.Message):
    __slots__ = ("removed_count",)
    REMOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
    removed_count: int
    def __init__(self, removed_count: _Optional[int] = ...) -> None: ...

class GetSystemPromptRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetSystemPromptResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class PutSystemPromptRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class PutSystemPromptResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInsightRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetInsightResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class PutInsightRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class PutInsightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClearInsightRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ClearInsightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConsumeInsightRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ConsumeInsightResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("content", "covered_until_seq", "version")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    content: str
    covered_until_seq: int
    version: int
    def __init__(self, content: _Optional[str] = ..., covered_until_seq: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class PutMemoryRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content", "covered_until_seq")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    covered_until_seq: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ..., covered_until_seq: _Optional[int] = ...) -> None: ...

class PutMemoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSharedMemoryRequest(_message.Message):
    __slots__ = ("space_id", "page_size", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    page_size: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSharedMemoryResponse(_message.Message):
    __slots__ = ("entries", "next_page_token", "total_count")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_common_pb2.SharedMemoryEntry]
    next_page_token: str
    total_count: int
    def __init__(self, entries: _Optional[_Iterable[_Union[_common_pb2.SharedMemoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ...) -> None: ...

class GetSharedMemoryEntryRequest(_message.Message):
    __slots__ = ("space_id", "slug")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    slug: str
    def __init__(self, space_id: _Optional[str] = ..., slug: _Optional[str] = ...) -> None: ...

class GetSharedMemoryEntryResponse(_message.Message):
    __slots__ = ("entry",)
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    entry: _common_pb2.SharedMemoryEntry
    def __init__(self, entry: _Optional[_Union[_common_pb2.SharedMemoryEntry, _Mapping]] = ...) -> None: ...

class UpsertSharedMemoryEntryRequest(_message.Message):
    __slots__ = ("space_id", "slug", "summary", "body", "request_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    slug: str
    summary: str
    body: str
    request_id: str
    def __init__(self, space_id: _Optional[str] = ..., slug: _Optional[str] = ..., summary: _Optional[str] = ..., body: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpsertSharedMemoryEntryResponse(_message.Message):
    __slots__ = ("entry", "created")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    entry: _common_pb2.SharedMemoryEntry
    created: bool
    def __init__(self, entry: _Optional[_Union[_common_pb2.SharedMemoryEntry, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class RemoveSharedMemoryEntryRequest(_message.Message):
    __slots__ = ("space_id", "slug", "request_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    slug: str
    request_id: str
    def __init__(self, space_id: _Optional[str] = ..., slug: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RemoveSharedMemoryEntryResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class ClaimForkRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "min_turns", "cooldown_turns")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_TURNS_FIELD_NUMBER: _ClassVar[int]
    COOLDOWN_TURNS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    min_turns: int
    cooldown_turns: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., min_turns: _Optional[int] = ..., cooldown_turns: _Optional[int] = ...) -> None: ...

class ClaimForkResponse(_message.Message):
    __slots__ = ("granted", "turn_count", "last_fork_turn")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_FORK_TURN_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    turn_count: int
    last_fork_turn: int
    def __init__(self, granted: _Optional[bool] = ..., turn_count: _Optional[int] = ..., last_fork_turn: _Optional[int] = ...) -> None: ...

class ReleaseForkClaimRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "claimed_turn", "previous_fork_turn")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_TURN_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FORK_TURN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    claimed_turn: int
    previous_fork_turn: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., claimed_turn: _Optional[int] = ..., previous_fork_turn: _Optional[int] = ...) -> None: ...

class ReleaseForkClaimResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class CompressionCache(_message.Message):
    __slots__ = ("summary", "covered_until_seq", "lossy")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    LOSSY_FIELD_NUMBER: _ClassVar[int]
    summary: str
    covered_until_seq: int
    lossy: bool
    def __init__(self, summary: _Optional[str] = ..., covered_until_seq: _Optional[int] = ..., lossy: _Optional[bool] = ...) -> None: ...

class ClaimJobRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "kind", "ttl_s", "token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    kind: _common_pb2.JobKind
    ttl_s: int
    token: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.JobKind, str]] = ..., ttl_s: _Optional[int] = ..., token: _Optional[str] = ...) -> None: ...

class ClaimJobResponse(_message.Message):
    __slots__ = ("granted", "token", "expires_at", "job")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    token: str
    expires_at: _timestamp_pb2.Timestamp
    job: _common_pb2.BackgroundJob
    def __init__(self, granted: _Optional[bool] = ..., token: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job: _Optional[_Union[_common_pb2.BackgroundJob, _Mapping]] = ...) -> None: ...

class RenewJobRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "kind", "token", "ttl_s")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    kind: _common_pb2.JobKind
    token: str
    ttl_s: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.JobKind, str]] = ..., token: _Optional[str] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class RenewJobResponse(_message.Message):
    __slots__ = ("renewed", "expires_at", "interrupted")
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    renewed: bool
    expires_at: _timestamp_pb2.Timestamp
    interrupted: bool
    def __init__(self, renewed: _Optional[bool] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., interrupted: _Optional[bool] = ...) -> None: ...

class GetCompressionCacheRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "at_or_below_seq", "complete_only")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_OR_BELOW_SEQ_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_ONLY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    at_or_below_seq: int
    complete_only: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., at_or_below_seq: _Optional[int] = ..., complete_only: _Optional[bool] = ...) -> None: ...

class GetCompressionCacheResponse(_message.Message):
    __slots__ = ("cache",)
    CACHE_FIELD_NUMBER: _ClassVar[int]
    cache: CompressionCache
    def __init__(self, cache: _Optional[_Union[CompressionCache, _Mapping]] = ...) -> None: ...

class PutCompressionCacheRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "cache")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    cache: CompressionCache
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., cache: _Optional[_Union[CompressionCache, _Mapping]] = ...) -> None: ...

class PutCompressionCacheResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BatchGetSlotsRequest(_message.Message):
    __slots__ = ("space_id", "session_ids", "slots", "max_reply_bytes")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLY_BYTES_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    slots: _containers.RepeatedScalarFieldContainer[SlotKind]
    max_reply_bytes: int
    def __init__(self, space_id: _Optional[str] = ..., session_ids: _Optional[_Iterable[str]] = ..., slots: _Optional[_Iterable[_Union[SlotKind, str]]] = ..., max_reply_bytes: _Optional[int] = ...) -> None: ...

class BatchGetSlotsResponse(_message.Message):
    __slots__ = ("slots", "next_index")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedCompositeFieldContainer[SessionSlots]
    next_index: int
    def __init__(self, slots: _Optional[_Iterable[_Union[SessionSlots, _Mapping]]] = ..., next_index: _Optional[int] = ...) -> None: ...

class SessionSlots(_message.Message):
    __slots__ = ("session_id", "system_prompt", "memory", "insight")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    system_prompt: str
    memory: str
    insight: str
    def __init__(self, session_id: _Optional[str] = ..., system_prompt: _Optional[str] = ..., memory: _Optional[str] = ..., insight: _Optional[str] = ...) -> None: ...

class BeginTurnRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "ttl_s", "scope", "request_id", "window", "memory_index", "busy", "waiter", "max_waiters", "continuation")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    MEMORY_INDEX_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    WAITER_FIELD_NUMBER: _ClassVar[int]
    MAX_WAITERS_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    ttl_s: int
    scope: str
    request_id: str
    window: TurnWindow
    memory_index: MemoryIndexWindow
    busy: _common_pb2.BusyPolicy
    waiter: str
    max_waiters: int
    continuation: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., ttl_s: _Optional[int] = ..., scope: _Optional[str] = ..., request_id: _Optional[str] = ..., window: _Optional[_Union[TurnWindow, _Mapping]] = ..., memory_index: _Optional[_Union[MemoryIndexWindow, _Mapping]] = ..., busy: _Optional[_Union[_common_pb2.BusyPolicy, str]] = ..., waiter: _Optional[str] = ..., max_waiters: _Optional[int] = ..., continuation: _Optional[bool] = ...) -> None: ...

class TurnQueued(_message.Message):
    __slots__ = ("ahead", "expires_at")
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ahead: int
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, ahead: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class MemoryIndexWindow(_message.Message):
    __slots__ = ("max_entries", "max_tokens", "overhead_tokens")
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_entries: int
    max_tokens: int
    overhead_tokens: int
    def __init__(self, max_entries: _Optional[int] = ..., max_tokens: _Optional[int] = ..., overhead_tokens: _Optional[int] = ...) -> None: ...

class TurnWindow(_message.Message):
    __slots__ = ("window_tokens", "reserve_tokens")
    WINDOW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESERVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    window_tokens: int
    reserve_tokens: int
    def __init__(self, window_tokens: _Optional[int] = ..., reserve_tokens: _Optional[int] = ...) -> None: ...

class RememberedTurn(_message.Message):
    __slots__ = ("request_hash", "response")
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    request_hash: bytes
    response: bytes
    def __init__(self, request_hash: _Optional[bytes] = ..., response: _Optional[bytes] = ...) -> None: ...

class TurnState(_message.Message):
    __slots__ = ("session", "last_seq", "system_prompt", "insight", "cache", "records", "tail_tokens", "first_tail_seq", "memory_index", "memory_total", "skills")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    TAIL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FIRST_TAIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionMeta
    last_seq: int
    system_prompt: str
    insight: str
    cache: CompressionCache
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    tail_tokens: int
    first_tail_seq: int
    memory_index: _containers.RepeatedCompositeFieldContainer[_common_pb2.SharedMemoryEntry]
    memory_total: int
    skills: _common_pb2.SkillList
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ..., last_seq: _Optional[int] = ..., system_prompt: _Optional[str] = ..., insight: _Optional[str] = ..., cache: _Optional[_Union[CompressionCache, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., tail_tokens: _Optional[int] = ..., first_tail_seq: _Optional[int] = ..., memory_index: _Optional[_Iterable[_Union[_common_pb2.SharedMemoryEntry, _Mapping]]] = ..., memory_total: _Optional[int] = ..., skills: _Optional[_Union[_common_pb2.SkillList, _Mapping]] = ...) -> None: ...

class BeginTurnResponse(_message.Message):
    __slots__ = ("token", "expires_at", "remembered", "turn", "queued", "interrupted_token")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REMEMBERED_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    expires_at: _timestamp_pb2.Timestamp
    remembered: RememberedTurn
    turn: TurnState
    queued: TurnQueued
    interrupted_token: str
    def __init__(self, token: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., remembered: _Optional[_Union[RememberedTurn, _Mapping]] = ..., turn: _Optional[_Union[TurnState, _Mapping]] = ..., queued: _Optional[_Union[TurnQueued, _Mapping]] = ..., interrupted_token: _Optional[str] = ...) -> None: ...

class LeaveTurnQueueRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "waiter")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAITER_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    waiter: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., waiter: _Optional[str] = ...) -> None: ...

class LeaveTurnQueueResponse(_message.Message):
    __slots__ = ("left",)
    LEFT_FIELD_NUMBER: _ClassVar[int]
    left: bool
    def __init__(self, left: _Optional[bool] = ...) -> None: ...

class ReleaseTurnRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    token: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ReleaseTurnResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class RenewTurnRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "token", "ttl_s")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    token: str
    ttl_s: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., token: _Optional[str] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class RenewTurnResponse(_message.Message):
    __slots__ = ("renewed", "expires_at", "interrupted")
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    renewed: bool
    expires_at: _timestamp_pb2.Timestamp
    interrupted: bool
    def __init__(self, renewed: _Optional[bool] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., interrupted: _Optional[bool] = ...) -> None: ...

class TransactRequest(_message.Message):
    __slots__ = ("space_id", "preconditions", "operations", "request_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PRECONDITIONS_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    preconditions: _containers.RepeatedCompositeFieldContainer[Precondition]
    operations: _containers.RepeatedCompositeFieldContainer[Operation]
    request_id: str
    def __init__(self, space_id: _Optional[str] = ..., preconditions: _Optional[_Iterable[_Union[Precondition, _Mapping]]] = ..., operations: _Optional[_Iterable[_Union[Operation, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class TransactResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[OperationResult]
    def __init__(self, results: _Optional[_Iterable[_Union[OperationResult, _Mapping]]] = ...) -> None: ...

class GetRememberedResultRequest(_message.Message):
    __slots__ = ("space_id", "scope", "request_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    scope: str
    request_id: str
    def __init__(self, space_id: _Optional[str] = ..., scope: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class GetRememberedResultResponse(_message.Message):
    __slots__ = ("found", "request_hash", "response")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    request_hash: bytes
    response: bytes
    def __init__(self, found: _Optional[bool] = ..., request_hash: _Optional[bytes] = ..., response: _Optional[bytes] = ...) -> None: ...

class Precondition(_message.Message):
    __slots__ = ("session_last_seq", "insight_unchanged", "turn_lease", "background_job", "memory_version", "session_active")
    class SessionLastSeqCheck(_message.Message):
        __slots__ = ("session_id", "expected")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        expected: int
        def __init__(self, session_id: _Optional[str] = ..., expected: _Optional[int] = ...) -> None: ...
    class InsightUnchangedCheck(_message.Message):
        __slots__ = ("session_id", "expected")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        expected: str
        def __init__(self, session_id: _Optional[str] = ..., expected: _Optional[str] = ...) -> None: ...
    class TurnLeaseCheck(_message.Message):
        __slots__ = ("session_id", "token")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        TOKEN_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        token: str
        def __init__(self, session_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...
    class BackgroundJobCheck(_message.Message):
        __slots__ = ("session_id", "kind", "token")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        KIND_FIELD_NUMBER: _ClassVar[int]
        TOKEN_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        kind: _common_pb2.JobKind
        token: str
        def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.JobKind, str]] = ..., token: _Optional[str] = ...) -> None: ...
    class MemoryVersionCheck(_message.Message):
        __slots__ = ("session_id", "expected")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        expected: int
        def __init__(self, session_id: _Optional[str] = ..., expected: _Optional[int] = ...) -> None: ...
    class SessionActiveCheck(_message.Message):
        __slots__ = ("session_id",)
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        def __init__(self, session_id: _Optional[str] = ...) -> None: ...
    SESSION_LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    TURN_LEASE_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_JOB_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    session_last_seq: Precondition.SessionLastSeqCheck
    insight_unchanged: Precondition.InsightUnchangedCheck
    turn_lease: Precondition.TurnLeaseCheck
    background_job: Precondition.BackgroundJobCheck
    memory_version: Precondition.MemoryVersionCheck
    session_active: Precondition.SessionActiveCheck
    def __init__(self, session_last_seq: _Optional[_Union[Precondition.SessionLastSeqCheck, _Mapping]] = ..., insight_unchanged: _Optional[_Union[Precondition.InsightUnchangedCheck, _Mapping]] = ..., turn_lease: _Optional[_Union[Precondition.TurnLeaseCheck, _Mapping]] = ..., background_job: _Optional[_Union[Precondition.BackgroundJobCheck, _Mapping]] = ..., memory_version: _Optional[_Union[Precondition.MemoryVersionCheck, _Mapping]] = ..., session_active: _Optional[_Union[Precondition.SessionActiveCheck, _Mapping]] = ...) -> None: ...

class Operation(_message.Message):
    __slots__ = ("append_records", "put_session", "put_system_prompt", "put_insight", "clear_insight", "put_memory", "put_compression_cache", "trim_records", "bump_turn", "release_turn", "remember_result", "inherit_records", "copy_system_prompt", "update_job")
    class AppendRecordsOp(_message.Message):
        __slots__ = ("session_id", "records")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
        def __init__(self, session_id: _Optional[str] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ...) -> None: ...
    class PutSessionOp(_message.Message):
        __slots__ = ("session",)
        SESSION_FIELD_NUMBER: _ClassVar[int]
        session: _common_pb2.SessionMeta
        def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ...) -> None: ...
    class PutSystemPromptOp(_message.Message):
        __slots__ = ("session_id", "content")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        CONTENT_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        content: str
        def __init__(self, session_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...
    class PutInsightOp(_message.Message):
        __slots__ = ("session_id", "content")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        CONTENT_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        content: str
        def __init__(self, session_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...
    class ClearInsightOp(_message.Message):
        __slots__ = ("session_id",)
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        def __init__(self, session_id: _Optional[str] = ...) -> None: ...
    class PutMemoryOp(_message.Message):
        __slots__ = ("session_id", "content", "covered_until_seq")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        CONTENT_FIELD_NUMBER: _ClassVar[int]
        COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        content: str
        covered_until_seq: int
        def __init__(self, session_id: _Optional[str] = ..., content: _Optional[str] = ..., covered_until_seq: _Optional[int] = ...) -> None: ...
    class PutCompressionCacheOp(_message.Message):
        __slots__ = ("session_id", "cache", "keep_newer")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        CACHE_FIELD_NUMBER: _ClassVar[int]
        KEEP_NEWER_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        cache: CompressionCache
        keep_newer: bool
        def __init__(self, session_id: _Optional[str] = ..., cache: _Optional[_Union[CompressionCache, _Mapping]] = ..., keep_newer: _Optional[bool] = ...) -> None: ...
    class TrimRecordsOp(_message.Message):
        __slots__ = ("session_id", "keep_recent")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        KEEP_RECENT_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        keep_recent: int
        def __init__(self, session_id: _Optional[str] = ..., keep_recent: _Optional[int] = ...) -> None: ...
    class BumpTurnOp(_message.Message):
        __slots__ = ("session_id", "touch_only", "turns")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        TOUCH_ONLY_FIELD_NUMBER: _ClassVar[int]
        TURNS_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        touch_only: bool
        turns: int
        def __init__(self, session_id: _Optional[str] = ..., touch_only: _Optional[bool] = ..., turns: _Optional[int] = ...) -> None: ...
    class ReleaseTurnOp(_message.Message):
        __slots__ = ("session_id", "token")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        TOKEN_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        token: str
        def __init__(self, session_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...
    class RememberResultOp(_message.Message):
        __slots__ = ("scope", "request_id", "request_hash", "response", "require_new", "session_ids")
        SCOPE_FIELD_NUMBER: _ClassVar[int]
        REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
        REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
        RESPONSE_FIELD_NUMBER: _ClassVar[int]
        REQUIRE_NEW_FIELD_NUMBER: _ClassVar[int]
        SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
        scope: str
        request_id: str
        request_hash: bytes
        response: bytes
        require_new: bool
        session_ids: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, scope: _Optional[str] = ..., request_id: _Optional[str] = ..., request_hash: _Optional[bytes] = ..., response: _Optional[bytes] = ..., require_new: _Optional[bool] = ..., session_ids: _Optional[_Iterable[str]] = ...) -> None: ...
    class InheritRecordsOp(_message.Message):
        __slots__ = ("session_id", "source_id", "until_seq")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
        UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        source_id: str
        until_seq: int
        def __init__(self, session_id: _Optional[str] = ..., source_id: _Optional[str] = ..., until_seq: _Optional[int] = ...) -> None: ...
    class CopySystemPromptOp(_message.Message):
        __slots__ = ("session_id", "source_id")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        source_id: str
        def __init__(self, session_id: _Optional[str] = ..., source_id: _Optional[str] = ...) -> None: ...
    class UpdateJobOp(_message.Message):
        __slots__ = ("session_id", "kind", "token", "covered_until_seq", "model_calls", "tokens", "release", "status")
        SESSION_ID_FIELD_NUMBER: _ClassVar[int]
        KIND_FIELD_NUMBER: _ClassVar[int]
        TOKEN_FIELD_NUMBER: _ClassVar[int]
        COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
        MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
        TOKENS_FIELD_NUMBER: _ClassVar[int]
        RELEASE_FIELD_NUMBER: _ClassVar[int]
        STATUS_FIELD_NUMBER: _ClassVar[int]
        session_id: str
        kind: _common_pb2.JobKind
        token: str
        covered_until_seq: int
        model_calls: int
        tokens: int
        release: bool
        status: _common_pb2.JobStatus
        def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.JobKind, str]] = ..., token: _Optional[str] = ..., covered_until_seq: _Optional[int] = ..., model_calls: _Optional[int] = ..., tokens: _Optional[int] = ..., release: _Optional[bool] = ..., status: _Optional[_Union[_common_pb2.JobStatus, str]] = ...) -> None: ...
    APPEND_RECORDS_FIELD_NUMBER: _ClassVar[int]
    PUT_SESSION_FIELD_NUMBER: _ClassVar[int]
    PUT_SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PUT_INSIGHT_FIELD_NUMBER: _ClassVar[int]
    CLEAR_INSIGHT_FIELD_NUMBER: _ClassVar[int]
    PUT_MEMORY_FIELD_NUMBER: _ClassVar[int]
    PUT_COMPRESSION_CACHE_FIELD_NUMBER: _ClassVar[int]
    TRIM_RECORDS_FIELD_NUMBER: _ClassVar[int]
    BUMP_TURN_FIELD_NUMBER: _ClassVar[int]
    RELEASE_TURN_FIELD_NUMBER: _ClassVar[int]
    REMEMBER_RESULT_FIELD_NUMBER: _ClassVar[int]
    INHERIT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    COPY_SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_JOB_FIELD_NUMBER: _ClassVar[int]
    append_records: Operation.AppendRecordsOp
    put_session: Operation.PutSessionOp
    put_system_prompt: Operation.PutSystemPromptOp
    put_insight: Operation.PutInsightOp
    clear_insight: Operation.ClearInsightOp
    put_memory: Operation.PutMemoryOp
    put_compression_cache: Operation.PutCompressionCacheOp
    trim_records: Operation.TrimRecordsOp
    bump_turn: Operation.BumpTurnOp
    release_turn: Operation.ReleaseTurnOp
    remember_result: Operation.RememberResultOp
    inherit_records: Operation.InheritRecordsOp
    copy_system_prompt: Operation.CopySystemPromptOp
    update_job: Operation.UpdateJobOp
    def __init__(self, append_records: _Optional[_Union[Operation.AppendRecordsOp, _Mapping]] = ..., put_session: _Optional[_Union[Operation.PutSessionOp, _Mapping]] = ..., put_system_prompt: _Optional[_Union[Operation.PutSystemPromptOp, _Mapping]] = ..., put_insight: _Optional[_Union[Operation.PutInsightOp, _Mapping]] = ..., clear_insight: _Optional[_Union[Operation.ClearInsightOp, _Mapping]] = ..., put_memory: _Optional[_Union[Operation.PutMemoryOp, _Mapping]] = ..., put_compression_cache: _Optional[_Union[Operation.PutCompressionCacheOp, _Mapping]] = ..., trim_records: _Optional[_Union[Operation.TrimRecordsOp, _Mapping]] = ..., bump_turn: _Optional[_Union[Operation.BumpTurnOp, _Mapping]] = ..., release_turn: _Optional[_Union[Operation.ReleaseTurnOp, _Mapping]] = ..., remember_result: _Optional[_Union[Operation.RememberResultOp, _Mapping]] = ..., inherit_records: _Optional[_Union[Operation.InheritRecordsOp, _Mapping]] = ..., copy_system_prompt: _Optional[_Union[Operation.CopySystemPromptOp, _Mapping]] = ..., update_job: _Optional[_Union[Operation.UpdateJobOp, _Mapping]] = ...) -> None: ...

class OperationResult(_message.Message):
    __slots__ = ("append_records", "put_session", "put_system_prompt", "put_insight", "clear_insight", "put_memory", "put_compression_cache", "trim_records", "bump_turn", "release_turn", "remember_result", "inherit_records", "copy_system_prompt", "update_job")
    class AppendRecordsResult(_message.Message):
        __slots__ = ("records",)
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
        def __init__(self, records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ...) -> None: ...
    class PutSessionResult(_message.Message):
        __slots__ = ("session",)
        SESSION_FIELD_NUMBER: _ClassVar[int]
        session: _common_pb2.SessionMeta
        def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ...) -> None: ...
    class PutSystemPromptResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class PutInsightResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class ClearInsightResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class PutMemoryResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class PutCompressionCacheResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class TrimRecordsResult(_message.Message):
        __slots__ = ("removed_count",)
        REMOVED_COUNT_FIELD_NUMBER: _ClassVar[int]
        removed_count: int
        def __init__(self, removed_count: _Optional[int] = ...) -> None: ...
    class BumpTurnResult(_message.Message):
        __slots__ = ("session",)
        SESSION_FIELD_NUMBER: _ClassVar[int]
        session: _common_pb2.SessionMeta
        def __init__(self, session: _Optional[_Union[_common_pb2.SessionMeta, _Mapping]] = ...) -> None: ...
    class ReleaseTurnResult(_message.Message):
        __slots__ = ("released",)
        RELEASED_FIELD_NUMBER: _ClassVar[int]
        released: bool
        def __init__(self, released: _Optional[bool] = ...) -> None: ...
    class RememberResultResult(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class InheritRecordsResult(_message.Message):
        __slots__ = ("until_seq",)
        UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
        until_seq: int
        def __init__(self, until_seq: _Optional[int] = ...) -> None: ...
    class CopySystemPromptResult(_message.Message):
        __slots__ = ("copied",)
        COPIED_FIELD_NUMBER: _ClassVar[int]
        copied: bool
        def __init__(self, copied: _Optional[bool] = ...) -> None: ...
    class UpdateJobResult(_message.Message):
        __slots__ = ("updated",)
        UPDATED_FIELD_NUMBER: _ClassVar[int]
        updated: bool
        def __init__(self, updated: _Optional[bool] = ...) -> None: ...
    APPEND_RECORDS_FIELD_NUMBER: _ClassVar[int]
    PUT_SESSION_FIELD_NUMBER: _ClassVar[int]
    PUT_SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PUT_INSIGHT_FIELD_NUMBER: _ClassVar[int]
    CLEAR_INSIGHT_FIELD_NUMBER: _ClassVar[int]
    PUT_MEMORY_FIELD_NUMBER: _ClassVar[int]
    PUT_COMPRESSION_CACHE_FIELD_NUMBER: _ClassVar[int]
    TRIM_RECORDS_FIELD_NUMBER: _ClassVar[int]
    BUMP_TURN_FIELD_NUMBER: _ClassVar[int]
    RELEASE_TURN_FIELD_NUMBER: _ClassVar[int]
    REMEMBER_RESULT_FIELD_NUMBER: _ClassVar[int]
    INHERIT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    COPY_SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_JOB_FIELD_NUMBER: _ClassVar[int]
    append_records: OperationResult.AppendRecordsResult
    put_session: OperationResult.PutSessionResult
    put_system_prompt: OperationResult.PutSystemPromptResult
    put_insight: OperationResult.PutInsightResult
    clear_insight: OperationResult.ClearInsightResult
    put_memory: OperationResult.PutMemoryResult
    put_compression_cache: OperationResult.PutCompressionCacheResult
    trim_records: OperationResult.TrimRecordsResult
    bump_turn: OperationResult.BumpTurnResult
    release_turn: OperationResult.ReleaseTurnResult
    remember_result: OperationResult.RememberResultResult
    inherit_records: OperationResult.InheritRecordsResult
    copy_system_prompt: OperationResult.CopySystemPromptResult
    update_job: OperationResult.UpdateJobResult
    def __init__(self, append_records: _Optional[_Union[OperationResult.AppendRecordsResult, _Mapping]] = ..., put_session: _Optional[_Union[OperationResult.PutSessionResult, _Mapping]] = ..., put_system_prompt: _Optional[_Union[OperationResult.PutSystemPromptResult, _Mapping]] = ..., put_insight: _Optional[_Union[OperationResult.PutInsightResult, _Mapping]] = ..., clear_insight: _Optional[_Union[OperationResult.ClearInsightResult, _Mapping]] = ..., put_memory: _Optional[_Union[OperationResult.PutMemoryResult, _Mapping]] = ..., put_compression_cache: _Optional[_Union[OperationResult.PutCompressionCacheResult, _Mapping]] = ..., trim_records: _Optional[_Union[OperationResult.TrimRecordsResult, _Mapping]] = ..., bump_turn: _Optional[_Union[OperationResult.BumpTurnResult, _Mapping]] = ..., release_turn: _Optional[_Union[OperationResult.ReleaseTurnResult, _Mapping]] = ..., remember_result: _Optional[_Union[OperationResult.RememberResultResult, _Mapping]] = ..., inherit_records: _Optional[_Union[OperationResult.InheritRecordsResult, _Mapping]] = ..., copy_system_prompt: _Optional[_Union[OperationResult.CopySystemPromptResult, _Mapping]] = ..., update_job: _Optional[_Union[OperationResult.UpdateJobResult, _Mapping]] = ...) -> None: ...

class ReadEventsRequest(_message.Message):
    __slots__ = ("space_id", "after_position", "limit")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_POSITION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    after_position: int
    limit: int
    def __init__(self, space_id: _Optional[str] = ..., after_position: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadEventsResponse(_message.Message):
    __slots__ = ("events", "last_position")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LAST_POSITION_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_common_pb2.SpaceEvent]
    last_position: int
    def __init__(self, events: _Optional[_Iterable[_Union[_common_pb2.SpaceEvent, _Mapping]]] = ..., last_position: _Optional[int] = ...) -> None: ...

class ListOrphanedJobsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class OrphanedJob(_message.Message):
    __slots__ = ("space_id", "session_id", "kind", "job")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    kind: _common_pb2.JobKind
    job: _common_pb2.BackgroundJob
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.JobKind, str]] = ..., job: _Optional[_Union[_common_pb2.BackgroundJob, _Mapping]] = ...) -> None: ...

class ListOrphanedJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[OrphanedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[OrphanedJob, _Mapping]]] = ...) -> None: ...
