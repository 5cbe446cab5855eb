"""FAILED_PRECONDITION and its reasons: the state refuses the call (an archived session, an
unknown profile, a window too small, a provider not configured...).

Nothing was done; retrying unchanged fails the same way until the state changes.
"""

from __future__ import annotations

import grpc

from stello_client.exceptions.base import RpcError


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
    """Raised when the LLM provider does not know the configured model, or has no API at
    the gateway's base URL for it (its path likely wrong: a 404 that names no model)."""


class LlmRequestRejected(FailedPrecondition):
    """Raised when the LLM provider refused the request."""
