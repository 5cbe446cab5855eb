"""ImportSession: a session made from given records, config and slots (DESIGN §4.1 saga).

Nothing is composed: the plan is the request. An inherited part is a lineage,
the mechanism of a Fork INHERIT (storage inherits the source's records by
reference, DESIGN §4.4), so an exported INHERIT fork re-imports the way a fork
is made, at no cost whatever the source's history. Every limit is checked
before anything is written: the request's own (`import_requests`), and here
the size of the one Transact that writes its own records and slots.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_gateway.clients import Caller, RequestKey, StorageClient
from agent_gateway.forks.creator import (
    check_cut,
    client_key,
    internal_request_id,
    source_last_seq,
    within_budget,
)
from agent_gateway.forks.saga import ProvisioningSaga, SessionPlan
from stello.common.v1 import common_pb2
from stello.errors import InvalidArgument

# Room for the Transact's own fields around the records and slots.
TRANSACT_OVERHEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ImportInput:
    """A validated ImportSession request."""

    space_id: uuid.UUID
    label: str
    parent_id: uuid.UUID | None = None
    source_id: uuid.UUID | None = None
    archived: bool = False
    config: common_pb2.SessionConfig | None = None
    slots: Mapping[str, str] = field(default_factory=dict)
    """system_prompt, memory and insight, when given."""
    inherit_until_seq: int | None = None
    records: tuple[common_pb2.Record, ...] = ()
    """The session's own records, seq cleared."""
    turn_count: int = 0
    request_id: str = ""
    request_hash: bytes = b""
    """Fingerprint of the request without its request_id (when it has one)."""
    metadata: Mapping[str, str] = field(default_factory=dict)


class SessionImporter:
    """ImportSession over the saga; inherited records read as a Fork INHERIT reads them."""

    def __init__(
        self,
        storage: StorageClient,
        saga: ProvisioningSaga,
        budget_s: float,
        max_message_bytes: int,
    ) -> None:
        self._storage = storage
        self._saga = saga
        self._budget_s = budget_s
        self._max_write_bytes = max_message_bytes - TRANSACT_OVERHEAD_BYTES

    async def import_session(
        self, caller: Caller, request: ImportInput
    ) -> common_pb2.SessionSummary:
        """Create the session all at once or not at all; a retry answers the first one.

        Raises:
            InvalidArgument: the write would not fit the message limit.
            stello.errors.OutOfRange: inherit_until_seq beyond the source's last seq.
            stello.errors.NotFound: the parent or source is not in the space.
            stello.errors.AlreadyExists: the request_id was used for another request.
            stello.errors.DeadlineExceeded: the saga ran out of its budget.
        """
        request_id = internal_request_id("ImportSession", request.request_id)
        key = client_key("ImportSession", request.request_id, request.request_hash)
        work = self._import(caller.within(self._budget_s), request, request_id, key)
        return await within_budget(self._budget_s, work)

    async def _import(
        self, caller: Caller, request: ImportInput, request_id: str, key: RequestKey | None
    ) -> common_pb2.SessionSummary:
        earlier = await self._saga.replay(caller, request.space_id, key) if key else None
        if earlier is not None:
            return earlier
        records = tuple(request.records)
        self._check_size(records, request.slots)
        cut, source = request.inherit_until_seq, request.source_id
        inherit = cut is not None and source is not None
        if cut is not None and source is not None:
            last = await source_last_seq(self._storage, caller, request.space_id, source)
            check_cut(cut, last)  # as a Fork's, before any write
        plan = SessionPlan(
            space_id=request.space_id,
            label=request.label,
            parent_id=request.parent_id,
            source_id=request.source_id,
            config=request.config,
            system_prompt=request.slots.get("system_prompt") or None,
            inherit=inherit,
            inherit_until_seq=request.inherit_until_seq,
            records=records,
            memory=request.slots.get("memory"),
            insight=request.slots.get("insight"),
            archived=request.archived,
            turns=request.turn_count,
            metadata=tuple(sorted(request.metadata.items())),
        )
        return await self._saga.run(caller, plan, request_id, key)

    def _check_size(self, records: tuple[common_pb2.Record, ...], slots: Mapping[str, str]) -> None:
        size = sum(r.ByteSize() for r in records) + sum(len(v.encode()) for v in slots.values())
        if size > self._max_write_bytes:
            raise InvalidArgument.field(
                "records",
                f"the session's records and slots ({size} bytes) do not fit one write "
                f"of at most {self._max_write_bytes} bytes; "
                "raise STELLO_MAX_MESSAGE_BYTES on the client, the gateway and storage",
            )
