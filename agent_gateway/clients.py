"""Typed async clients of the storage and tree services (the gateway's only way to data).

Every call:

- authenticates as the gateway's caller: their key is forwarded as
  ``authorization: Bearer <key>``, so each service enforces tenancy itself;
- carries the caller's request id (``x-request-id``) for the logs;
- gets the time the caller has left (capped by ``call_timeout_s``) as its deadline;
- is retried on UNAVAILABLE a bounded number of times with jittered exponential
  backoff, never past the deadline (mutating calls are safe to retry: they carry
  a request_id or are idempotent by nature; DeleteSubtree is not retried);
- turns a failed RPC back into the kernel's domain error (`from_rpc_error`), so
  the gateway's own interceptor maps it to the same status for the client.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast
from uuid import UUID

import grpc
from google.protobuf.message import Message

from stello.common.v1 import common_pb2
from stello.errors import DeadlineExceeded, Unavailable, from_rpc_error
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.tree.v1 import tree_pb2, tree_pb2_grpc

R = TypeVar("R", bound=Message)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who the gateway acts for: their key, their deadline (monotonic) and request id."""

    key: str
    deadline: float | None = None
    request_id: str = "-"

    def within(self, seconds: float) -> Caller:
        """This caller with a deadline no later than `seconds` from now."""
        limit = time.monotonic() + seconds
        if self.deadline is not None and self.deadline <= limit:
            return self
        return replace(self, deadline=limit)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None = no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """Per-call timeout and the UNAVAILABLE retry bounds."""

    timeout_s: float = 10.0
    max_retries: int = 3
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0


class _Client:
    """Shared call path: metadata, deadline, bounded retries, error mapping, counting."""

    def __init__(self, service: str, policy: CallPolicy) -> None:
        self._service = service
        self._policy = policy
        self.calls: collections.Counter[str] = collections.Counter()
        """How many RPCs (attempts included) each method made; read by the benchmark."""

    async def _call(
        self,
        name: str,
        method: Any,
        request: Message,
        reply: type[R],
        caller: Caller,
        *,
        retry: bool = True,
    ) -> R:
        metadata = (
            ("authorization", f"Bearer {caller.key}"),
            ("x-request-id", caller.request_id),
        )
        attempt = 0
        while True:
            timeout = self._timeout(name, caller)
            self.calls[name] += 1
            try:
                response = await method(request, timeout=timeout, metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                delay = self._backoff(attempt, caller)
                if retry and exc.code() is grpc.StatusCode.UNAVAILABLE and delay is not None:
                    attempt += 1
                    await asyncio.sleep(delay)
                    continue
                error = from_rpc_error(exc)
                if error is exc:
                    raise
                if isinstance(error, Unavailable | DeadlineExceeded):
                    # Transport trouble: say which hop failed, the caller cannot tell.
                    error.message = f"{self._service}.{name}: {error.message}"
                    error.args = (error.message,)
                raise error from exc
            return cast(R, response)

    def _timeout(self, name: str, caller: Caller) -> float:
        remaining = caller.remaining()
        if remaining is None:
            return self._policy.timeout_s
        if remaining <= 0:
            raise DeadlineExceeded(f"deadline passed before {self._service}.{name} was called")
        return min(remaining, self._policy.timeout_s)

    def _backoff(self, attempt: int, caller: Caller) -> float | None:
        """The delay before retry `attempt + 1`, or None when no retry is left."""
        if attempt >= self._policy.max_retries:
            return None
        delay = min(self._policy.backoff_s * 2.0**attempt, self._policy.max_backoff_s)
        # Jitter spreads the retries of many callers after one outage.
        delay *= random.uniform(0.5, 1.0)
        remaining = caller.remaining()
        if remaining is not None and remaining <= delay:
            return None
        return delay


class TreeClient(_Client):
    """stello.tree.v1.SessionTree, typed."""

    def __init__(self, channel: grpc.aio.Channel, policy: CallPolicy) -> None:
        super().__init__("SessionTree", policy)
        self._stub = tree_pb2_grpc.SessionTreeStub(channel)

    async def create_session(
        self,
        caller: Caller,
        space_id: UUID,
        *,
        parent_id: UUID | None,
        label: str,
        source_id: UUID | None,
        config: common_pb2.SessionConfig | None,
        provisional: bool,
        request_id: str,
    ) -> common_pb2.TopologyNode:
        """Create a session (provisional: invisible until committed); idempotent by request_id."""
        request = tree_pb2.CreateSessionRequest(
            space_id=str(space_id),
            label=label,
            config=config,
            provisional=provisional,
            request_id=request_id,
        )
        if parent_id is not None:
            request.parent_id = str(parent_id)
        if source_id is not None:
            request.source_session_id = str(source_id)
        reply = await self._call(
            "CreateSession",
            self._stub.CreateSession,
            request,
            tree_pb2.CreateSessionResponse,
            caller,
        )
        return reply.node

    async def commit_session(
        self, caller: Caller, space_id: UUID, session_id: str
    ) -> common_pb2.TopologyNode:
        """Make a provisional session visible (idempotent)."""
        request = tree_pb2.CommitSessionRequest(space_id=str(space_id), session_id=session_id)
        reply = await self._call(
            "CommitSession",
            self._stub.CommitSession,
            request,
            tree_pb2.CommitSessionResponse,
            caller,
        )
        return reply.node

    async def get_node(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.TopologyNode:
        """One visible session as a topology node."""
        request = tree_pb2.GetNodeRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetNode", self._stub.GetNode, request, tree_pb2.GetNodeResponse, caller
        )
        return reply.node

    async def get_config(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.SessionConfig | None:
        """The session's frozen config; None when none was ever written."""
        request = tree_pb2.GetConfigRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetConfig", self._stub.GetConfig, request, tree_pb2.GetConfigResponse, caller
        )
        return reply.config if reply.HasField("config") else None

    async def list_all(
        self,
        caller: Caller,
        space_id: UUID,
        *,
        status: common_pb2.SessionStatus,
        page_size: int,
        page_token: str,
    ) -> tree_pb2.ListAllResponse:
        """One page of every session of the space, in (created_at, id) order."""
        request = tree_pb2.ListAllRequest(
            space_id=str(space_id), status=status, page_size=page_size, page_token=page_token
        )
        return await self._call(
            "ListAll", self._stub.ListAll, request, tree_pb2.ListAllResponse, caller
        )

    async def get_tree(
        self, caller: Caller, space_id: UUID, *, root_id: UUID | None, max_depth: int | None
    ) -> Sequence[common_pb2.TreeNode]:
        """The forest (or one subtree) in pre-order."""
        request = tree_pb2.GetTreeRequest(space_id=str(space_id))
        if root_id is not None:
            request.root_id = str(root_id)
        if max_depth is not None:
            request.max_depth = max_depth
        reply = await self._call(
            "GetTree", self._stub.GetTree, request, tree_pb2.GetTreeResponse, caller
        )
        return reply.nodes

    async def archive(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.TopologyNode:
        """Archive the session (idempotent, never cascades)."""
        request = tree_pb2.ArchiveRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "Archive", self._stub.Archive, request, tree_pb2.ArchiveResponse, caller
        )
        return reply.node

    async def unarchive(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.TopologyNode:
        """Make the session active again (idempotent, never cascades)."""
        request = tree_pb2.UnarchiveRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "Unarchive", self._stub.Unarchive, request, tree_pb2.UnarchiveResponse, caller
        )
        return reply.node

    async def delete_subtree(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> Sequence[str]:
        """Erase the session and its subtree; not retried (a second call is NOT_FOUND)."""
        request = tree_pb2.DeleteSubtreeRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "DeleteSubtree",
            self._stub.DeleteSubtree,
            request,
            tree_pb2.DeleteSubtreeResponse,
            caller,
            retry=False,
        )
        return reply.deleted_ids

    async def sweep_provisional(
        self, caller: Caller, *, older_than_s: int, dry_run: bool
    ) -> Sequence[str]:
        """Admin: remove (or list, with dry_run) expired provisional sessions."""
        request = tree_pb2.SweepProvisionalRequest(older_than_s=older_than_s, dry_run=dry_run)
        reply = await self._call(
            "SweepProvisional",
            self._stub.SweepProvisional,
            request,
            tree_pb2.SweepProvisionalResponse,
            caller,
        )
        return reply.removed_ids


class StorageClient(_Client):
    """stello.storage.v1.SessionStorage, typed."""

    def __init__(self, channel: grpc.aio.Channel, policy: CallPolicy) -> None:
        super().__init__("SessionStorage", policy)
        self._stub = storage_pb2_grpc.SessionStorageStub(channel)

    async def get_session(
        self, caller: Caller, space_id: UUID, session_id: UUID | str
    ) -> common_pb2.SessionMeta:
        """The conversation meta of a visible session."""
        request = storage_pb2.GetSessionRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetSession", self._stub.GetSession, request, storage_pb2.GetSessionResponse, caller
        )
        return reply.session

    async def get_system_prompt(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> str | None:
        """The system prompt slot; None when unset."""
        request = storage_pb2.GetSystemPromptRequest(
            space_id=str(space_id), session_id=str(session_id)
        )
        reply = await self._call(
            "GetSystemPrompt",
            self._stub.GetSystemPrompt,
            request,
            storage_pb2.GetSystemPromptResponse,
            caller,
        )
        return reply.content if reply.HasField("content") else None

    async def list_records(
        self, caller: Caller, request: storage_pb2.ListRecordsRequest
    ) -> Sequence[common_pb2.Record]:
        """One ListRecords call, as given."""
        reply = await self._call(
            "ListRecords", self._stub.ListRecords, request, storage_pb2.ListRecordsResponse, caller
        )
        return reply.records

    async def all_records(
        self, caller: Caller, space_id: UUID, session_id: UUID, *, until_seq: int | None = None
    ) -> list[common_pb2.Record]:
        """Every record of a session (up to `until_seq`), paging by seq."""
        page = 1000
        found: list[common_pb2.Record] = []
        after = 0
        while True:
            request = storage_pb2.ListRecordsRequest(
                space_id=str(space_id), session_id=str(session_id), limit=page, after_seq=after
            )
            if until_seq is not None:
                request.before_seq = until_seq + 1
            records = await self.list_records(caller, request)
            found.extend(records)
            if len(records) < page:
                return found
            after = records[-1].seq

    async def batch_get_slots(
        self, caller: Caller, space_id: UUID, session_ids: Sequence[str]
    ) -> Sequence[storage_pb2.SessionSlots]:
        """The slots of the committed sessions among `session_ids`, in request order."""
        request = storage_pb2.BatchGetSlotsRequest(
            space_id=str(space_id), session_ids=list(session_ids)
        )
        reply = await self._call(
            "BatchGetSlots",
            self._stub.BatchGetSlots,
            request,
            storage_pb2.BatchGetSlotsResponse,
            caller,
        )
        return reply.slots

    async def put_insight(
        self, caller: Caller, space_id: UUID, session_id: UUID, content: str
    ) -> None:
        """Replace the insight slot."""
        request = storage_pb2.PutInsightRequest(
            space_id=str(space_id), session_id=str(session_id), content=content
        )
        await self._call(
            "PutInsight", self._stub.PutInsight, request, storage_pb2.PutInsightResponse, caller
        )

    async def put_memory(
        self, caller: Caller, space_id: UUID, session_id: UUID, content: str
    ) -> None:
        """Replace the memory slot."""
        request = storage_pb2.PutMemoryRequest(
            space_id=str(space_id), session_id=str(session_id), content=content
        )
        await self._call(
            "PutMemory", self._stub.PutMemory, request, storage_pb2.PutMemoryResponse, caller
        )

    async def transact(
        self,
        caller: Caller,
        space_id: UUID,
        operations: Sequence[storage_pb2.Operation],
        *,
        request_id: str,
        preconditions: Sequence[storage_pb2.Precondition] = (),
    ) -> Sequence[storage_pb2.OperationResult]:
        """Apply `operations` all-or-nothing; idempotent by request_id."""
        request = storage_pb2.TransactRequest(
            space_id=str(space_id),
            preconditions=list(preconditions),
            operations=list(operations),
            request_id=request_id,
        )
        reply = await self._call(
            "Transact", self._stub.Transact, request, storage_pb2.TransactResponse, caller
        )
        return reply.results
