"""What the SDK raises: one class per gRPC status, a subclass per stable ErrorInfo reason.

The tree::

    StelloClientError                 anything the SDK raises
    ├── ConfigurationError            no gateway or key, a space the key does not reach
    └── RpcError                      a call failed: code, reason, details, request_id
        ├── InvalidArgument           .field (first violation), .violations
        ├── NotFound
        │   └── RequestErased, SessionNotFound, SpaceNotFound, SharedMemoryEntryNotFound
        ├── AlreadyExists
        │   └── RequestIdReused
        ├── FailedPrecondition
        │   ├── SessionArchived, TreeTooLarge, SearchTooBroad, ProfileNotFound,
        │   ├── NoPendingToolCalls,
        │   ├── WindowTooSmall, CursorExpired, NoRetentionPolicy, SessionNotEmpty,
        │   ├── RefToSelf, RefToAncestor,
        │   ├── RefToDescendant, ProviderNotConfigured, LlmApiKeyMissing,
        │   └── LlmApiKeyRejected, LlmModelNotFound, LlmRequestRejected
        ├── Aborted
        │   ├── TurnInProgress
        │   ├── TurnInterrupted
        │   └── ConcurrentModification
        ├── ResourceExhausted
        │   └── ToolRoundsExceeded, ContextTooLarge, LlmRateLimited, TurnQueueFull,
        │       SharedMemoryFull, LlmAnswerTooLarge, SpaceBusy
        ├── Unavailable
        │   └── LlmUnavailable, OutcomeUnknown
        ├── DeadlineExceeded
        │   └── LlmTimeout
        ├── OutOfRange                .field (first violation), .violations
        ├── Unauthenticated, PermissionDenied, Cancelled
        └── Internal                  INTERNAL, UNKNOWN, and any status not above

A program branches on the class (``except TurnInProgress``), never on the
message: the classes follow `stello.reasons`, which never change. A reason
this SDK does not know yet (a newer gateway) raises its status's class with
`reason` set. `from_rpc_error` is the one translation from a grpc error.

The classes live by family: `base` (the roots), `request`, `state`, `contention`,
`transport`, `access`; `translate` holds `from_rpc_error` and the maps it reads. This
module is their one public home: import them from here.
"""

from __future__ import annotations

from stello_client.exceptions.access import PermissionDenied, Unauthenticated
from stello_client.exceptions.base import (
    ConfigurationError,
    FieldError,
    FieldViolation,
    RpcError,
    StelloClientError,
    _rebuilt,  # noqa: F401 (pickles made before the split name it here)
)
from stello_client.exceptions.contention import (
    Aborted,
    ConcurrentModification,
    ContextTooLarge,
    LlmAnswerTooLarge,
    LlmRateLimited,
    ResourceExhausted,
    SharedMemoryFull,
    SpaceBusy,
    ToolRoundsExceeded,
    TurnInProgress,
    TurnInterrupted,
    TurnQueueFull,
)
from stello_client.exceptions.request import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    OutOfRange,
    RequestErased,
    RequestIdReused,
    SessionNotFound,
    SharedMemoryEntryNotFound,
    SpaceNotFound,
)
from stello_client.exceptions.state import (
    CursorExpired,
    FailedPrecondition,
    LlmApiKeyMissing,
    LlmApiKeyRejected,
    LlmModelNotFound,
    LlmRequestRejected,
    NoPendingToolCalls,
    NoRetentionPolicy,
    ProfileNotFound,
    ProviderNotConfigured,
    RefToAncestor,
    RefToDescendant,
    RefToSelf,
    SearchTooBroad,
    SessionArchived,
    SessionNotEmpty,
    TreeTooLarge,
    WindowTooSmall,
)
from stello_client.exceptions.translate import (
    BY_CODE,
    BY_REASON,
    GRPC_DEADLINES,
    GRPC_SENT_TOO_LARGE,
    OVERSIZED_METADATA,
    OVERSIZED_REPLY,
    OVERSIZED_REQUEST,
    error_class,
    from_rpc_error,
)
from stello_client.exceptions.transport import (
    Cancelled,
    DeadlineExceeded,
    Internal,
    LlmTimeout,
    LlmUnavailable,
    OutcomeUnknown,
    Unavailable,
)

__all__ = [
    "BY_CODE",
    "BY_REASON",
    "GRPC_DEADLINES",
    "GRPC_SENT_TOO_LARGE",
    "OVERSIZED_METADATA",
    "OVERSIZED_REPLY",
    "OVERSIZED_REQUEST",
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "ConcurrentModification",
    "ConfigurationError",
    "ContextTooLarge",
    "CursorExpired",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldError",
    "FieldViolation",
    "Internal",
    "InvalidArgument",
    "LlmAnswerTooLarge",
    "LlmApiKeyMissing",
    "LlmApiKeyRejected",
    "LlmModelNotFound",
    "LlmRateLimited",
    "LlmRequestRejected",
    "LlmTimeout",
    "LlmUnavailable",
    "NoPendingToolCalls",
    "NoRetentionPolicy",
    "NotFound",
    "OutOfRange",
    "OutcomeUnknown",
    "PermissionDenied",
    "ProfileNotFound",
    "ProviderNotConfigured",
    "RefToAncestor",
    "RefToDescendant",
    "RefToSelf",
    "RequestErased",
    "RequestIdReused",
    "ResourceExhausted",
    "RpcError",
    "SearchTooBroad",
    "SessionArchived",
    "SessionNotEmpty",
    "SessionNotFound",
    "SharedMemoryEntryNotFound",
    "SharedMemoryFull",
    "SpaceBusy",
    "SpaceNotFound",
    "StelloClientError",
    "ToolRoundsExceeded",
    "TreeTooLarge",
    "TurnInProgress",
    "TurnInterrupted",
    "TurnQueueFull",
    "Unauthenticated",
    "Unavailable",
    "WindowTooSmall",
    "error_class",
    "from_rpc_error",
]
