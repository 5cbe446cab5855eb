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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request (google.rpc.BadRequest): its name and what is wrong."""

    field: str
    description: str


class StelloClientError(Exception):
    """Base of everything the SDK raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the message and the attributes, whatever the class's `__init__` takes
        (multiprocessing, a process pool, a task queue's results pass errors so)."""
        return _rebuilt, (type(self), self.args), self.__dict__


def _rebuilt(cls: type[StelloClientError], args: tuple[Any, ...]) -> StelloClientError:
    """An error of `cls` with `args`, its `__init__` not called (pickle then sets its
    attributes)."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class ConfigurationError(StelloClientError):
    """Raised when the client cannot be set up: no gateway address or key, unreadable TLS
    files, a space the key does not reach, or a client used on an event loop other than
    the one its channel is open on, or a sync client used in a process forked from the one
    that made it (`setting` names which: gateway, key, space, tls, loop, process)."""

    def __init__(self, message: str, *, setting: str) -> None:
        super().__init__(message)
        self.message = message
        self.setting = setting


class RpcError(StelloClientError):
    """Raised when a gateway call failed.

    Attributes:
        code: the gRPC status code.
        details: the gateway's message, for people.
        reason: the google.rpc.ErrorInfo reason (`stello.reasons`), or None.
        info: the ErrorInfo's metadata: what the reason is about (a SessionNotFound's
            ``session_id``), or {}.
        retry_after_s: how long to wait before a retry (google.rpc.RetryInfo: an LLM
            provider's Retry-After), or None.
        request_id: the id the call carried (``x-request-id``, and the request's
            own `request_id` for a write): the gateway's log lines name it.
        method: the RPC's name (``Send``).
        violations: the field violations of an INVALID_ARGUMENT, or of an OUT_OF_RANGE
            naming its field.
        cause: the grpc error itself (its trailers, for what this class does not read).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        details: str,
        *,
        code: grpc.StatusCode | None = None,
        reason: str | None = None,
        info: Mapping[str, str] | None = None,
        retry_after_s: float | None = None,
        request_id: str = "",
        method: str = "",
        violations: Sequence[FieldViolation] = (),
        cause: grpc.aio.AioRpcError | None = None,
    ) -> None:
        self.code = code or type(self).code
        self.details = details
        self.reason = reason
        self.info = dict(info or {})
        self.retry_after_s = retry_after_s
        self.request_id = request_id
        self.method = method
        self.violations = tuple(violations)
        self.cause = cause
        super().__init__(f"{self.code.name}: {details}" if details else self.code.name)


class FieldError(RpcError):
    """Base of the failures that name the request's field at fault: `field`, the first."""

    @property
    def field(self) -> str | None:
        """The first bad field (the keyword argument of the same name), or None."""
        return self.violations[0].field if self.violations else None


class InvalidArgument(FieldError):
    """Raised when the gateway refused the request's fields; `field` names the first."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RpcError):
    """Raised when a session (or entry, profile root...) is not in the space."""

    code = grpc.StatusCode.NOT_FOUND


class RequestErased(NotFound):
    """Raised when a request_id answered earlier for a session deleted since: nothing was
    done; a new request_id does the request again."""


class SessionNotFound(NotFound):
    """Raised when no session of that id is visible to the key (never made, deleted, still
    provisional, or another space's); `info["session_id"]` names it."""


class SpaceNotFound(NotFound):
    """Raised when the key reaches no space of that id (never made, deleted, or another
    tenant's); `info["space_id"]` names it."""


class SharedMemoryEntryNotFound(NotFound):
    """Raised when the space holds no shared memory entry of that slug; `info["slug"]` names
    it."""


class AlreadyExists(RpcError):
    """Raised when something of that identity exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class RequestIdReused(AlreadyExists):
    """Raised when a request_id came earlier with a different request."""


class FailedPrecondition(RpcError):
    """Raised when the state refuses the call (an archived session, an unknown profile...)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class SessionArchived(FailedPrecondition):
    """Raised when a turn, label or insight is asked of an archived session."""


class TreeTooLarge(FailedPrecondition):
    """Raised when GetTree would answer more nodes than its cap: narrow it."""


class SearchTooBroad(FailedPrecondition):
    """Raised when a search ran past the deployment's time for one: narrow it (session_id or
    root_id, more words)."""


class ProfileNotFound(FailedPrecondition):
    """Raised when no fork profile of that name is configured."""


class NoPendingToolCalls(FailedPrecondition):
    """Raised when tool results are submitted to a session waiting for none."""


class WindowTooSmall(FailedPrecondition):
    """Raised when the model's window cannot hold a compressor call."""


class NoRetentionPolicy(FailedPrecondition):
    """Raised when retention is applied to a space that has no policy: set one first."""


class CursorExpired(FailedPrecondition):
    """Raised when a watch's cursor is older than the retained events: re-read, watch anew."""


class SessionNotEmpty(FailedPrecondition):
    """Raised when a session with records is asked to inherit another's."""


class RefToSelf(FailedPrecondition):
    """Raised when a session would refer to itself."""


class RefToAncestor(FailedPrecondition):
    """Raised when a ref would point at an ancestor."""


class RefToDescendant(FailedPrecondition):
    """Raised when a ref would point at a descendant."""


class ProviderNotConfigured(FailedPrecondition):
    """Raised when the gateway has no LLM provider for the call."""


class LlmApiKeyMissing(FailedPrecondition):
    """Raised when the gateway's LLM provider needs an API key and has none."""


class LlmApiKeyRejected(FailedPrecondition):
    """Raised when the LLM provider refused the gateway's API key."""


class LlmModelNotFound(FailedPrecondition):
    """Raised when the LLM provider does not know the configured model."""


class LlmRequestRejected(FailedPrecondition):
    """Raised when the LLM provider refused the request."""


class Aborted(RpcError):
    """Raised when the call lost a race with another (nothing was written)."""

    code = grpc.StatusCode.ABORTED


class TurnInProgress(Aborted):
    """Raised when another turn holds the session's lease (retried for safe calls first)."""


class TurnInterrupted(Aborted):
    """Raised when another turn took the session over (its busy policy INTERRUPT or
    ROLLBACK) while this one ran: nothing of this turn was stored."""


class ConcurrentModification(Aborted):
    """Raised when a precondition no longer held: read again, then retry."""


class ResourceExhausted(RpcError):
    """Raised when a limit was reached (a reply too large, a rate limit, the tool rounds)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class ToolRoundsExceeded(ResourceExhausted):
    """Raised when the model kept calling built-in tools past the configured rounds."""


class ContextTooLarge(ResourceExhausted):
    """Raised when the turn's fixed parts leave the model's window no room for an answer."""


class LlmRateLimited(ResourceExhausted):
    """Raised when the LLM provider's rate limit or quota refused the call (retried first)."""


class LlmAnswerTooLarge(ResourceExhausted):
    """Raised when the model's answer is larger than a record (or a summary or memory) may
    hold, its provider not keeping to max_tokens: nothing of it was stored; the session is
    usable."""


class SharedMemoryFull(ResourceExhausted):
    """Raised when a new shared memory entry would pass the space's cap (nothing written):
    remove an entry first; replacing an existing slug is still allowed."""


class SpaceBusy(ResourceExhausted):
    """Raised when the space had as many calls in progress on the server as one space may
    (STELLO_MAX_CALLS_PER_SPACE), after the SDK's retries: nothing was done."""


class TurnQueueFull(ResourceExhausted):
    """Raised when as many turns as the gateway allows already wait for the session (busy
    policy ENQUEUE): nothing was stored."""


class Unavailable(RpcError):
    """Raised when the gateway (or what it calls) could not be reached (retried first)."""

    code = grpc.StatusCode.UNAVAILABLE


class LlmUnavailable(Unavailable):
    """Raised when the LLM provider could not be reached or failed."""


class OutcomeUnknown(Unavailable):
    """Raised when a turn's answer was lost and it may have been stored, once (send,
    stream, submit_tool_results, submit_tool_results_stream).

    Unlike the other UNAVAILABLE failures it does not say nothing was written, so it is
    retried only with the call's own `request_id`, which answers the stored turn or runs
    it if it was not stored (the SDK's turns always carry one). Raised once the retries
    are spent, or by a stream after its first event: repeat the call with the same
    `request_id` (the error's), or read the session's records before sending it anew.
    """


class DeadlineExceeded(RpcError):
    """Raised when the call's deadline passed (the SDK's timeout, or the gateway's own)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class LlmTimeout(DeadlineExceeded):
    """Raised when the LLM provider did not answer in time."""


class Unauthenticated(RpcError):
    """Raised when the key is missing, unknown or revoked."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(RpcError):
    """Raised when the key may not make the call (an admin RPC with a tenant key)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Cancelled(RpcError):
    """Raised when the call was cancelled (by the gateway, or by the client's close() while
    it ran or paused between retries)."""

    code = grpc.StatusCode.CANCELLED


class OutOfRange(FieldError):
    """Raised when a value is past the end of what exists (fork's `inherit_until_seq`
    beyond the source's last seq); `field` names it."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Internal(RpcError):
    """Raised for INTERNAL (a gateway bug: `details` carries its error id) and any status
    without a class of its own."""

    code = grpc.StatusCode.INTERNAL


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
