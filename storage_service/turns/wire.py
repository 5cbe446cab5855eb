"""BeginTurn's request: its remembered key, its window and index caps, its busy policy.

Every bound is checked before the lease is taken, so a bad request waits in no line
and interrupts no turn (DESIGN §4.2, §4.3).
"""

from __future__ import annotations

from stello.common.v1 import common_pb2
from stello.errors import Violations
from stello.storage.v1 import storage_pb2
from stello.validation import MAX_PAGE_SIZE, not_one_of, parse_uuid
from storage_service.keys.wire import remembered_key
from storage_service.models import BusyPolicy, IndexCaps, TurnBudget, TurnBusy, TurnKey

MAX_WINDOW_TOKENS = 2**40


def turn_key(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnKey | None:
    """BeginTurn's remembered key: none without a request_id, else a valid scope with it."""
    if not request.request_id:
        return None
    remembered_key(request.scope, request.request_id, "", v)
    return TurnKey(request.scope, request.request_id)


def turn_budget(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnBudget | None:
    """BeginTurn's window: none when unset; window_tokens >= 1, reserve_tokens >= 0."""
    if not request.HasField("window"):
        return None
    window = request.window
    if not 1 <= window.window_tokens <= MAX_WINDOW_TOKENS:
        v.add("window.window_tokens", f"must be within 1..{MAX_WINDOW_TOKENS}")
    if not 0 <= window.reserve_tokens <= MAX_WINDOW_TOKENS:
        v.add("window.reserve_tokens", f"must be within 0..{MAX_WINDOW_TOKENS}")
    return TurnBudget(window.window_tokens, window.reserve_tokens, _index_caps(request, v))


MAX_WAITERS = 10_000
BUSY_POLICIES: dict[int, BusyPolicy] = {
    common_pb2.BUSY_POLICY_UNSPECIFIED: "reject",
    common_pb2.BUSY_POLICY_REJECT: "reject",
    common_pb2.BUSY_POLICY_ENQUEUE: "enqueue",
    common_pb2.BUSY_POLICY_INTERRUPT: "interrupt",
    common_pb2.BUSY_POLICY_ROLLBACK: "interrupt",
}


def turn_busy(request: storage_pb2.BeginTurnRequest, v: Violations) -> TurnBusy:
    """BeginTurn's busy policy: a known one; other than REJECT only with a window; ENQUEUE
    with a waiter UUID and a cap within 1..MAX_WAITERS."""
    policy = BUSY_POLICIES.get(request.busy)
    if policy is None:
        v.add("busy", not_one_of(common_pb2.BusyPolicy, request.busy))
        return TurnBusy(continuation=request.continuation)
    if policy != "reject" and not request.HasField("window"):
        v.add("busy", "needs `window` (only a whole turn can wait or interrupt)")
    if policy != "enqueue":
        return TurnBusy(policy, continuation=request.continuation)
    waiter = parse_uuid(request.waiter, "waiter", v)
    if not 1 <= request.max_waiters <= MAX_WAITERS:
        v.add("max_waiters", f"must be within 1..{MAX_WAITERS}, got {request.max_waiters}")
    return TurnBusy(policy, waiter, request.max_waiters, request.continuation)


def _index_caps(request: storage_pb2.BeginTurnRequest, v: Violations) -> IndexCaps | None:
    """BeginTurn's shared memory index caps: none when unset."""
    if not request.HasField("memory_index"):
        return None
    caps = request.memory_index
    if not 1 <= caps.max_entries <= MAX_PAGE_SIZE:
        v.add("memory_index.max_entries", f"must be within 1..{MAX_PAGE_SIZE}")
    for name in ("max_tokens", "overhead_tokens"):
        if not 0 <= getattr(caps, name) <= MAX_WINDOW_TOKENS:
            v.add(f"memory_index.{name}", f"must be within 0..{MAX_WINDOW_TOKENS}")
    return IndexCaps(caps.max_entries, caps.max_tokens, caps.overhead_tokens)
