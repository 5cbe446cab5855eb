"""The one Transact that commits a turn (DESIGN §4.2).

Preconditions: the turn lease; the session's last seq (the new records' seqs
are predicted from the last record read, so the reply — stored with the
commit for the request_id — already holds them); the insight that was put
into the context, when one was. Operations: the records, bump_turn (touch
only for a continuation), clear_insight (when an insight was used), the new
compression cache, the lease release and the remembered reply.

When the insight changed during the turn the commit is redone without the
clear (the new insight survives). When the last seq was unknown — every
record trimmed away, so no record tells it — the commit is redone without that
check and the reply renumbered from what storage assigned, then remembered by
a second Transact. A lost lease, or records added by someone else, is ABORTED
CONCURRENT_MODIFICATION with nothing written.

The commit carries no storage request_id (it would cost a key insert per
turn) and its remembered reply is a plain one (no require_new, unlike the
provisioning saga's): the lease precondition already keeps a retried commit
from writing twice. A retry whose first attempt did commit (its reply lost on the way)
meets the lease that attempt released; with a request_id the remembered
reply then shows the turn is this one's own and answers it. Without one the
client is told ABORTED although the turn was stored (a lost reply is
ambiguous without idempotency).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from agent_gateway.clients import Caller, RequestKey, StorageClient, remember_op
from agent_gateway.history.context import Summary
from agent_gateway.turns.state import ASSISTANT, Plan, Turn
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Aborted, StelloError
from stello.reasons import CONCURRENT_MODIFICATION
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3

Op = storage_pb2.Operation
Check = storage_pb2.Precondition


@dataclass(slots=True)
class Lease:
    """A turn lease held by this turn; `released` once the commit gave it back."""

    token: str
    released: bool = False


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed turn: its reply and the session's turn_count after it."""

    response: agent_pb2.SendResponse
    turn_count: int


class TurnCommitter:
    """Commits turns through storage."""

    def __init__(self, storage: StorageClient) -> None:
        self._storage = storage

    async def commit(
        self,
        caller: Caller,
        plan: Plan,
        lease: Lease,
        turn: Turn,
        insight: str | None,
        cache: Summary | None,
        response: agent_pb2.SendResponse,
    ) -> Committed:
        """The one Transact of the turn (see the module docstring for the retries)."""
        sid = str(plan.session_id)
        consume = bool(insight)
        predicted = True
        for _ in range(MAX_ATTEMPTS):
            checks = [Check(turn_lease=Check.TurnLeaseCheck(session_id=sid, token=lease.token))]
            if predicted:
                last = Check.SessionLastSeqCheck(session_id=sid, expected=turn.base_seq)
                checks.append(Check(session_last_seq=last))
            if consume:
                same = Check.InsightUnchangedCheck(session_id=sid, expected=insight)
                checks.append(Check(insight_unchanged=same))
            ops = _operations(plan, lease, turn, cache, consume=consume, predicted=predicted)
            if plan.key is not None and predicted:
                ops.append(_remember(plan.key, response, plan.session_id))
            try:
                # No request_id of its own: the lease precondition already makes a
                # retried commit unable to write twice.
                results = await self._storage.transact(
                    caller, plan.space_id, ops, preconditions=checks, request_id=""
                )
            except Aborted as exc:
                failed = {violation.type for violation in exc.violations}
                if not failed or "turn_lease" in failed:
                    mine = await self._own_commit(caller, plan, lease)
                    if mine is not None:
                        return mine
                    raise Aborted(
                        f"the turn lease of session {sid} expired before the turn committed "
                        "(another turn may have taken it); nothing was written",
                        reason=CONCURRENT_MODIFICATION,
                    ) from exc
                if "session_last_seq" in failed:
                    if turn.base_seq != 0:
                        raise Aborted(
                            f"records were added to session {sid} during the turn; nothing "
                            "was written: retry",
                            reason=CONCURRENT_MODIFICATION,
                        ) from exc
                    predicted = False
                if "insight_unchanged" in failed:
                    consume = False  # a new insight was put meanwhile: it survives
                continue
            lease.released = True
            if not predicted:
                response = await self._renumbered(caller, plan, response, results[0])
            return Committed(response, results[1].bump_turn.session.turn_count)
        raise Aborted(
            f"session {sid} kept changing during the commit; nothing was written: retry",
            reason=CONCURRENT_MODIFICATION,
        )

    async def _own_commit(self, caller: Caller, plan: Plan, lease: Lease) -> Committed | None:
        """The turn this very commit stored, when the lease check failed only because a
        retried Transact met the lease its first, lost-reply attempt had released.

        Known only with a request_id (the reply was remembered with the commit).
        """
        if plan.key is None:
            return None
        found = await self._storage.get_remembered_result(
            caller, plan.space_id, plan.key.scope, plan.key.request_id
        )
        if not found.found or found.request_hash != plan.key.request_hash:
            return None
        lease.released = True
        meta = await self._storage.get_session(caller, plan.space_id, plan.session_id)
        return Committed(agent_pb2.SendResponse.FromString(found.response), meta.turn_count)

    async def _renumbered(
        self,
        caller: Caller,
        plan: Plan,
        response: agent_pb2.SendResponse,
        appended: storage_pb2.OperationResult,
    ) -> agent_pb2.SendResponse:
        """The reply with the seqs storage assigned, remembered afterwards (rare path)."""
        fixed = agent_pb2.SendResponse()
        fixed.CopyFrom(response)
        del fixed.records[:]
        fixed.records.extend(appended.append_records.records)
        fixed.assistant.CopyFrom(next(r for r in reversed(fixed.records) if r.role == ASSISTANT))
        if plan.key is not None:
            try:
                await self._storage.transact(
                    caller,
                    plan.space_id,
                    [_remember(plan.key, fixed, plan.session_id)],
                    request_id="",
                )
            except StelloError as exc:
                log.warning(
                    "turn of %s committed but its reply was not remembered: %s",
                    plan.session_id,
                    exc,
                )
        return fixed


def _operations(
    plan: Plan,
    lease: Lease,
    turn: Turn,
    cache: Summary | None,
    *,
    consume: bool,
    predicted: bool,
) -> list[storage_pb2.Operation]:
    sid = str(plan.session_id)
    records = turn.records if predicted else [_unnumbered(r) for r in turn.records]
    ops = [
        Op(append_records=Op.AppendRecordsOp(session_id=sid, records=records)),
        Op(bump_turn=Op.BumpTurnOp(session_id=sid, touch_only=plan.touch_only)),
    ]
    if consume:
        ops.append(Op(clear_insight=Op.ClearInsightOp(session_id=sid)))
    if cache is not None:
        stored = storage_pb2.CompressionCache(
            summary=cache.text, covered_until_seq=cache.covered_until_seq, lossy=cache.lossy
        )
        ops.append(Op(put_compression_cache=Op.PutCompressionCacheOp(session_id=sid, cache=stored)))
    ops.append(Op(release_turn=Op.ReleaseTurnOp(session_id=sid, token=lease.token)))
    return ops


def _remember(
    key: RequestKey, response: agent_pb2.SendResponse, session_id: UUID
) -> storage_pb2.Operation:
    return remember_op(key, response.SerializeToString(deterministic=True), (session_id,))


def _unnumbered(record: common_pb2.Record) -> common_pb2.Record:
    copy = common_pb2.Record()
    copy.CopyFrom(record)
    copy.seq = 0
    return copy
