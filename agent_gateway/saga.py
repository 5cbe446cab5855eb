"""The provisioning saga of CreateRoot and Fork (DESIGN §4.1).

`tree.CreateSession(provisional, config, request_id=R)` -> one
`storage.Transact(put session meta, put system prompt, append records,
request_id=R/storage)` -> `tree.CommitSession`. Until the commit the session is
invisible to every read of every service; if the gateway fails or dies on the
way, the tree's sweeper removes the leftovers once the provisioning TTL passes.
Every step is idempotent (request ids, an idempotent commit), so running the
saga again with the same R finishes the same session rather than making a
second one.

One case needs care: a retry that arrives after the sweeper removed the first
attempt's row gets that dead session id back from CreateSession (the tree
remembers R's answer for 24 h), and storage or the commit then answers
NOT_FOUND for it. The saga then moves on to a derived id (R/again1, ...),
deterministically, so every retry walks the same chain and still ends on one
session.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from uuid import UUID

from agent_gateway.clients import Caller, StorageClient, TreeClient
from agent_gateway.faults import Faults
from stello.common.v1 import common_pb2
from stello.errors import Aborted, NotFound
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


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
    records: tuple[common_pb2.Record, ...] = field(default=())
    """Inherited records, then the opening record, in order."""


def summary_of(meta: common_pb2.SessionMeta, parent_id: str | None) -> common_pb2.SessionSummary:
    """A SessionSummary from storage's meta and the tree's parent link."""
    summary = common_pb2.SessionSummary(
        id=meta.id,
        label=meta.label,
        status=meta.status,
        turn_count=meta.turn_count,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        last_active_at=meta.last_active_at,
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
        self, caller: Caller, plan: SessionPlan, request_id: str
    ) -> common_pb2.SessionSummary:
        """Provision `plan` under the internal request id `request_id`; answer the session.

        Raises:
            NotFound: the parent or source is not a visible session of the space.
            AlreadyExists: `request_id` was used for a different request.
            Aborted: the provisional session vanished on every attempt.
        """
        for attempt in range(MAX_ATTEMPTS):
            rid = request_id if attempt == 0 else f"{request_id}/again{attempt}"
            node = await self._tree.create_session(
                caller,
                plan.space_id,
                parent_id=plan.parent_id,
                label=plan.label,
                source_id=plan.source_id,
                config=plan.config,
                provisional=True,
                request_id=rid,
            )
            await self._faults.hit("fork.after_create")
            try:
                results = await self._storage.transact(
                    caller, plan.space_id, self._operations(plan, node), request_id=f"{rid}/storage"
                )
                await self._faults.hit("fork.after_storage")
                await self._faults.hit("fork.before_commit")
                committed = await self._tree.commit_session(caller, plan.space_id, node.id)
            except NotFound:
                log.warning(
                    "provisional session %s of %s is gone (swept before a retry); trying again",
                    node.id,
                    rid,
                )
                continue
            await self._faults.hit("fork.after_commit")
            meta = results[0].put_session.session
            parent = committed.parent_id if committed.HasField("parent_id") else None
            return summary_of(meta, parent)
        raise Aborted(
            f"the session of request {request_id!r} was swept on each of {MAX_ATTEMPTS} "
            "attempts; retry with a new request_id"
        )

    @staticmethod
    def _operations(
        plan: SessionPlan, node: common_pb2.TopologyNode
    ) -> list[storage_pb2.Operation]:
        # The meta put comes first: its result carries the timestamps of the answer.
        operations = [
            storage_pb2.Operation(
                put_session=storage_pb2.Operation.PutSessionOp(
                    session=common_pb2.SessionMeta(
                        id=node.id, label=node.label, status=common_pb2.SESSION_STATUS_ACTIVE
                    )
                )
            )
        ]
        if plan.system_prompt:
            operations.append(
                storage_pb2.Operation(
                    put_system_prompt=storage_pb2.Operation.PutSystemPromptOp(
                        session_id=node.id, content=plan.system_prompt
                    )
                )
            )
        if plan.records:
            operations.append(
                storage_pb2.Operation(
                    append_records=storage_pb2.Operation.AppendRecordsOp(
                        session_id=node.id, records=list(plan.records)
                    )
                )
            )
        return operations
