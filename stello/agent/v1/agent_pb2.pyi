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

class SystemPromptMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYSTEM_PROMPT_MODE_UNSPECIFIED: _ClassVar[SystemPromptMode]
    SYSTEM_PROMPT_MODE_PREPEND: _ClassVar[SystemPromptMode]
    SYSTEM_PROMPT_MODE_PRESET: _ClassVar[SystemPromptMode]
    SYSTEM_PROMPT_MODE_APPEND: _ClassVar[SystemPromptMode]

class KeyScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_SCOPE_UNSPECIFIED: _ClassVar[KeyScope]
    KEY_SCOPE_TENANT: _ClassVar[KeyScope]
    KEY_SCOPE_ADMIN: _ClassVar[KeyScope]
SYSTEM_PROMPT_MODE_UNSPECIFIED: SystemPromptMode
SYSTEM_PROMPT_MODE_PREPEND: SystemPromptMode
SYSTEM_PROMPT_MODE_PRESET: SystemPromptMode
SYSTEM_PROMPT_MODE_APPEND: SystemPromptMode
KEY_SCOPE_UNSPECIFIED: KeyScope
KEY_SCOPE_TENANT: KeyScope
KEY_SCOPE_ADMIN: KeyScope

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "total_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("tool_call_id", "content", "is_error")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    content: str
    is_error: bool
    def __init__(self, tool_call_id: _Optional[str] = ..., content: _Optional[str] = ..., is_error: _Optional[bool] = ...) -> None: ...

class SessionView(_message.Message):
    __slots__ = ("node", "turn_count", "created_at", "updated_at", "last_active_at", "config", "system_prompt", "memory", "insight", "progress", "pinned", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    turn_count: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_active_at: _timestamp_pb2.Timestamp
    config: _common_pb2.SessionConfig
    system_prompt: str
    memory: str
    insight: str
    progress: _common_pb2.HistoryProgress
    pinned: bool
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ..., turn_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_active_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ..., system_prompt: _Optional[str] = ..., memory: _Optional[str] = ..., insight: _Optional[str] = ..., progress: _Optional[_Union[_common_pb2.HistoryProgress, _Mapping]] = ..., pinned: _Optional[bool] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ProfileInfo(_message.Message):
    __slots__ = ("name", "system_prompt", "system_prompt_mode", "context", "prompt", "skills", "variables", "compressor_prompt", "consolidator_prompt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    COMPRESSOR_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATOR_PROMPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    system_prompt: str
    system_prompt_mode: SystemPromptMode
    context: _common_pb2.ForkContext
    prompt: str
    skills: _common_pb2.SkillList
    variables: _containers.RepeatedScalarFieldContainer[str]
    compressor_prompt: str
    consolidator_prompt: str
    def __init__(self, name: _Optional[str] = ..., system_prompt: _Optional[str] = ..., system_prompt_mode: _Optional[_Union[SystemPromptMode, str]] = ..., context: _Optional[_Union[_common_pb2.ForkContext, str]] = ..., prompt: _Optional[str] = ..., skills: _Optional[_Union[_common_pb2.SkillList, _Mapping]] = ..., variables: _Optional[_Iterable[str]] = ..., compressor_prompt: _Optional[str] = ..., consolidator_prompt: _Optional[str] = ...) -> None: ...

class CreateRootRequest(_message.Message):
    __slots__ = ("space_id", "label", "system_prompt", "skills", "profile", "profile_vars", "request_id", "metadata")
    class ProfileVarsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_VARS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    label: str
    system_prompt: str
    skills: _common_pb2.SkillList
    profile: str
    profile_vars: _containers.ScalarMap[str, str]
    request_id: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, space_id: _Optional[str] = ..., label: _Optional[str] = ..., system_prompt: _Optional[str] = ..., skills: _Optional[_Union[_common_pb2.SkillList, _Mapping]] = ..., profile: _Optional[str] = ..., profile_vars: _Optional[_Mapping[str, str]] = ..., request_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateRootResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class ForkRequest(_message.Message):
    __slots__ = ("space_id", "source_session_id", "label", "topology_parent_id", "profile", "profile_vars", "system_prompt", "skills", "context", "inherit_until_seq", "prompt", "request_id", "metadata", "copy_metadata")
    class ProfileVarsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_VARS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INHERIT_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COPY_METADATA_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    source_session_id: str
    label: str
    topology_parent_id: str
    profile: str
    profile_vars: _containers.ScalarMap[str, str]
    system_prompt: str
    skills: _common_pb2.SkillList
    context: _common_pb2.ForkContext
    inherit_until_seq: int
    prompt: str
    request_id: str
    metadata: _containers.ScalarMap[str, str]
    copy_metadata: bool
    def __init__(self, space_id: _Optional[str] = ..., source_session_id: _Optional[str] = ..., label: _Optional[str] = ..., topology_parent_id: _Optional[str] = ..., profile: _Optional[str] = ..., profile_vars: _Optional[_Mapping[str, str]] = ..., system_prompt: _Optional[str] = ..., skills: _Optional[_Union[_common_pb2.SkillList, _Mapping]] = ..., context: _Optional[_Union[_common_pb2.ForkContext, str]] = ..., inherit_until_seq: _Optional[int] = ..., prompt: _Optional[str] = ..., request_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., copy_metadata: _Optional[bool] = ...) -> None: ...

class ForkResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content", "tools", "request_id", "memory_tools", "busy")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOOLS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolDefinition]
    request_id: str
    memory_tools: bool
    busy: _common_pb2.BusyPolicy
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.ToolDefinition, _Mapping]]] = ..., request_id: _Optional[str] = ..., memory_tools: _Optional[bool] = ..., busy: _Optional[_Union[_common_pb2.BusyPolicy, str]] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("assistant", "records", "pending_tool_calls", "usage")
    ASSISTANT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    assistant: _common_pb2.Record
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    pending_tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    usage: Usage
    def __init__(self, assistant: _Optional[_Union[_common_pb2.Record, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., pending_tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class SendStreamRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content", "tools", "request_id", "memory_tools", "busy")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOOLS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolDefinition]
    request_id: str
    memory_tools: bool
    busy: _common_pb2.BusyPolicy
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.ToolDefinition, _Mapping]]] = ..., request_id: _Optional[str] = ..., memory_tools: _Optional[bool] = ..., busy: _Optional[_Union[_common_pb2.BusyPolicy, str]] = ...) -> None: ...

class SendStreamResponse(_message.Message):
    __slots__ = ("text_delta", "tool_call", "done")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    text_delta: TextDelta
    tool_call: _common_pb2.ToolCall
    done: SendResponse
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_call: _Optional[_Union[_common_pb2.ToolCall, _Mapping]] = ..., done: _Optional[_Union[SendResponse, _Mapping]] = ...) -> None: ...

class SubmitToolResultsRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "results", "tools", "request_id", "memory_tools", "busy")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOOLS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolDefinition]
    request_id: str
    memory_tools: bool
    busy: _common_pb2.BusyPolicy
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.ToolDefinition, _Mapping]]] = ..., request_id: _Optional[str] = ..., memory_tools: _Optional[bool] = ..., busy: _Optional[_Union[_common_pb2.BusyPolicy, str]] = ...) -> None: ...

class SubmitToolResultsResponse(_message.Message):
    __slots__ = ("assistant", "records", "pending_tool_calls", "usage")
    ASSISTANT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    PENDING_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    assistant: _common_pb2.Record
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    pending_tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    usage: Usage
    def __init__(self, assistant: _Optional[_Union[_common_pb2.Record, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., pending_tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class SubmitToolResultsStreamRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "results", "tools", "request_id", "memory_tools", "busy")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOOLS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolDefinition]
    request_id: str
    memory_tools: bool
    busy: _common_pb2.BusyPolicy
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.ToolDefinition, _Mapping]]] = ..., request_id: _Optional[str] = ..., memory_tools: _Optional[bool] = ..., busy: _Optional[_Union[_common_pb2.BusyPolicy, str]] = ...) -> None: ...

class SubmitToolResultsStreamResponse(_message.Message):
    __slots__ = ("text_delta", "tool_call", "done")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    text_delta: TextDelta
    tool_call: _common_pb2.ToolCall
    done: SubmitToolResultsResponse
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_call: _Optional[_Union[_common_pb2.ToolCall, _Mapping]] = ..., done: _Optional[_Union[SubmitToolResultsResponse, _Mapping]] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ConsolidateResponse(_message.Message):
    __slots__ = ("memory", "status", "covered_until_seq", "last_seq", "model_calls")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COVERED_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    memory: str
    status: _common_pb2.JobStatus
    covered_until_seq: int
    last_seq: int
    model_calls: int
    def __init__(self, memory: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.JobStatus, str]] = ..., covered_until_seq: _Optional[int] = ..., last_seq: _Optional[int] = ..., model_calls: _Optional[int] = ...) -> None: ...

class ListSessionDigestsRequest(_message.Message):
    __slots__ = ("space_id", "status", "page_size", "page_token", "filter")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    status: _common_pb2.SessionStatus
    page_size: int
    page_token: str
    filter: _common_pb2.SessionFilter
    def __init__(self, space_id: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.SessionStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[_Union[_common_pb2.SessionFilter, _Mapping]] = ...) -> None: ...

class ListSessionDigestsResponse(_message.Message):
    __slots__ = ("digests", "next_page_token")
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    digests: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionDigest]
    next_page_token: str
    def __init__(self, digests: _Optional[_Iterable[_Union[_common_pb2.SessionDigest, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: SessionView
    def __init__(self, session: _Optional[_Union[SessionView, _Mapping]] = ...) -> None: ...

class GetLineageRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "page_size", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    page_size: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetLineageResponse(_message.Message):
    __slots__ = ("ancestors", "next_page_token")
    ANCESTORS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ancestors: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionDigest]
    next_page_token: str
    def __init__(self, ancestors: _Optional[_Iterable[_Union[_common_pb2.SessionDigest, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTreeRequest(_message.Message):
    __slots__ = ("space_id", "root_id", "max_depth")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    root_id: str
    max_depth: int
    def __init__(self, space_id: _Optional[str] = ..., root_id: _Optional[str] = ..., max_depth: _Optional[int] = ...) -> None: ...

class GetTreeResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TreeNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TreeNode, _Mapping]]] = ...) -> None: ...

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

class PutMemoryRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "content")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    content: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

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

class ArchiveRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ArchiveResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class UnarchiveRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class UnarchiveResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "count_only", "max_reply_bytes")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_ONLY_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLY_BYTES_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    count_only: bool
    max_reply_bytes: int
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., count_only: _Optional[bool] = ..., max_reply_bytes: _Optional[int] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ("deleted_ids", "deleted_count")
    DELETED_IDS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_ids: _containers.RepeatedScalarFieldContainer[str]
    deleted_count: int
    def __init__(self, deleted_ids: _Optional[_Iterable[str]] = ..., deleted_count: _Optional[int] = ...) -> None: ...

class ListProfilesRequest(_message.Message):
    __slots__ = ("space_id",)
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    def __init__(self, space_id: _Optional[str] = ...) -> None: ...

class ListProfilesResponse(_message.Message):
    __slots__ = ("profiles",)
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    profiles: _containers.RepeatedCompositeFieldContainer[ProfileInfo]
    def __init__(self, profiles: _Optional[_Iterable[_Union[ProfileInfo, _Mapping]]] = ...) -> None: ...

class SkillInfo(_message.Message):
    __slots__ = ("name", "description", "content")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    content: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ("skills",)
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    skills: _containers.RepeatedCompositeFieldContainer[SkillInfo]
    def __init__(self, skills: _Optional[_Iterable[_Union[SkillInfo, _Mapping]]] = ...) -> None: ...

class WatchSpaceRequest(_message.Message):
    __slots__ = ("space_id", "after_cursor", "kinds")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    after_cursor: str
    kinds: _containers.RepeatedScalarFieldContainer[_common_pb2.EventKind]
    def __init__(self, space_id: _Optional[str] = ..., after_cursor: _Optional[str] = ..., kinds: _Optional[_Iterable[_Union[_common_pb2.EventKind, str]]] = ...) -> None: ...

class WatchSpaceResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.SpaceEvent
    def __init__(self, event: _Optional[_Union[_common_pb2.SpaceEvent, _Mapping]] = ...) -> None: ...

class UpdateLabelRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "label")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    label: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class UpdateLabelResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class UpdateSessionMetadataRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "set", "remove")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    set: _containers.ScalarMap[str, str]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateSessionMetadataResponse(_message.Message):
    __slots__ = ("metadata",)
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResolveSessionPrefixRequest(_message.Message):
    __slots__ = ("space_id", "prefix", "limit")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    prefix: str
    limit: int
    def __init__(self, space_id: _Optional[str] = ..., prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ResolveSessionPrefixResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionSummary]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_common_pb2.SessionSummary, _Mapping]]] = ...) -> None: ...

class SpaceInfo(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "key_id", "scope", "spaces")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SPACES_FIELD_NUMBER: _ClassVar[int]
    principal: str
    key_id: str
    scope: KeyScope
    spaces: _containers.RepeatedCompositeFieldContainer[SpaceInfo]
    def __init__(self, principal: _Optional[str] = ..., key_id: _Optional[str] = ..., scope: _Optional[_Union[KeyScope, str]] = ..., spaces: _Optional[_Iterable[_Union[SpaceInfo, _Mapping]]] = ...) -> None: ...

class ImportSessionRequest(_message.Message):
    __slots__ = ("space_id", "parent_id", "source_session_id", "label", "status", "config", "system_prompt", "memory", "insight", "inherit_until_seq", "records", "turn_count", "request_id", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    INSIGHT_FIELD_NUMBER: _ClassVar[int]
    INHERIT_UNTIL_SEQ_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    parent_id: str
    source_session_id: str
    label: str
    status: _common_pb2.SessionStatus
    config: _common_pb2.SessionConfig
    system_prompt: str
    memory: str
    insight: str
    inherit_until_seq: int
    records: _containers.RepeatedCompositeFieldContainer[_common_pb2.Record]
    turn_count: int
    request_id: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, space_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., source_session_id: _Optional[str] = ..., label: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.SessionStatus, str]] = ..., config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ..., system_prompt: _Optional[str] = ..., memory: _Optional[str] = ..., insight: _Optional[str] = ..., inherit_until_seq: _Optional[int] = ..., records: _Optional[_Iterable[_Union[_common_pb2.Record, _Mapping]]] = ..., turn_count: _Optional[int] = ..., request_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ImportSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.SessionSummary
    def __init__(self, session: _Optional[_Union[_common_pb2.SessionSummary, _Mapping]] = ...) -> None: ...

class GetRetentionRequest(_message.Message):
    __slots__ = ("space_id",)
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    def __init__(self, space_id: _Optional[str] = ...) -> None: ...

class GetRetentionResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: _common_pb2.RetentionPolicy
    def __init__(self, policy: _Optional[_Union[_common_pb2.RetentionPolicy, _Mapping]] = ...) -> None: ...

class PutRetentionRequest(_message.Message):
    __slots__ = ("space_id", "policy")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    policy: _common_pb2.RetentionPolicy
    def __init__(self, space_id: _Optional[str] = ..., policy: _Optional[_Union[_common_pb2.RetentionPolicy, _Mapping]] = ...) -> None: ...

class PutRetentionResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: _common_pb2.RetentionPolicy
    def __init__(self, policy: _Optional[_Union[_common_pb2.RetentionPolicy, _Mapping]] = ...) -> None: ...

class ApplyRetentionRequest(_message.Message):
    __slots__ = ("space_id", "dry_run", "max_batches", "page_token")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    dry_run: bool
    max_batches: int
    page_token: str
    def __init__(self, space_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., max_batches: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ApplyRetentionResponse(_message.Message):
    __slots__ = ("actions", "done", "next_page_token")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[_common_pb2.RetentionAction]
    done: bool
    next_page_token: str
    def __init__(self, actions: _Optional[_Iterable[_Union[_common_pb2.RetentionAction, _Mapping]]] = ..., done: _Optional[bool] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PinSessionRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "pinned")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    pinned: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., pinned: _Optional[bool] = ...) -> None: ...

class PinSessionResponse(_message.Message):
    __slots__ = ("pinned",)
    PINNED_FIELD_NUMBER: _ClassVar[int]
    pinned: bool
    def __init__(self, pinned: _Optional[bool] = ...) -> None: ...
