import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATUS_UNSPECIFIED: _ClassVar[SessionStatus]
    SESSION_STATUS_ACTIVE: _ClassVar[SessionStatus]
    SESSION_STATUS_ARCHIVED: _ClassVar[SessionStatus]

class RecordRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECORD_ROLE_UNSPECIFIED: _ClassVar[RecordRole]
    RECORD_ROLE_SYSTEM: _ClassVar[RecordRole]
    RECORD_ROLE_USER: _ClassVar[RecordRole]
    RECORD_ROLE_ASSISTANT: _ClassVar[RecordRole]
    RECORD_ROLE_TOOL: _ClassVar[RecordRole]

class ForkContext(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORK_CONTEXT_UNSPECIFIED: _ClassVar[ForkContext]
    FORK_CONTEXT_NONE: _ClassVar[ForkContext]
    FORK_CONTEXT_INHERIT: _ClassVar[ForkContext]
    FORK_CONTEXT_COMPRESS: _ClassVar[ForkContext]

class BusyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUSY_POLICY_UNSPECIFIED: _ClassVar[BusyPolicy]
    BUSY_POLICY_REJECT: _ClassVar[BusyPolicy]
    BUSY_POLICY_ENQUEUE: _ClassVar[BusyPolicy]
    BUSY_POLICY_INTERRUPT: _ClassVar[BusyPolicy]
    BUSY_POLICY_ROLLBACK: _ClassVar[BusyPolicy]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_SESSION_COMMITTED: _ClassVar[EventKind]
    EVENT_KIND_SESSION_UPDATED: _ClassVar[EventKind]
    EVENT_KIND_SESSION_ARCHIVED: _ClassVar[EventKind]
    EVENT_KIND_SESSION_UNARCHIVED: _ClassVar[EventKind]
    EVENT_KIND_SUBTREE_DELETED: _ClassVar[EventKind]
    EVENT_KIND_RECORDS_APPENDED: _ClassVar[EventKind]
    EVENT_KIND_RECORDS_TRIMMED: _ClassVar[EventKind]
    EVENT_KIND_TURN_COMMITTED: _ClassVar[EventKind]
    EVENT_KIND_SYSTEM_PROMPT_PUT: _ClassVar[EventKind]
    EVENT_KIND_INSIGHT_PUT: _ClassVar[EventKind]
    EVENT_KIND_INSIGHT_CLEARED: _ClassVar[EventKind]
    EVENT_KIND_MEMORY_PUT: _ClassVar[EventKind]
    EVENT_KIND_CONFIG_PUT: _ClassVar[EventKind]
    EVENT_KIND_REF_ADDED: _ClassVar[EventKind]
    EVENT_KIND_REF_REMOVED: _ClassVar[EventKind]
    EVENT_KIND_SHARED_MEMORY_UPSERTED: _ClassVar[EventKind]
    EVENT_KIND_SHARED_MEMORY_REMOVED: _ClassVar[EventKind]
    EVENT_KIND_TURN_RELEASED: _ClassVar[EventKind]
    EVENT_KIND_METADATA_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_RETENTION_POLICY_PUT: _ClassVar[EventKind]

class JobKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_KIND_UNSPECIFIED: _ClassVar[JobKind]
    JOB_KIND_CONSOLIDATE: _ClassVar[JobKind]
    JOB_KIND_FOLD: _ClassVar[JobKind]

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_RUNNING: _ClassVar[JobStatus]
    JOB_STATUS_DONE: _ClassVar[JobStatus]
    JOB_STATUS_BUDGET_SPENT: _ClassVar[JobStatus]
    JOB_STATUS_STOPPED: _ClassVar[JobStatus]
    JOB_STATUS_FAILED: _ClassVar[JobStatus]

class SearchOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_ORDER_UNSPECIFIED: _ClassVar[SearchOrder]
    SEARCH_ORDER_NEWEST: _ClassVar[SearchOrder]
    SEARCH_ORDER_RELEVANCE: _ClassVar[SearchOrder]
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_ACTIVE: SessionStatus
SESSION_STATUS_ARCHIVED: SessionStatus
RECORD_ROLE_UNSPECIFIED: RecordRole
RECORD_ROLE_SYSTEM: RecordRole
RECORD_ROLE_USER: RecordRole
RECORD_ROLE_ASSISTANT: RecordRole
RECORD_ROLE_TOOL: RecordRole
FORK_CONTEXT_UNSPECIFIED: ForkContext
FORK_CONTEXT_NONE: ForkContext
FORK_CONTEXT_INHERIT: ForkContext
FORK_CONTEXT_COMPRESS: ForkContext
BUSY_POLICY_UNSPECIFIED: BusyPolicy
BUSY_POLICY_REJECT: BusyPolicy
BUSY_POLICY_ENQUEUE: BusyPolicy
BUSY_POLICY_INTERRUPT: BusyPolicy
BUSY_POLICY_ROLLBACK: BusyPolicy
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_SESSION_COMMITTED: EventKind
EVENT_KIND_SESSION_UPDATED: EventKind
EVENT_KIND_SESSION_ARCHIVED: EventKind
EVENT_KIND_SESSION_UNARCHIVED: EventKind
EVENT_KIND_SUBTREE_DELETED: EventKind
EVENT_KIND_RECORDS_APPENDED: EventKind
EVENT_KIND_RECORDS_TRIMMED: EventKind
EVENT_KIND_TURN_COMMITTED: EventKind
EVENT_KIND_SYSTEM_PROMPT_PUT: EventKind
EVENT_KIND_INSIGHT_PUT: EventKind
EVENT_KIND_INSIGHT_CLEARED: EventKind
EVENT_KIND_MEMORY_PUT: EventKind
EVENT_KIND_CONFIG_PUT: EventKind
EVENT_KIND_REF_ADDED: EventKind
EVENT_KIND_REF_REMOVED: EventKind
EVENT_KIND_SHARED_MEMORY_UPSERTED: EventKind
EVENT_KIND_SHARED_MEMORY_REMOVED: EventKind
EVENT_KIND_TURN_RELEASED: EventKind
EVENT_KIND_METADATA_CHANGED: EventKind
EVENT_KIND_RETENTION_POLICY_PUT: EventKind
JOB_KIND_UNSPECIFIED: JobKind
JOB_KIND_CONSOLIDATE: JobKind
JOB_KIND_FOLD: JobKind
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_RUNNING: JobStatus
JOB_STATUS_DONE: JobStatus
JOB_STATUS_BUDGET_SPENT: JobStatus
JOB_STATUS_STOPPED: JobStatus
JOB_STATUS_FAILED: JobStatus
SEARCH_ORDER_UNSPECIFIED: SearchOrder
SEARCH_ORDER_NEWEST: SearchOrder
SEARCH_ORDER_RELEVANCE: SearchOrder

class SessionMeta(_message.Message):
    __slots__ = ("id", "label", "status", "turn_count", "created_at", "updated_at", "last_active_at", "pinned")
    ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    id: str
    label: str
    status: SessionStatus
    turn_count: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_active_at: _timestamp_pb2.Timestamp
    pinned: bool
    def __init__(self, id: _Optional[str] = ..., label: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., turn_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_active_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pinned: _Optional[bool] = ...) -> None: ...

class TopologyNode(_message.Message):
    __slots__ = ("id", "parent_id", "children", "refs", "depth", "index", "label", "source_session_id", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    REFS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    children: _containers.RepeatedScalarFieldContainer[str]
    refs: _containers.RepeatedScalarFieldContainer[str]
    depth: int
    index: int
    label: str
    source_session_id: str
    status: SessionStatus
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., children: _Optional[_Iterable[str]] = ..., refs: _Optional[_Iterable[str]] = ..., depth: _Optional[int] = ..., index: _Optional[int] = ..., label: _Optional[str] = ..., source_session_id: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ...) -> None: ...

class TreeNode(_message.Message):
    __slots__ = ("id", "parent_id", "depth", "index", "label", "status", "turn_count", "source_session_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    depth: int
    index: int
    label: str
    status: SessionStatus
    turn_count: int
    source_session_id: str
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., depth: _Optional[int] = ..., index: _Optional[int] = ..., label: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., turn_count: _Optional[int] = ..., source_session_id: _Optional[str] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ("id", "parent_id", "label", "status", "turn_count", "created_at", "updated_at", "last_active_at", "pinned", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    label: str
    status: SessionStatus
    turn_count: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_active_at: _timestamp_pb2.Timestamp
    pinned: bool
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., label: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., turn_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_active_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pinned: _Optional[bool] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SessionFilter(_message.Message):
    __slots__ = ("metadata", "label_prefix", "parent_id", "root_id", "roots_only", "created_after", "created_before", "updated_after", "updated_before")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LABEL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    ROOTS_ONLY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    metadata: _containers.ScalarMap[str, str]
    label_prefix: str
    parent_id: str
    root_id: str
    roots_only: bool
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    updated_after: _timestamp_pb2.Timestamp
    updated_before: _timestamp_pb2.Timestamp
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ..., label_prefix: _Optional[str] = ..., parent_id: _Optional[str] = ..., root_id: _Optional[str] = ..., roots_only: _Optional[bool] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("seq", "role", "content", "tool_calls", "tool_call_id", "created_at", "metadata", "inherited")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    INHERITED_FIELD_NUMBER: _ClassVar[int]
    seq: int
    role: RecordRole
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    created_at: _timestamp_pb2.Timestamp
    metadata: _struct_pb2.Struct
    inherited: bool
    def __init__(self, seq: _Optional[int] = ..., role: _Optional[_Union[RecordRole, str]] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., inherited: _Optional[bool] = ...) -> None: ...

class SkillList(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionConfig(_message.Message):
    __slots__ = ("system_prompt", "skills", "compressor_prompt", "consolidator_prompt")
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSOR_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATOR_PROMPT_FIELD_NUMBER: _ClassVar[int]
    system_prompt: str
    skills: SkillList
    compressor_prompt: str
    consolidator_prompt: str
    def __init__(self, system_prompt: _Optional[str] = ..., skills: _Optional[_Union[SkillList, _Mapping]] = ..., compressor_prompt: _Optional[str] = ..., consolidator_prompt: _Optional[str] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ("name", "description", "parameters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SessionDigest(_message.Message):
    __slots__ = ("id", "parent_id", "label", "status", "turn_count", "memory", "insight", "pinned", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    label: str
    status: SessionStatus
    turn_count: int
    memory: str
    insight: str
    pinned: bool
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., label: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., turn_count: _Optional[int] = ..., memory: _Optional[str] = ..., insight: _Optional[str] = ..., pinned: _Optional[bool] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SpaceEvent(_message.Message):
    __slots__ = ("cursor", "kind", "session_id", "other_session_id", "first_seq", "last_seq", "session_ids", "committed_at", "slug", "entry_id")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OTHER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    kind: EventKind
    session_id: str
    other_session_id: str
    first_seq: int
    last_seq: int
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    committed_at: _timestamp_pb2.Timestamp
    slug: str
    entry_id: str
    def __init__(self, cursor: _Optional[str] = ..., kind: _Optional[_Union[EventKind, str]] = ..., session_id: _Optional[str] = ..., other_session_id: _Optional[str] = ..., first_seq: _Optional[int] = ..., last_seq: _Optional[int] = ..., session_ids: _Optional[_Iterable[str]] = ..., committed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., slug: _Optional[str] = ..., entry_id: _Optional[str] = ...) -> None: ...

class SharedMemoryEntry(_message.Message):
    __slots__ = ("slug", "summary", "body", "created_at", "updated_at", "entry_id")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    slug: str
    summary: str
    body: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    entry_id: str
    def __init__(self, slug: _Optional[str] = ..., summary: _Optional[str] = ..., body: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., entry_id: _Optional[str] = ...) -> None: ...

class BackgroundJob(_message.Message):
    __slots__ = ("kind", "status", "covered_until_seq", "model_calls", "tokens", "runs", "claimed", "updated_at")
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    kind: JobKind
    status: JobStatus
    covered_until_seq: int
    model_calls: int
    tokens: int
    runs: int
    claimed: bool
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, kind: _Optional[_Union[JobKind, str]] = ..., status: _Optional[_Union[JobStatus, str]] = ..., covered_until_seq: _Optional[int] = ..., model_calls: _Optional[int] = ..., tokens: _Optional[int] = ..., runs: _Optional[int] = ..., claimed: _Optional[bool] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HistoryProgress(_message.Message):
    __slots__ = ("last_seq", "summary_covered_until_seq", "summary_lossy", "complete_summary_covered_until_seq", "memory_covered_until_seq", "memory_version", "jobs", "inherited_until_seq")
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_LOSSY_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_SUMMARY_COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    INHERITED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    last_seq: int
    summary_covered_until_seq: int
    summary_lossy: bool
    complete_summary_covered_until_seq: int
    memory_covered_until_seq: int
    memory_version: int
    jobs: _containers.RepeatedCompositeFieldContainer[BackgroundJob]
    inherited_until_seq: int
    def __init__(self, last_seq: _Optional[int] = ..., summary_covered_until_seq: _Optional[int] = ..., summary_lossy: _Optional[bool] = ..., complete_summary_covered_until_seq: _Optional[int] = ..., memory_covered_until_seq: _Optional[int] = ..., memory_version: _Optional[int] = ..., jobs: _Optional[_Iterable[_Union[BackgroundJob, _Mapping]]] = ..., inherited_until_seq: _Optional[int] = ...) -> None: ...

class RetentionPolicy(_message.Message):
    __slots__ = ("archive_after_days", "delete_after_days")
    ARCHIVE_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    DELETE_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    archive_after_days: int
    delete_after_days: int
    def __init__(self, archive_after_days: _Optional[int] = ..., delete_after_days: _Optional[int] = ...) -> None: ...

class RetentionAction(_message.Message):
    __slots__ = ("root_id", "kind", "label", "last_active_at", "session_ids")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[RetentionAction.Kind]
        KIND_ARCHIVE: _ClassVar[RetentionAction.Kind]
        KIND_DELETE: _ClassVar[RetentionAction.Kind]
    KIND_UNSPECIFIED: RetentionAction.Kind
    KIND_ARCHIVE: RetentionAction.Kind
    KIND_DELETE: RetentionAction.Kind
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    root_id: str
    kind: RetentionAction.Kind
    label: str
    last_active_at: _timestamp_pb2.Timestamp
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, root_id: _Optional[str] = ..., kind: _Optional[_Union[RetentionAction.Kind, str]] = ..., label: _Optional[str] = ..., last_active_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TextMatch(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class RecordHit(_message.Message):
    __slots__ = ("session_id", "label", "seq", "role", "created_at", "snippet", "snippet_offset", "matches", "reader_count", "rank")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    READER_COUNT_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    label: str
    seq: int
    role: RecordRole
    created_at: _timestamp_pb2.Timestamp
    snippet: str
    snippet_offset: int
    matches: _containers.RepeatedCompositeFieldContainer[TextMatch]
    reader_count: int
    rank: float
    def __init__(self, session_id: _Optional[str] = ..., label: _Optional[str] = ..., seq: _Optional[int] = ..., role: _Optional[_Union[RecordRole, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., snippet: _Optional[str] = ..., snippet_offset: _Optional[int] = ..., matches: _Optional[_Iterable[_Union[TextMatch, _Mapping]]] = ..., reader_count: _Optional[int] = ..., rank: _Optional[float] = ...) -> None: ...
