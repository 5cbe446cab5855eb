from stello.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateSessionRequest(_message.Message):
    __slots__ = ("space_id", "parent_id", "label", "source_session_id", "config", "provisional", "request_id", "metadata", "copy_source_metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PROVISIONAL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COPY_SOURCE_METADATA_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    parent_id: str
    label: str
    source_session_id: str
    config: _common_pb2.SessionConfig
    provisional: bool
    request_id: str
    metadata: _containers.ScalarMap[str, str]
    copy_source_metadata: bool
    def __init__(self, space_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., label: _Optional[str] = ..., source_session_id: _Optional[str] = ..., config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ..., provisional: _Optional[bool] = ..., request_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., copy_source_metadata: _Optional[bool] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

class CommitSessionRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class CommitSessionResponse(_message.Message):
    __slots__ = ("node", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetNodeRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "include_config")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    include_config: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., include_config: _Optional[bool] = ...) -> None: ...

class GetNodeResponse(_message.Message):
    __slots__ = ("node", "config", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    config: _common_pb2.SessionConfig
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ..., config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListRootsRequest(_message.Message):
    __slots__ = ("space_id",)
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    def __init__(self, space_id: _Optional[str] = ...) -> None: ...

class ListRootsResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopologyNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TopologyNode, _Mapping]]] = ...) -> None: ...

class ListAllRequest(_message.Message):
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

class ListAllResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_common_pb2.SessionSummary]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[_common_pb2.SessionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetChildrenRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetChildrenResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopologyNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TopologyNode, _Mapping]]] = ...) -> None: ...

class GetSiblingsRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetSiblingsResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopologyNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TopologyNode, _Mapping]]] = ...) -> None: ...

class GetAncestorsRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetAncestorsResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopologyNode]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TopologyNode, _Mapping]]] = ...) -> None: ...

class ListAncestorsRequest(_message.Message):
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

class ListAncestorsResponse(_message.Message):
    __slots__ = ("nodes", "next_page_token")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.TreeNode]
    next_page_token: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.TreeNode, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

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

class AddRefRequest(_message.Message):
    __slots__ = ("space_id", "from_id", "to_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    from_id: str
    to_id: str
    def __init__(self, space_id: _Optional[str] = ..., from_id: _Optional[str] = ..., to_id: _Optional[str] = ...) -> None: ...

class AddRefResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

class RemoveRefRequest(_message.Message):
    __slots__ = ("space_id", "from_id", "to_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    from_id: str
    to_id: str
    def __init__(self, space_id: _Optional[str] = ..., from_id: _Optional[str] = ..., to_id: _Optional[str] = ...) -> None: ...

class RemoveRefResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

class ArchiveRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "without_links")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_LINKS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    without_links: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., without_links: _Optional[bool] = ...) -> None: ...

class ArchiveResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

class UnarchiveRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "without_links")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_LINKS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    without_links: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., without_links: _Optional[bool] = ...) -> None: ...

class UnarchiveResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

class UpdateLabelRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "label", "without_links")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_LINKS_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    label: str
    without_links: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., label: _Optional[str] = ..., without_links: _Optional[bool] = ...) -> None: ...

class UpdateLabelResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _common_pb2.TopologyNode
    def __init__(self, node: _Optional[_Union[_common_pb2.TopologyNode, _Mapping]] = ...) -> None: ...

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

class GetConfigRequest(_message.Message):
    __slots__ = ("space_id", "session_id")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class GetConfigResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _common_pb2.SessionConfig
    def __init__(self, config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ...) -> None: ...

class PutConfigRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "config")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    config: _common_pb2.SessionConfig
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ...) -> None: ...

class PutConfigResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _common_pb2.SessionConfig
    def __init__(self, config: _Optional[_Union[_common_pb2.SessionConfig, _Mapping]] = ...) -> None: ...

class DeleteSubtreeRequest(_message.Message):
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

class DeleteSubtreeResponse(_message.Message):
    __slots__ = ("deleted_ids", "deleted_count")
    DELETED_IDS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    deleted_ids: _containers.RepeatedScalarFieldContainer[str]
    deleted_count: int
    def __init__(self, deleted_ids: _Optional[_Iterable[str]] = ..., deleted_count: _Optional[int] = ...) -> None: ...

class SweepProvisionalRequest(_message.Message):
    __slots__ = ("older_than_s", "dry_run")
    OLDER_THAN_S_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    older_than_s: int
    dry_run: bool
    def __init__(self, older_than_s: _Optional[int] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class SweepProvisionalResponse(_message.Message):
    __slots__ = ("removed_ids",)
    REMOVED_IDS_FIELD_NUMBER: _ClassVar[int]
    removed_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, removed_ids: _Optional[_Iterable[str]] = ...) -> None: ...

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

class SetPinnedRequest(_message.Message):
    __slots__ = ("space_id", "session_id", "pinned")
    SPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    space_id: str
    session_id: str
    pinned: bool
    def __init__(self, space_id: _Optional[str] = ..., session_id: _Optional[str] = ..., pinned: _Optional[bool] = ...) -> None: ...

class SetPinnedResponse(_message.Message):
    __slots__ = ("pinned",)
    PINNED_FIELD_NUMBER: _ClassVar[int]
    pinned: bool
    def __init__(self, pinned: _Optional[bool] = ...) -> None: ...
