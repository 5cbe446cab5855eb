"""The one Transact that commits a turn (DESIGN §4.2).

Preconditions: the turn lease; the session still active (archived during the
turn: FAILED_PRECONDITION SESSION_ARCHIVED, nothing written, as a turn that
begins on an archived session); the session's last seq as BeginTurn answered it
(the new records are numbered after it, so the reply — stored with the commit
for the request_id — already holds their seqs); the insight that was put into
the context, when one was. Operations: the records, bump_turn (touch only for
a continuation), clear_insight (when an insight was used), the new
compression cache, the lease release and the remembered reply.

Each assistant record was measured as the model answered it
(`answer_size`): none is over the record limit.

When the insight changed during the turn the commit is redone without the
clear (the new insight survives). A lost lease, or records added by someone
else (to any session, a new one included), is ABORTED CONCURRENT_MODIFICATION
with nothing written: the turn never commits after records it did not see.

The commit carries no storage request_id (it would cost a key insert per
turn) and its remembered reply is a plain one (no require_new, unlike the
provisioning saga's): the lease precondition already keeps a retried commit
from writing twice. A Transact whose answer was lost (UNAVAILABLE) is retried
(`clients.rpc`), and the retry tells what the first attempt did:

- the lease still live and this turn's: the first attempt wrote nothing, the
  retry commits;
- the lease released by a committed Transact with this token (storage keeps
  the token a commit released, migration 0014; the violation's type is
  `turn_lease_released`): the first attempt committed this very turn, whose
  reply is answered (with or without a request_id);
- neither (the lease expired, or another turn took and committed it since):
  with a request_id, the remembered reply tells whether this turn was stored;
  without one, when an attempt went unanswered, nothing can tell, and the
  client is told so: UNAVAILABLE, reason OUTCOME_UNKNOWN ("may have been
  stored"), never that nothing was written. The same when no attempt was
  answered at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from agent_gateway.clients import Caller, RequestKey, StorageClient, remember_op
from agent_gateway.history.context import Summary
from agent_gateway.turns.lease_keeper import DURING_THE_TURN, session_deleted
from agent_gateway.turns.state import Plan, Turn
from stello.agent.v1 import agent_pb2
from stello.db.tasks import to_the_end
from stello.errors import (
    Aborted,
    NotFound,
    StelloError,
    Unavailable,
    session_archived,
)
from stello.reasons import (
    CONCURRENT_MODIFICATION,
    OUTCOME_UNKNOWN,
)
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
Results = Sequence[storage_pb2.OperationResult]
LEASE_RELEASED = "turn_lease_released"
"""Transact's violation type for a lease token a committed Transact released."""

Op = storage_pb2.Operation
Check = storage_pb2.Precondition


@dataclass(slots=True)
class Lease:
    """A turn lease held by this turn; `released` once the commit gave it back."""

    token: str
    released: bool = False


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed turn: its reply and the session's turn_count after it (None: not known,
    when the commit's own answer was lost and reading it failed)."""

    response: agent_pb2.SendResponse
    turn_count: int | None


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
        for _ in range(MAX_ATTEMPTS):
            checks = _checks(sid, lease, turn, insight if consume else None)
            ops = _operations(plan, lease, turn, cache, consume=consume)
            if plan.key is not None:
                ops.append(_remember(plan.key, response, plan.session_id))
            try:
                # No request_id of its own: the lease precondition already makes a
                # retried commit unable to write twice.
                # Once sent, the commit ends as storage decides, whatever the client
                # does meanwhile (stello.db.tasks).
                results = await to_the_end(
                    self._storage.transact(
                        caller, plan.space_id, ops, preconditions=checks, request_id=""
                    ),
                    _said_after_leaving(plan, lease),
                )
            except Aborted as exc:
                failed = {violation.type for violation in exc.violations}
                if LEASE_RELEASED in failed:  # an earlier attempt committed this turn
                    lease.released = True
                    return Committed(response, await self._turn_count(caller, plan))
                if "session_active" in failed:
                    raise session_archived(
                        sid,
                        "was archived during the turn; nothing was written: unarchive it to go on",
                    ) from exc
                if not failed or "turn_lease" in failed:
                    return await self._lease_lost(caller, plan, lease, exc)
                if "session_last_seq" in failed:
                    raise Aborted(
                        f"records were added to session {sid} during the turn; nothing "
                        "was written: retry",
                        reason=CONCURRENT_MODIFICATION,
                    ) from exc
                if "insight_unchanged" in failed:
                    consume = False  # a new insight was put meanwhile: it survives
                continue
            except NotFound as exc:
                raise session_deleted(plan.session_id, exc, DURING_THE_TURN) from exc
            except StelloError as exc:
                if exc.maybe_applied:
                    raise _outcome_unknown(plan) from exc
                raise
            lease.released = True
            return Committed(response, results[1].bump_turn.session.turn_count)
        raise Aborted(
            f"session {sid} kept changing during the commit; nothing was written: retry",
            reason=CONCURRENT_MODIFICATION,
        )

    async def _lease_lost(
        self, caller: Caller, plan: Plan, lease: Lease, exc: Aborted
    ) -> Committed:
        """The turn's own commit found by its request_id; else what the lost lease means.

        Raises:
            Aborted: CONCURRENT_MODIFICATION, nothing of the turn written.
            Unavailable: OUTCOME_UNKNOWN, an unanswered attempt may have stored it.
        """
        mine = await self._own_commit(caller, plan, lease)
        if mine is not None:
            return mine
        if exc.maybe_applied and plan.key is None:
            raise _outcome_unknown(plan) from exc
        raise Aborted(
            f"the turn lease of session {plan.session_id} expired before the turn committed "
            "(another turn may have taken it); nothing was written",
            reason=CONCURRENT_MODIFICATION,
        ) from exc

    async def _turn_count(self, caller: Caller, plan: Plan) -> int | None:
        """The session's turn_count now (None when it cannot be read: the turn is stored
        all the same, and only the consolidation check after it waits for the next)."""
        try:
            meta = await self._storage.get_session(caller, plan.space_id, plan.session_id)
        except StelloError as exc:
            log.warning(
                "turn of %s committed; its turn count was not read: %s", plan.session_id, exc
            )
            return None
        return meta.turn_count

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
        turn_count = await self._turn_count(caller, plan)
        return Committed(agent_pb2.SendResponse.FromString(found.response), turn_count)


def _checks(
    sid: str, lease: Lease, turn: Turn, insight: str | None
) -> list[storage_pb2.Precondition]:
    """The lease, the session still active (not archived during the turn), the last seq
    BeginTurn answered and, when one was used, the insight."""
    last = Check.SessionLastSeqCheck(session_id=sid, expected=turn.base_seq)
    checks = [
        Check(turn_lease=Check.TurnLeaseCheck(session_id=sid, token=lease.token)),
        Check(session_active=Check.SessionActiveCheck(session_id=sid)),
        Check(session_last_seq=last),
    ]
    if insight:
        same = Check.InsightUnchangedCheck(session_id=sid, expected=insight)
        checks.append(Check(insight_unchanged=same))
    return checks


def _operations(
    plan: Plan,
    lease: Lease,
    turn: Turn,
    cache: Summary | None,
    *,
    consume: bool,
) -> list[storage_pb2.Operation]:
    sid = str(plan.session_id)
    ops = [
        Op(append_records=Op.AppendRecordsOp(session_id=sid, records=turn.records)),
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


def _outcome_unknown(plan: Plan) -> Unavailable:
    """The error of a commit whose every answer was lost: the turn may have been stored."""
    then = (
        "retry with the same request_id: it answers the stored turn, or runs it if it was not"
        if plan.key is not None
        else "read the session's records before sending it again"
    )
    return Unavailable(
        f"the turn of session {plan.session_id} may have been stored: storage's answer to its "
        f"commit was lost; {then}",
        reason=OUTCOME_UNKNOWN,
    )


def _said_after_leaving(plan: Plan, lease: Lease) -> Callable[[asyncio.Future[Results]], None]:
    """What a commit whose caller left meanwhile did, for the log (and the lease it gave
    back): `to_the_end`'s report."""

    def said(done: asyncio.Future[Results]) -> None:
        key = f" (request_id {plan.key.request_id})" if plan.key is not None else ""
        error = None if done.cancelled() else done.exception()
        level = logging.INFO
        if done.cancelled() or (isinstance(error, StelloError) and error.maybe_applied):
            outcome = "the commit's outcome is not known (it may have been stored)"
        elif error is not None:
            outcome = f"the commit failed ({type(error).__name__}): nothing was stored"
        else:
            lease.released = True
            outcome = "the turn was stored"
            level = logging.DEBUG  # as the caller would have had it: routine (a Stop button)
        log.log(
            level,
            "the caller of a turn of session %s%s left during its commit: %s",
            plan.session_id,
            key,
            outcome,
        )

    return said
