"""The gateway's session reads and writes over storage and tree (STELLO-SPEC §4.8, DESIGN §2).

Joined views read both services at once; a session that either service does
not show (unknown, of another space, provisional, deleted meanwhile) is
NOT_FOUND. Writes go to the one service that owns the data.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from agent_gateway.clients import Caller, StorageClient, TreeClient
from agent_gateway.clients.rpc import both
from agent_gateway.forks.saga import summary_of
from agent_gateway.sessions.digests import MAX_PAGE_BYTES, DigestPages
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import session_archived
from stello.settings import MAX_MESSAGE_BYTES
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2


@dataclass(frozen=True, slots=True)
class SessionDetails:
    """The joined view of one session: topology, meta, frozen config and slots."""

    node: common_pb2.TopologyNode
    meta: common_pb2.SessionMeta
    config: common_pb2.SessionConfig | None
    slots: storage_pb2.SessionSlots
    progress: common_pb2.HistoryProgress
    """How far summaries and memory cover the records; the background jobs."""
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """A validated ListRecords request (see storage's ListRecords for the semantics)."""

    space_id: uuid.UUID
    session_id: uuid.UUID
    limit: int | None = None
    offset: int = 0
    role: common_pb2.RecordRole = common_pb2.RECORD_ROLE_UNSPECIFIED
    after_seq: int | None = None
    before_seq: int | None = None
    newest_first: bool = False
    page_token: str = ""


class SessionService:
    """The joined session view, tree and records, slots, archive and delete; `digests`, the
    digest pages."""

    def __init__(
        self,
        tree: TreeClient,
        storage: StorageClient,
        *,
        max_reply_bytes: int = MAX_MESSAGE_BYTES,
        max_page_bytes: int = MAX_PAGE_BYTES,
    ) -> None:
        self._tree = tree
        self._storage = storage
        self.digests = DigestPages(tree, storage, max_page_bytes=max_page_bytes)
        """ListSessionDigests' and GetLineage's pages."""
        # What this gateway can send and receive (STELLO_MAX_MESSAGE_BYTES): a delete's
        # ids must fit it as well as the caller's own limit.
        self._max_reply_bytes = max_reply_bytes

    async def get_session(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> SessionDetails:
        """Node, meta, config and slots of one session: one tree call (node and config) and
        one storage call (meta and slots), in parallel."""
        (node, config, pairs), (meta, slots, progress) = await both(
            self._tree.get_node_with_config(caller, space_id, session_id),
            self._storage.get_session_with_slots(caller, space_id, session_id, progress=True),
        )
        return SessionDetails(node, meta, config, slots, progress, pairs)

    async def update_metadata(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        written: dict[str, str],
        removed: list[str],
    ) -> dict[str, str]:
        """Write and remove the session's metadata keys atomically (one tree call); the
        metadata as it now is."""
        return await self._tree.update_metadata(
            caller, space_id, session_id, set_=written, remove=removed
        )

    async def get_tree(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        *,
        root_id: uuid.UUID | None,
        max_depth: int | None,
    ) -> bytes:
        """The forest or one subtree, in pre-order: the tree's GetTreeResponse's bytes."""
        return await self._tree.get_tree(caller, space_id, root_id=root_id, max_depth=max_depth)

    async def list_records(
        self, caller: Caller, query: RecordQuery
    ) -> storage_pb2.ListRecordsResponse:
        """One page of a session's records, chronological, and the next token (storage's
        ListRecords)."""
        request = storage_pb2.ListRecordsRequest(
            space_id=str(query.space_id),
            session_id=str(query.session_id),
            offset=query.offset,
            role=query.role,
            newest_first=query.newest_first,
            page_token=query.page_token,
        )
        if query.limit is not None:
            request.limit = query.limit
        if query.after_seq is not None:
            request.after_seq = query.after_seq
        if query.before_seq is not None:
            request.before_seq = query.before_seq
        return await self._storage.list_records(caller, request)

    async def search_records(
        self, caller: Caller, request: agent_pb2.SearchRecordsRequest
    ) -> storage_pb2.SearchRecordsResponse:
        """One page of storage's SearchRecords, the request passed through."""
        forwarded = storage_pb2.SearchRecordsRequest(
            space_id=request.space_id,
            query=request.query,
            session_id=request.session_id,
            root_id=request.root_id,
            order=request.order,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return await self._storage.search_records(caller, forwarded)

    async def search_sessions(
        self, caller: Caller, request: agent_pb2.SearchSessionsRequest
    ) -> storage_pb2.SearchSessionsResponse:
        """One page of storage's SearchSessions, the request passed through."""
        forwarded = storage_pb2.SearchSessionsRequest(
            space_id=request.space_id,
            query=request.query,
            status=request.status,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return await self._storage.search_sessions(caller, forwarded)

    async def put_insight(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, content: str
    ) -> None:
        """Replace the insight of a visible, active session.

        Raises:
            FailedPrecondition: reason SESSION_ARCHIVED.
        """
        meta = await self._storage.get_session(caller, space_id, session_id)
        if meta.status == common_pb2.SESSION_STATUS_ARCHIVED:
            raise session_archived(session_id, "is archived; unarchive it to put an insight")
        await self._storage.put_insight(caller, space_id, session_id, content)

    async def put_memory(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, content: str
    ) -> None:
        """Replace the memory of a visible session (archived ones too)."""
        # Storage accepts writes to provisional sessions; the gateway must not.
        await self._storage.get_session(caller, space_id, session_id)
        await self._storage.put_memory(caller, space_id, session_id, content)

    async def archive(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> common_pb2.SessionSummary:
        """Archive the session (never cascades); answer it as it now is."""
        node = await self._tree.archive(caller, space_id, session_id)
        return await self._summary(caller, space_id, node)

    async def unarchive(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> common_pb2.SessionSummary:
        """Make the session active again (never cascades); answer it as it now is."""
        node = await self._tree.unarchive(caller, space_id, session_id)
        return await self._summary(caller, space_id, node)

    async def rename(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID, label: str
    ) -> common_pb2.SessionSummary:
        """Give the session a new label (refused while archived); answer it as it now is."""
        node = await self._tree.update_label(caller, space_id, session_id, label)
        return await self._summary(caller, space_id, node)

    async def resolve_prefix(
        self, caller: Caller, space_id: uuid.UUID, prefix: str, limit: int
    ) -> Sequence[common_pb2.SessionSummary]:
        """The sessions whose id starts with the hex `prefix` (the tree's range scan)."""
        return await self._tree.resolve_prefix(caller, space_id, prefix, limit)

    async def delete_session(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        *,
        count_only: bool = False,
        max_reply_bytes: int = 0,
    ) -> tree_pb2.DeleteSubtreeResponse:
        """Erase the session and its subtree; the erased ids, the session first (none with
        `count_only`), and their count. Ids that would not fit the caller's
        `max_reply_bytes` (0 = none) or this gateway's own limit are refused by the tree
        before anything is deleted."""
        limit = self._max_reply_bytes
        if 0 < max_reply_bytes < limit:
            limit = max_reply_bytes
        return await self._tree.delete_subtree(
            caller, space_id, session_id, count_only=count_only, max_reply_bytes=limit
        )

    async def _summary(
        self, caller: Caller, space_id: uuid.UUID, node: common_pb2.TopologyNode
    ) -> common_pb2.SessionSummary:
        meta = await self._storage.get_session(caller, space_id, node.id)
        parent = node.parent_id if node.HasField("parent_id") else None
        return summary_of(meta, parent, {})  # metadata: read with GetSession (common.proto)
