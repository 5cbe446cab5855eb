"""The stable `google.rpc.ErrorInfo` reasons a Stello error carries (DESIGN §2, Errors).

Clients branch on these names, not on messages: they are part of the API and
never change. Each is the reason of one status code, named beside it.
"""

from __future__ import annotations

# ABORTED
CONCURRENT_MODIFICATION = "CONCURRENT_MODIFICATION"
"""A precondition no longer held (another write came first): read again, then retry."""
TURN_IN_PROGRESS = "TURN_IN_PROGRESS"
"""Another turn holds the session's lease: retry once it ends."""
TURN_INTERRUPTED = "TURN_INTERRUPTED"
"""An INTERRUPT (or ROLLBACK) turn took the session over: this turn stopped, nothing of it
was stored."""

# ALREADY_EXISTS
REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
"""The request_id came earlier with a different request."""

# FAILED_PRECONDITION
SESSION_ARCHIVED = "SESSION_ARCHIVED"
"""The session is archived: unarchive it to continue it."""
TREE_TOO_LARGE = "TREE_TOO_LARGE"
"""GetTree would answer more nodes than the cap: narrow it with root_id or max_depth."""
SEARCH_TOO_BROAD = "SEARCH_TOO_BROAD"
"""A search ran past its time (STELLO_STORAGE_SEARCH_TIMEOUT_S): narrow it with session_id
or root_id, or more words."""
REF_TO_SELF = "REF_TO_SELF"
"""A session cannot refer to itself."""
REF_TO_ANCESTOR = "REF_TO_ANCESTOR"
"""A ref to an ancestor: it is already reachable through the topology."""
REF_TO_DESCENDANT = "REF_TO_DESCENDANT"
"""A ref to a descendant: it is already reachable through the topology."""
SESSION_NOT_EMPTY = "SESSION_NOT_EMPTY"
"""Only a new session (no records yet) can inherit another's records."""
PROFILE_NOT_FOUND = "PROFILE_NOT_FOUND"
"""No fork profile of that name is configured."""
NO_PENDING_TOOL_CALLS = "NO_PENDING_TOOL_CALLS"
"""SubmitToolResults on a session with no unanswered client tool call."""
WINDOW_TOO_SMALL = "WINDOW_TOO_SMALL"
"""The model's window cannot hold even one chunk of a fold."""
NO_RETENTION_POLICY = "NO_RETENTION_POLICY"
"""ApplyRetention on a space with no retention policy: set one first."""
CURSOR_EXPIRED = "CURSOR_EXPIRED"
"""WatchSpace: the cursor is older than the retained events; resume from now."""
PROVIDER_NOT_CONFIGURED = "PROVIDER_NOT_CONFIGURED"
"""The gateway has no LLM provider for this call."""
LLM_API_KEY_MISSING = "LLM_API_KEY_MISSING"
"""The configured LLM provider needs an API key and none is set."""
LLM_API_KEY_REJECTED = "LLM_API_KEY_REJECTED"
"""The LLM provider refused the API key."""
LLM_MODEL_NOT_FOUND = "LLM_MODEL_NOT_FOUND"
"""The LLM provider does not know the model, or has no API at the base URL's path (a 404
naming no model: the message says which)."""
LLM_REQUEST_REJECTED = "LLM_REQUEST_REJECTED"
"""The LLM provider refused the request."""

# NOT_FOUND
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
"""No session of that id the caller can see (never made, deleted, still provisional, or
another space's): ErrorInfo metadata `session_id` names it."""
SPACE_NOT_FOUND = "SPACE_NOT_FOUND"
"""No space of that id the key reaches (never made, deleted, or another tenant's):
ErrorInfo metadata `space_id` names it as the request wrote it."""
SHARED_MEMORY_ENTRY_NOT_FOUND = "SHARED_MEMORY_ENTRY_NOT_FOUND"
"""The space holds no shared memory entry of that slug: ErrorInfo metadata `slug` names it."""
REQUEST_ERASED = "REQUEST_ERASED"
"""The request_id answered earlier, and what its reply held was deleted since (its session
deleted, the records it held trimmed, or the shared memory entry it held removed): the reply
was erased with it and nothing was done now; send the request with a new request_id to do it
again."""

# RESOURCE_EXHAUSTED
TOOL_ROUNDS_EXCEEDED = "TOOL_ROUNDS_EXCEEDED"
"""The model kept calling tools past the configured number of rounds."""
CONTEXT_TOO_LARGE = "CONTEXT_TOO_LARGE"
"""The turn's fixed parts alone do not fit the model's window."""
TURN_QUEUE_FULL = "TURN_QUEUE_FULL"
"""As many turns as allowed already wait for the session (ENQUEUE): retry later."""
LLM_RATE_LIMITED = "LLM_RATE_LIMITED"
"""The LLM provider's rate limit or quota: retry later."""
LLM_ANSWER_TOO_LARGE = "LLM_ANSWER_TOO_LARGE"
"""The model's answer is larger than it may be stored in (a provider that did not keep to
max_tokens): a turn's answer (its text and tool calls) over a record, a summary or memory over
a slot; nothing of it was stored."""
SPACE_BUSY = "SPACE_BUSY"
"""The space has as many calls in progress on this server as one space may
(STELLO_MAX_CALLS_PER_SPACE), or as many WatchSpace streams open
(STELLO_MAX_WATCHES_PER_SPACE): retry later (the SDK does, with backoff). ErrorInfo metadata
`space_id` and `limit`."""
SHARED_MEMORY_FULL = "SHARED_MEMORY_FULL"
"""The space holds as many shared memory entries as it may: remove one first."""

# UNAVAILABLE
LLM_UNAVAILABLE = "LLM_UNAVAILABLE"
"""The LLM provider could not be reached or failed (or answered nothing): retry later."""
OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
"""The write's answer was lost and it may have been stored: read before repeating it (a
retry with the same request_id is safe)."""

# DEADLINE_EXCEEDED
LLM_TIMEOUT = "LLM_TIMEOUT"
"""The LLM provider did not answer in time."""
