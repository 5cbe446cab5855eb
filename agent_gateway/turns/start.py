"""How a turn starts: its BeginTurn request and what the answer means (DESIGN §4.2, §4.3).

`begin_request` asks storage for the window's budget in storage's estimate
(`stello.rules.tokens`), at least what can fit: the gateway counts the context
exactly once the records are in hand (`agent_gateway.history.budget`). The answer is
a remembered reply (`remembered`), or the turn: its summary (`summary`) and,
when the window does not reach back to the summary, the records between
(`unread`), which a compression reads and folds.
"""

from __future__ import annotations

from agent_gateway.history.budget import Counter, Window
from agent_gateway.history.context import Summary
from agent_gateway.turns.state import Plan, SendPlan
from stello.agent.v1 import agent_pb2
from stello.errors import AlreadyExists
from stello.reasons import REQUEST_ID_REUSED
from stello.rules.tokens import estimate_tokens
from stello.storage.v1 import storage_pb2


def begin_request(
    plan: Plan,
    window: Window,
    counter: Counter,
    index: storage_pb2.MemoryIndexWindow | None = None,
) -> storage_pb2.BeginTurnRequest:
    """BeginTurn with the window's budget: at least what fits, in storage's estimate (the
    lease's TTL is the lease keeper's to set); with `index`, the shared memory index too."""
    own = plan.content if isinstance(plan, SendPlan) else ""
    schemas = sum(estimate_tokens(t.name + t.description) for t in plan.tools)
    request = storage_pb2.BeginTurnRequest(
        space_id=str(plan.space_id),
        session_id=str(plan.session_id),
        window=storage_pb2.TurnWindow(
            window_tokens=counter.to_estimate(window.threshold),
            reserve_tokens=estimate_tokens(own) + schemas,
        ),
    )
    if index is not None:
        request.memory_index.CopyFrom(index)
    if plan.key is not None:
        request.scope = plan.key.scope
        request.request_id = plan.key.request_id
    request.busy = plan.busy  # type: ignore[assignment]
    request.continuation = plan.touch_only
    return request


def remembered(plan: Plan, found: storage_pb2.RememberedTurn) -> agent_pb2.SendResponse:
    """The stored reply of an earlier request under the plan's request_id.

    Raises:
        AlreadyExists: reason REQUEST_ID_REUSED; the id came with another request.
    """
    assert plan.key is not None  # storage answers an entry only for a request_id
    if found.request_hash != plan.key.request_hash:
        raise AlreadyExists(
            f"request_id {plan.key.request_id!r} was already used for a different request; "
            "use a new request_id for a new request",
            reason=REQUEST_ID_REUSED,
        )
    return agent_pb2.SendResponse.FromString(found.response)


def summary(state: storage_pb2.TurnState) -> Summary | None:
    if not state.HasField("cache"):
        return None
    cache = state.cache
    return Summary(cache.summary, cache.covered_until_seq, cache.lossy)


def unread(state: storage_pb2.TurnState) -> tuple[int, int] | None:
    """(first seq after the summary, first seq of the window) when the window does not
    reach back to the summary; None when it holds the whole tail."""
    if not state.first_tail_seq or not state.records:
        return None
    start = state.records[0].seq
    return (state.first_tail_seq, start) if start > state.first_tail_seq else None
