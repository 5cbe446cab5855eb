"""Transact: preconditions checked under lock, then operations applied in order.

One transaction (one unit of work), so any failure rolls everything back; each
operation is the statements of the RPC it stands for, on the repositories of the
rooms it writes. The rows of every named session are locked first, in id order
(no deadlock between two Transacts), with FOR UPDATE: that also blocks a
concurrent slot row insert (its foreign-key check needs a KEY SHARE lock), so an
insight that a precondition checked cannot change before the commit. A Transact
that trims locks them FOR NO KEY UPDATE instead, in one id-ordered pass with the
readers of the trimmed sessions (as TrimRecords does, DESIGN §4.4), except the
sessions an insight or memory-version check names: those FOR UPDATE, in the same
pass. With a request_id, the reply is stored in the same transaction
(`storage_service.keys`).

A ReleaseTurnOp records the token it released on the session (migration 0014),
so a TurnLeaseCheck of that token fails afterwards as `turn_lease_released`:
the retry of a turn's commit whose answer was lost learns that the commit is
stored, where a plain `turn_lease` failure would leave it guessing (DESIGN §4.2).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from stello.errors import Aborted, AlreadyExists, NotFound, PreconditionViolation
from stello.reasons import REQUEST_ID_REUSED, SESSION_NOT_FOUND
from storage_service.keys.idempotent import Codec, Idempotent
from storage_service.models import Idempotency, RememberedResult, SlotName, session_not_found
from storage_service.records.service import trim
from storage_service.sessions.repository import LockedSession
from storage_service.transact.operations import (
    PRECONDITION_KINDS,
    ActiveCheck,
    AppendOp,
    BumpTurnOp,
    ClearInsightOp,
    CopyPromptOp,
    InheritOp,
    InsightCheck,
    JobCheck,
    LastSeqCheck,
    LeaseCheck,
    MemoryVersionCheck,
    Operation,
    OperationResult,
    Precondition,
    PutCacheOp,
    PutSessionOp,
    PutSlotOp,
    ReleaseTurnOp,
    RememberOp,
    ResultKind,
    TrimOp,
    UpdateJobOp,
)
from storage_service.turns.repository import lease_token
from storage_service.unit import Database, UnitOfWork

CONCURRENT_MODIFICATION = "CONCURRENT_MODIFICATION"
TRANSACT_SCOPE = "storage.Transact"
LEASE_RELEASED = "turn_lease_released"
"""The violation type of a TurnLeaseCheck whose token's lease a committed Transact released
(what a retried commit whose reply was lost meets): that commit is stored."""

SLOT_RESULTS: dict[SlotName, ResultKind] = {
    "system_prompt": "put_system_prompt",
    "insight": "put_insight",
    "memory": "put_memory",
}


def _named_sessions(
    preconditions: Sequence[Precondition], operations: Sequence[Operation]
) -> list[uuid.UUID]:
    """Every session the request names, first mention first, each once."""
    named = [p.session_id for p in preconditions] + [
        o.session_id for o in operations if not isinstance(o, RememberOp)
    ]
    return list(dict.fromkeys(named))


async def _state_failure(uow: UnitOfWork, space_id: uuid.UUID, check: Precondition) -> str | None:
    """Why a check on a row beside the session's (a job claim, the memory's version) does
    not hold, or None when it does (the session's row is locked: the rows are read as
    they will stay until the commit)."""
    if isinstance(check, JobCheck):
        holder = await uow.jobs.holder(space_id, check.session_id, check.kind)
        if holder is None or str(holder) != check.token:
            return f"the token does not hold the {check.kind} job of session {check.session_id}"
        return None
    assert isinstance(check, MemoryVersionCheck)
    version = await uow.slots.memory_version(space_id, check.session_id)
    if version != check.expected:
        return (
            f"the memory of session {check.session_id} is at version {version}, "
            f"expected {check.expected}"
        )
    return None


def _failure(
    check: Precondition, session: LockedSession, insights: dict[uuid.UUID, str | None]
) -> tuple[str, str] | None:
    """The violation type and why `check` does not hold, or None when it does."""
    kind = PRECONDITION_KINDS[type(check)]
    if isinstance(check, LastSeqCheck):
        if session.last_seq != check.expected:
            return kind, (
                f"last seq of session {check.session_id} is {session.last_seq}, "
                f"expected {check.expected}"
            )
        return None
    if isinstance(check, InsightCheck):
        if insights.get(check.session_id) != check.expected:
            return kind, f"the insight of session {check.session_id} changed"
        return None
    if isinstance(check, ActiveCheck):
        if session.archived:
            return kind, f"session {check.session_id} is archived"
        return None
    assert isinstance(check, LeaseCheck)
    token = lease_token(check.token)
    if token is not None and session.turn_token == token and session.lease_live:
        return None
    if token is not None and session.released_token == token:
        return LEASE_RELEASED, (
            f"the token's turn lease of session {check.session_id} was released by a "
            "Transact that committed"
        )
    return kind, f"the token is not the live turn lease of session {check.session_id}"


def _finds_its_session(op: Operation) -> bool:
    """Whether applying `op` raises NotFound by itself for an absent session (a remembered
    result's links to its sessions need them to exist)."""
    if isinstance(op, AppendOp):
        return bool(op.records)
    return isinstance(
        op,
        PutSessionOp | PutSlotOp | PutCacheOp | BumpTurnOp | RememberOp | InheritOp | CopyPromptOp,
    )


async def check_preconditions(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    preconditions: Sequence[Precondition],
    operations: Sequence[Operation],
) -> None:
    """Lock every named session; NotFound for an absent one, Aborted when a check fails.

    With no precondition, a single session and operations that each find their
    session themselves (answering NOT_FOUND when it is absent), there is nothing
    to check and no lock order to keep: the locking statement is skipped.
    """
    named = _named_sessions(preconditions, operations)
    if not named:
        return
    if not preconditions and len(named) == 1 and all(map(_finds_its_session, operations)):
        return
    trimmed = sorted({o.session_id for o in operations if isinstance(o, TrimOp)})
    if trimmed:
        # A trim's locks go in one pass in id order with its readers', FOR NO KEY UPDATE
        # (DESIGN §4.4, migration 0023); a check on a row beside the session's takes the
        # FOR UPDATE it needs (that blocks a slot row insert) in the same pass.
        beside = sorted(
            {
                p.session_id
                for p in preconditions
                if isinstance(p, InsightCheck | MemoryVersionCheck)
            }
        )
        locked = await uow.sessions.lock_for_trim(space_id, sorted(named), trimmed, beside)
    else:
        locked = await uow.sessions.lock(space_id, sorted(named))
    for session_id in named:
        if session_id not in locked:
            raise session_not_found(session_id)
    insight_ids = sorted({p.session_id for p in preconditions if isinstance(p, InsightCheck)})
    insights = await uow.slots.lock_insights(space_id, insight_ids) if insight_ids else {}
    failed = []
    for index, check in enumerate(preconditions):
        if isinstance(check, JobCheck | MemoryVersionCheck):
            why = await _state_failure(uow, space_id, check)
            failure = None if why is None else (PRECONDITION_KINDS[type(check)], why)
        else:
            failure = _failure(check, locked[check.session_id], insights)
        if failure is not None:
            kind, why = failure
            failed.append(PreconditionViolation(kind, f"preconditions[{index}]", why))
    if failed:
        subjects = ", ".join(v.subject for v in failed)
        raise Aborted(
            f"precondition failed ({subjects}); nothing was applied: re-read and retry",
            reason=CONCURRENT_MODIFICATION,
            violations=failed,
        )


def written_sessions(operations: Sequence[Operation]) -> list[uuid.UUID]:
    """The sessions the operations write (a RememberResultOp's own included), each once:
    what a reply of theirs holds data of (erased with any of them, DESIGN §4.8)."""
    named: list[uuid.UUID] = []
    for op in operations:
        named.extend(op.session_ids if isinstance(op, RememberOp) else (op.session_id,))
    return list(dict.fromkeys(named))


async def remember(
    uow: UnitOfWork, space_id: uuid.UUID, op: RememberOp, index: int, others: list[uuid.UUID]
) -> None:
    """Store a caller's idempotency entry, linked to its `session_ids` (else `others`, the
    sessions the other operations write); with `require_new`, AlreadyExists when the key
    has a live entry (the whole Transact then rolls back)."""
    try:
        stored = await uow.keys.remember_linked(
            space_id,
            op.scope,
            op.request_id,
            op.request_hash,
            op.response,
            list(op.session_ids) or others,
            require_new=op.require_new,
        )
    except NotFound as exc:
        raise NotFound(
            f"operations[{index}].remember_result.session_ids names a session that is not "
            "in the space",
            reason=SESSION_NOT_FOUND,
        ) from exc
    if not stored:
        raise AlreadyExists(
            f"operations[{index}].remember_result.request_id {op.request_id!r} already has a "
            f"live entry in scope {op.scope!r} (require_new); nothing was applied",
            reason=REQUEST_ID_REUSED,
        )


async def apply(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    op: Operation,
    index: int = 0,
    others: Sequence[uuid.UUID] = (),
) -> OperationResult:
    """Apply one operation (the `index`th) to locked, existing sessions; its result.
    `others`: the sessions the Transact's other operations write (a RememberResultOp's
    default links)."""
    if isinstance(op, AppendOp):
        records = (
            await uow.records.append(space_id, op.session_id, op.records) if op.records else ()
        )
        if records is None:
            raise session_not_found(op.session_id)
        return OperationResult("append_records", records=records)
    if isinstance(op, InheritOp):
        cut = await uow.lineage.inherit(space_id, op.session_id, op.source_id, op.until_seq)
        return OperationResult("inherit_records", until_seq=cut)
    if isinstance(op, CopyPromptOp):
        copied = await uow.slots.copy_system_prompt(space_id, op.session_id, op.source_id)
        return OperationResult("copy_system_prompt", copied=copied)
    if isinstance(op, PutSessionOp):
        meta = await uow.sessions.put(space_id, op.update)
        if meta is None:
            raise session_not_found(op.session_id)
        return OperationResult("put_session", session=meta)
    if isinstance(op, PutSlotOp):
        if op.covered is not None:
            field = f"operations[{index}].put_memory.covered_until_seq"
            await uow.slots.put_memory_covering(
                space_id, op.session_id, op.content, op.covered, field
            )
        else:
            await uow.slots.put(space_id, op.session_id, op.slot, op.content)
        return OperationResult(SLOT_RESULTS[op.slot])
    if isinstance(op, ClearInsightOp):
        await uow.slots.clear_insight(space_id, op.session_id)
        return OperationResult("clear_insight")
    if isinstance(op, PutCacheOp):
        field = f"operations[{index}].put_compression_cache.cache.covered_until_seq"
        await uow.caches.put(space_id, op.session_id, op.cache, op.keep_newer, field)
        return OperationResult("put_compression_cache")
    if isinstance(op, TrimOp):
        removed = await trim(uow, space_id, op.session_id, op.keep_recent)
        return OperationResult("trim_records", removed_count=removed)
    if isinstance(op, BumpTurnOp):
        meta = await uow.turns.bump(space_id, op.session_id, op.touch_only, op.turns)
        if meta is None:
            raise session_not_found(op.session_id)
        return OperationResult("bump_turn", session=meta)
    if isinstance(op, RememberOp):
        await remember(uow, space_id, op, index, list(others))
        return OperationResult("remember_result")
    if isinstance(op, UpdateJobOp):
        return OperationResult("update_job", updated=await uow.jobs.update(space_id, op))
    assert isinstance(op, ReleaseTurnOp)
    _, released = await uow.turns.release(
        space_id, op.session_id, lease_token(op.token), committed=True
    )
    return OperationResult("release_turn", released=released)


async def run_transact(
    uow: UnitOfWork,
    space_id: uuid.UUID,
    preconditions: Sequence[Precondition],
    operations: Sequence[Operation],
) -> tuple[OperationResult, ...]:
    """Check every precondition, then apply every operation in order (caller's transaction)."""
    await check_preconditions(uow, space_id, preconditions, operations)
    others = written_sessions([op for op in operations if not isinstance(op, RememberOp)])
    return tuple([await apply(uow, space_id, op, i, others) for i, op in enumerate(operations)])


class TransactService:
    """Transact, and the read of the entries its RememberResultOps store."""

    def __init__(self, db: Database, codec: Codec[tuple[OperationResult, ...]]) -> None:
        self._db = db
        self._transact_once = Idempotent(TRANSACT_SCOPE, codec)

    async def transact(
        self,
        space_id: uuid.UUID,
        preconditions: Sequence[Precondition],
        operations: Sequence[Operation],
        key: Idempotency | None = None,
    ) -> tuple[OperationResult, ...]:
        """All preconditions, then all operations, in one transaction: all or nothing."""

        async def work(uow: UnitOfWork) -> tuple[OperationResult, ...]:
            return await run_transact(uow, space_id, preconditions, operations)

        if key is None:
            return await self._db.transaction(work)
        written = written_sessions(operations)
        return await self._transact_once.run(self._db, space_id, key, work, written)

    async def get_remembered_result(
        self, space_id: uuid.UUID, scope: str, request_id: str
    ) -> RememberedResult | None:
        """The entry a RememberResultOp stored under (space, scope, request_id); None if none."""
        return await self._db.statement(
            lambda uow: uow.keys.remembered(space_id, scope, request_id)
        )
