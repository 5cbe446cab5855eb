"""The provisioning saga of CreateRoot and Fork (DESIGN §4.1).

`tree.CreateSession(provisional, config, request_id=R)` -> one
`storage.Transact(remember the session under the key K (first, require_new),
put session meta, put system prompt (or copy the source's when the composition
gives none, so nothing reads it first), inherit the source's records by
reference (Fork INHERIT, DESIGN §4.4), append records)` -> `tree.CommitSession`.
Until the commit the session is invisible to every read of every service; if
the gateway fails or dies on the way, the tree's sweeper removes the leftovers
once the provisioning TTL passes. Every step is idempotent (CreateSession's
request id, the Transact's remembered key, an idempotent commit), so running
the saga again with the same R finishes the same session rather than making a
second one.

K is the client's key (scope `agent.Fork` / `agent.CreateRoot`: its request_id
and request fingerprint) or, without one, a key of the saga's own (scope
`agent.saga.generated`, which no client key is in, the generated R). The
remembered entry is the Transact's once-only key: the Transact sends no
request_id of its own, and `require_new` makes it fail ALREADY_EXISTS
REQUEST_ID_REUSED, nothing applied, when K already has a live entry. So of all
the attempts under one K exactly one Transact writes; any other one (a retry
of the client's, or this very attempt's Transact retried after its reply was
lost) finds the remembered session (`_earlier`), commits it (idempotent) and
answers it; its own provisional session, if it made one, is swept.

Retries of a client's request_id (DESIGN §2) are answered by the client's
request, not by what was composed from it: a retried Fork may compose other
content (the source got new records, a COMPRESS summary came out different).
So CreateSession's id also carries a digest of the plan (different content,
different provisional session), while K does not. A request seen before is
answered up front (`replay`), and a different request under the same id is
refused before anything is written.

One case needs care: a retry that arrives after the sweeper removed the first
attempt's row gets that dead session id back from CreateSession (the tree
remembers R's answer for 24 h), or finds it remembered under K, and the commit
then answers NOT_FOUND for it. The saga then moves on to derived ids
(R/again1, ...), deterministically, so every retry walks the same chain and
still ends on one session. There K's live entry names the dead session, so a
later attempt's Transact replaces it (no require_new) and is kept once-only by
a storage request_id of its own (R/again1/storage) instead.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from agent_gateway.clients import Caller, RequestKey, StorageClient, TreeClient, remember_op
from agent_gateway.forks.faults import Faults
from stello.common.v1 import common_pb2
from stello.errors import Aborted, AlreadyExists, NotFound
from stello.reasons import REQUEST_ID_REUSED
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
GENERATED_SCOPE = "agent.saga.generated"
"""The scope of a saga's own key (client keys are in `agent.<Rpc>`)."""


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """Everything a new session gets, decided before anything is written."""

    space_id: UUID
    label: str
    parent_id: UUID | None = None
    source_id: UUID | None = None
    config: common_pb2.SessionConfig | None = None
    """Stored as the frozen config; None = store none."""
    system_prompt: str | None = None
    """Written to the system prompt slot when set (never empty)."""
    copy_system_prompt: bool = False
    """Without `system_prompt`: the slot gets `source_id`'s (when it has one), copied by
    storage in the Transact (no read before it)."""
    inherit: bool = False
    """The session shows `source_id`'s records (through `inherit_until_seq`) by reference."""
    inherit_until_seq: int | None = None
    """With `inherit`: the last seq to inherit; None = all."""
    records: tuple[common_pb2.Record, ...] = field(default=())
    """Its own records, after any inherited ones: the opening record, or an import's."""
    memory: str | None = None
    """ImportSession: written to the memory slot when set ("" included)."""
    insight: str | None = None
    """ImportSession: written to the insight slot when set ("" included)."""
    archived: bool = False
    """ImportSession: the session is stored archived."""
    turns: int = 0
    """ImportSession: committed user turns to count."""
    metadata: tuple[tuple[str, str], ...] = ()
    """The session's metadata pairs, written by the tree's CreateSession."""
    copy_metadata: bool = False
    """Start from `source_id`'s metadata (copied by the tree in CreateSession)."""


def plan_digest(plan: SessionPlan) -> str:
    """A short digest of everything the plan writes (tells attempts of one request apart)."""
    digest = hashlib.sha256()
    parts = (plan.label, str(plan.parent_id), str(plan.source_id), plan.system_prompt or "")
    slots = (repr(plan.memory), repr(plan.insight), str(plan.archived), str(plan.turns))
    inherit = (str(plan.inherit), repr(plan.inherit_until_seq), str(plan.copy_system_prompt))
    tags = (repr(plan.metadata), str(plan.copy_metadata))
    for part in (*parts, *slots, *inherit, *tags):
        digest.update(part.encode())
        digest.update(b"\0")
    if plan.config is not None:
        digest.update(plan.config.SerializeToString(deterministic=True))
    for record in plan.records:
        digest.update(record.SerializeToString(deterministic=True))
    return digest.hexdigest()[:16]


def summary_of(
    meta: common_pb2.SessionMeta, parent_id: str | None, metadata: Mapping[str, str]
) -> common_pb2.SessionSummary:
    """A SessionSummary from storage's meta, the tree's parent link and metadata."""
    summary = common_pb2.SessionSummary(
        id=meta.id,
        label=meta.label,
        status=meta.status,
        turn_count=meta.turn_count,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        last_active_at=meta.last_active_at,
        pinned=meta.pinned,
        metadata=metadata,
    )
    if parent_id:
        summary.parent_id = parent_id
    return summary


class ProvisioningSaga:
    """Creates a session all at once or not at all."""

    def __init__(self, tree: TreeClient, storage: StorageClient, faults: Faults) -> None:
        self._tree = tree
        self._storage = storage
        self._faults = faults

    async def run(
        self, caller: Caller, plan: SessionPlan, request_id: str, key: RequestKey | None = None
    ) -> common_pb2.SessionSummary:
        """Provision `plan` under the internal request id `request_id`; answer the session.

        With the client's `key`, the session is remembered under it (see the module
        docstring) and an earlier attempt's session wins over this one's.

        Raises:
            NotFound: the parent or source is not a visible session of the space.
            AlreadyExists: `request_id` was used for a different request.
            Aborted: the provisional session vanished on every attempt.
        """
        digest = plan_digest(plan)
        once = key if key is not None else generated_key(request_id)
        lost: str | None = None  # the provisional session of the attempt before, gone
        for attempt in range(MAX_ATTEMPTS):
            rid = request_id if attempt == 0 else f"{request_id}/again{attempt}"
            try:
                node = await self._tree.create_session(
                    caller,
                    plan.space_id,
                    parent_id=plan.parent_id,
                    label=plan.label,
                    source_id=plan.source_id,
                    config=plan.config,
                    provisional=True,
                    request_id=f"{rid}/{digest}",
                    metadata=dict(plan.metadata),
                    copy_source_metadata=plan.copy_metadata,
                )
            except NotFound as exc:
                if lost is not None:
                    # Not swept: the user deleted its parent or source meanwhile, and the
                    # delete hid it too (an outcome of theirs, answered NOT_FOUND).
                    log.info(
                        "provisional session %s of %s went with a session deleted meanwhile: %s",
                        lost,
                        request_id,
                        exc,
                    )
                raise
            if lost is not None:
                log.warning(
                    "provisional session %s of %s was swept before it was committed (the saga "
                    "ran past STELLO_TREE_PROVISIONING_TTL_S); made %s instead",
                    lost,
                    request_id,
                    node.id,
                )
            await self._faults.hit("fork.after_create")
            try:
                results = await self._fill(caller, plan, node, once, rid if attempt else "")
            except AlreadyExists as exc:
                earlier = await self._earlier(caller, plan.space_id, once, exc)
                if earlier is not None:
                    return earlier
                continue
            except NotFound:
                lost = node.id  # swept, or hidden by a delete: the next attempt tells which
                continue
            await self._faults.hit("fork.after_storage")
            await self._faults.hit("fork.before_commit")
            try:
                committed = await self._tree.commit_session(caller, plan.space_id, node.id)
            except NotFound:
                lost = node.id
                continue
            await self._faults.hit("fork.after_commit")
            meta = _answered_meta(results)
            node = committed.node
            parent = node.parent_id if node.HasField("parent_id") else None
            return summary_of(meta, parent, committed.metadata)
        raise Aborted(
            f"the session of request {request_id!r} was swept on each of {MAX_ATTEMPTS} "
            "attempts; retry with a new request_id"
        )

    async def _fill(
        self,
        caller: Caller,
        plan: SessionPlan,
        node: common_pb2.TopologyNode,
        once: RequestKey,
        again: str,
    ) -> Sequence[storage_pb2.OperationResult]:
        """The Transact that fills the provisional session and remembers it under `once`.

        The first attempt's (`again` empty) is made once-only by its remembered entry
        alone (require_new); a later one's (the entry names a swept session) replaces
        that entry, under a storage request_id of its own (`again`/storage). Its cost
        grows with what it writes (an import's records: 20,000 took longer than the
        per-call cap), so it gets what is left of the saga's budget (`caller`'s deadline).
        """
        remember = _remember(once, node, require_new=not again)
        operations = [remember, *self._operations(plan, node)]
        request_id = f"{again}/storage" if again else ""
        return await self._storage.transact(
            caller, plan.space_id, operations, request_id=request_id, long=True
        )

    async def replay(
        self, caller: Caller, space_id: UUID, key: RequestKey
    ) -> common_pb2.SessionSummary | None:
        """The session an earlier call with `key` made (committed now), or None.

        Raises:
            AlreadyExists: the request_id was used for a different request.
        """
        remembered = await self._remembered(caller, space_id, key)
        return None if remembered is None else await self._finish(caller, space_id, remembered)

    async def _earlier(
        self, caller: Caller, space_id: UUID, key: RequestKey, exc: AlreadyExists
    ) -> common_pb2.SessionSummary | None:
        """After the Transact's key was taken: the session of the attempt that took it.

        None when that session is gone (the saga then moves on to the next id).
        """
        if exc.reason != REQUEST_ID_REUSED:
            raise exc
        remembered = await self._remembered(caller, space_id, key)
        if remembered is None:
            raise exc  # taken by a call that remembered nothing under the key
        return await self._finish(caller, space_id, remembered)

    async def _remembered(
        self, caller: Caller, space_id: UUID, key: RequestKey
    ) -> common_pb2.SessionSummary | None:
        """The session remembered under `key` (id and parent only), or None."""
        response = await self._storage.remembered(caller, space_id, key)
        return None if response is None else common_pb2.SessionSummary.FromString(response)

    async def _finish(
        self, caller: Caller, space_id: UUID, remembered: common_pb2.SessionSummary
    ) -> common_pb2.SessionSummary | None:
        """Commit a remembered session (idempotent) and answer it; None when it is gone."""
        try:
            committed = await self._tree.commit_session(caller, space_id, remembered.id)
            meta = await self._storage.get_session(caller, space_id, remembered.id)
        except NotFound:
            log.warning(
                "session %s remembered for a request is gone; making it again", remembered.id
            )
            return None
        parent = remembered.parent_id if remembered.HasField("parent_id") else None
        return summary_of(meta, parent, committed.metadata)

    @staticmethod
    def _operations(
        plan: SessionPlan, node: common_pb2.TopologyNode
    ) -> list[storage_pb2.Operation]:
        # The meta put comes first: its result carries the timestamps of the answer.
        status = (
            common_pb2.SESSION_STATUS_ARCHIVED
            if plan.archived
            else common_pb2.SESSION_STATUS_ACTIVE
        )
        operations = [
            storage_pb2.Operation(
                put_session=storage_pb2.Operation.PutSessionOp(
                    session=common_pb2.SessionMeta(id=node.id, label=node.label, status=status)
                )
            )
        ]
        Op = storage_pb2.Operation
        if plan.system_prompt:
            operations.append(
                Op(
                    put_system_prompt=Op.PutSystemPromptOp(
                        session_id=node.id, content=plan.system_prompt
                    )
                )
            )
        elif plan.copy_system_prompt and plan.source_id is not None:
            copy = Op.CopySystemPromptOp(session_id=node.id, source_id=str(plan.source_id))
            operations.append(Op(copy_system_prompt=copy))
        if plan.memory is not None:
            operations.append(
                Op(put_memory=Op.PutMemoryOp(session_id=node.id, content=plan.memory))
            )
        if plan.insight is not None:
            operations.append(
                Op(put_insight=Op.PutInsightOp(session_id=node.id, content=plan.insight))
            )
        if plan.turns:
            operations.append(Op(bump_turn=Op.BumpTurnOp(session_id=node.id, turns=plan.turns)))
        if plan.inherit and plan.source_id is not None:
            inherit = Op.InheritRecordsOp(session_id=node.id, source_id=str(plan.source_id))
            if plan.inherit_until_seq is not None:
                inherit.until_seq = plan.inherit_until_seq
            operations.append(Op(inherit_records=inherit))
        if plan.records:
            operations.append(
                storage_pb2.Operation(
                    append_records=storage_pb2.Operation.AppendRecordsOp(
                        session_id=node.id, records=list(plan.records)
                    )
                )
            )
        return operations


def _answered_meta(results: Sequence[storage_pb2.OperationResult]) -> common_pb2.SessionMeta:
    """The session's meta after the Transact: from its put_session or last bump_turn result."""
    meta = next(r.put_session.session for r in results if r.HasField("put_session"))
    for result in results:
        if result.HasField("bump_turn"):
            meta = result.bump_turn.session
    return meta


def generated_key(request_id: str) -> RequestKey:
    """The key a saga without a client request_id remembers its session under: a scope of
    its own (no client key can be in it), the generated internal id."""
    return RequestKey(GENERATED_SCOPE, request_id, hashlib.sha256(request_id.encode()).digest())


def _remember(
    key: RequestKey, node: common_pb2.TopologyNode, *, require_new: bool
) -> storage_pb2.Operation:
    """Remember the session under `key`, with the Transact that fills it."""
    remembered = common_pb2.SessionSummary(id=node.id)
    if node.HasField("parent_id"):
        remembered.parent_id = node.parent_id
    op = remember_op(key, remembered.SerializeToString(deterministic=True), (node.id,))
    op.remember_result.require_new = require_new
    return op
