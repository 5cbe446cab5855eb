"""The call met another or a limit: ABORTED (a race lost, nothing written) and
RESOURCE_EXHAUSTED (a limit reached: rounds, window, rate, size, queue, space).

Read again and retry, wait, or ask for less; each class's docstring says which.
"""

from __future__ import annotations

import grpc

from stello_client.exceptions.base import RpcError


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
