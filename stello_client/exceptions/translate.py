"""The one translation from a grpc error into the SDK's classes (`from_rpc_error`), and
the texts it says instead of gRPC's own for the transport's limits.

A reason picks its class only when that class is one of the status's (`error_class`), so
a gateway that sends a reason under an unexpected status still raises by the status.
"""

from __future__ import annotations

import grpc

from stello import reasons
from stello.errors import (
    error_info_metadata,
    error_info_reason,
    field_violations,
    metadata_too_large,
    reply_too_large,
    retry_delay,
)
from stello_client.exceptions.access import PermissionDenied, Unauthenticated
from stello_client.exceptions.base import FieldViolation, RpcError
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
from stello_client.exceptions.transport import (
    Cancelled,
    DeadlineExceeded,
    Internal,
    LlmTimeout,
    LlmUnavailable,
    OutcomeUnknown,
    Unavailable,
)

BY_CODE: dict[grpc.StatusCode, type[RpcError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        Aborted,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
        Unauthenticated,
        PermissionDenied,
        Cancelled,
        OutOfRange,
        Internal,
    )
}
BY_REASON: dict[str, type[RpcError]] = {
    reasons.REQUEST_ID_REUSED: RequestIdReused,
    reasons.REQUEST_ERASED: RequestErased,
    reasons.SESSION_NOT_FOUND: SessionNotFound,
    reasons.SPACE_NOT_FOUND: SpaceNotFound,
    reasons.SHARED_MEMORY_ENTRY_NOT_FOUND: SharedMemoryEntryNotFound,
    reasons.SESSION_ARCHIVED: SessionArchived,
    reasons.TREE_TOO_LARGE: TreeTooLarge,
    reasons.SEARCH_TOO_BROAD: SearchTooBroad,
    reasons.PROFILE_NOT_FOUND: ProfileNotFound,
    reasons.NO_PENDING_TOOL_CALLS: NoPendingToolCalls,
    reasons.WINDOW_TOO_SMALL: WindowTooSmall,
    reasons.CURSOR_EXPIRED: CursorExpired,
    reasons.NO_RETENTION_POLICY: NoRetentionPolicy,
    reasons.SESSION_NOT_EMPTY: SessionNotEmpty,
    reasons.REF_TO_SELF: RefToSelf,
    reasons.REF_TO_ANCESTOR: RefToAncestor,
    reasons.REF_TO_DESCENDANT: RefToDescendant,
    reasons.PROVIDER_NOT_CONFIGURED: ProviderNotConfigured,
    reasons.LLM_API_KEY_MISSING: LlmApiKeyMissing,
    reasons.LLM_API_KEY_REJECTED: LlmApiKeyRejected,
    reasons.LLM_MODEL_NOT_FOUND: LlmModelNotFound,
    reasons.LLM_REQUEST_REJECTED: LlmRequestRejected,
    reasons.TURN_IN_PROGRESS: TurnInProgress,
    reasons.TURN_INTERRUPTED: TurnInterrupted,
    reasons.TURN_QUEUE_FULL: TurnQueueFull,
    reasons.SPACE_BUSY: SpaceBusy,
    reasons.SHARED_MEMORY_FULL: SharedMemoryFull,
    reasons.OUTCOME_UNKNOWN: OutcomeUnknown,
    reasons.CONCURRENT_MODIFICATION: ConcurrentModification,
    reasons.TOOL_ROUNDS_EXCEEDED: ToolRoundsExceeded,
    reasons.CONTEXT_TOO_LARGE: ContextTooLarge,
    reasons.LLM_RATE_LIMITED: LlmRateLimited,
    reasons.LLM_ANSWER_TOO_LARGE: LlmAnswerTooLarge,
    reasons.LLM_UNAVAILABLE: LlmUnavailable,
    reasons.LLM_TIMEOUT: LlmTimeout,
}


def error_class(code: grpc.StatusCode, reason: str | None) -> type[RpcError]:
    """The class of a failure: the reason's when it is one of `code`'s, else the code's."""
    by_code = BY_CODE.get(code, Internal)
    by_reason = BY_REASON.get(reason or "")
    return by_reason if by_reason is not None and issubclass(by_reason, by_code) else by_code


def from_rpc_error(
    error: grpc.aio.AioRpcError, *, method: str = "", request_id: str = ""
) -> RpcError:
    """The SDK exception of a failed grpc call (its reason and field violations read)."""
    code = error.code()
    reason = error_info_reason(error)
    violations = [FieldViolation(v.field, v.description) for v in field_violations(error)]
    return error_class(code, reason)(
        _transport_text(error),
        code=code,
        reason=reason,
        info=error_info_metadata(error),
        retry_after_s=retry_delay(error),
        request_id=request_id,
        method=method,
        violations=violations,
        cause=error,
    )


def _transport_text(error: grpc.aio.AioRpcError) -> str:
    """The error's message: ours for a limit of the transport, else the gateway's."""
    if metadata_too_large(error):
        return OVERSIZED_METADATA
    if not reply_too_large(error):
        return error.details() or ""
    if GRPC_SENT_TOO_LARGE in (error.details() or ""):
        return OVERSIZED_REQUEST
    return OVERSIZED_REPLY


GRPC_SENT_TOO_LARGE = "Sent message larger than max"
"""How gRPC says that this client refused to send a request over its own message limit
("CLIENT: Sent message larger than max (100114 vs. 65536)")."""
OVERSIZED_REQUEST = (
    "the request was larger than this client's gRPC message limit (max_message_bytes): "
    "send less at once (fewer or smaller records, a shorter text), or raise the limit"
)
"""What a request this client would not send says instead of gRPC's own text."""
OVERSIZED_REPLY = (
    "a message of this call was larger than a gRPC message limit: the reply, over this "
    "client's max_message_bytes, or the request, over the gateway's STELLO_MAX_MESSAGE_BYTES; "
    "ask for or send less at once (a smaller page, limit or depth; fewer records), or raise "
    "the limit"
)
"""What a RESOURCE_EXHAUSTED of the transport says instead of gRPC's own text (gRPC says
"Received message larger than max" on either side: the gateway refusing the request, or
this client the reply)."""
OVERSIZED_METADATA = (
    "a call's headers (its API key, request id) or its reply's were larger than gRPC's "
    "metadata limit, which STELLO_MAX_MESSAGE_BYTES does not govern: check that the API key "
    "is the one Stello printed (a key is 63 characters) and send shorter values"
)
"""What a RESOURCE_EXHAUSTED of gRPC's metadata limit says instead of gRPC's own text."""
GRPC_DEADLINES = frozenset({"Deadline Exceeded", "Stream removed (Deadline Exceeded)"})
"""What gRPC itself says when a call's deadline passes (the second: a stream that had begun
to answer; the gateway's own DEADLINE_EXCEEDED says what passed and what was written); the
SDK says what it means instead (`stello_client.calls.deadline_passed`)."""
