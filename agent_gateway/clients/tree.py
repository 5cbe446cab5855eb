"""The gateway's typed async client of the tree service (stello.tree.v1.SessionTree).

One method per RPC through `rpc.ServiceClient`'s shared call path, as the
storage client in `agent_gateway.clients`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

import grpc

from agent_gateway.clients.rpc import Caller, CallPolicy, ServiceClient
from stello.common.v1 import common_pb2
from stello.tree.v1 import tree_pb2, tree_pb2_grpc

GET_TREE = "/stello.tree.v1.SessionTree/GetTree"


class TreeClient(ServiceClient):
    """stello.tree.v1.SessionTree, typed."""

    def __init__(self, channel: grpc.aio.Channel, policy: CallPolicy, address: str = "") -> None:
        super().__init__("SessionTree", policy, address)
        self._stub = tree_pb2_grpc.SessionTreeStub(channel)
        self._raw_get_tree: grpc.aio.UnaryUnaryMultiCallable[tree_pb2.GetTreeRequest, bytes] = (
            channel.unary_unary(
                GET_TREE,
                request_serializer=tree_pb2.GetTreeRequest.SerializeToString,
                response_deserializer=None,  # the reply's bytes (see get_tree)
            )
        )

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
        metadata: Mapping[str, str] | None = None,
        copy_source_metadata: bool = False,
    ) -> common_pb2.TopologyNode:
        """Create a session (provisional: invisible until committed) with its metadata;
        idempotent by request_id."""
        request = tree_pb2.CreateSessionRequest(
            space_id=str(space_id),
            label=label,
            config=config,
            provisional=provisional,
            request_id=request_id,
            metadata=metadata,
            copy_source_metadata=copy_source_metadata,
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
    ) -> tree_pb2.CommitSessionResponse:
        """Make a provisional session visible (idempotent): its node and its metadata."""
        request = tree_pb2.CommitSessionRequest(space_id=str(space_id), session_id=session_id)
        reply: tree_pb2.CommitSessionResponse = await self._call(
            "CommitSession",
            self._stub.CommitSession,
            request,
            tree_pb2.CommitSessionResponse,
            caller,
        )
        return reply

    async def get_node_with_config(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> tuple[common_pb2.TopologyNode, common_pb2.SessionConfig | None, dict[str, str]]:
        """One visible session as a topology node, its frozen config (None when none was
        ever written) and its metadata, in one call."""
        request = tree_pb2.GetNodeRequest(
            space_id=str(space_id), session_id=str(session_id), include_config=True
        )
        reply = await self._call(
            "GetNode", self._stub.GetNode, request, tree_pb2.GetNodeResponse, caller
        )
        config = reply.config if reply.HasField("config") else None
        return reply.node, config, dict(reply.metadata)

    async def get_config(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.SessionConfig | None:
        """The session's frozen config; None when none was ever written."""
        request = tree_pb2.GetConfigRequest(space_id=str(space_id), session_id=str(session_id))
        reply = await self._call(
            "GetConfig", self._stub.GetConfig, request, tree_pb2.GetConfigResponse, caller
        )
        return reply.config if reply.HasField("config") else None

    async def list_ancestors(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        *,
        page_size: int,
        page_token: str,
    ) -> tree_pb2.ListAncestorsResponse:
        """One page of the session's ancestors, nearest first."""
        request = tree_pb2.ListAncestorsRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            page_size=page_size,
            page_token=page_token,
        )
        return await self._call(
            "ListAncestors",
            self._stub.ListAncestors,
            request,
            tree_pb2.ListAncestorsResponse,
            caller,
        )

    async def list_all(
        self,
        caller: Caller,
        space_id: UUID,
        *,
        status: common_pb2.SessionStatus,
        page_size: int,
        page_token: str,
        session_filter: common_pb2.SessionFilter | None = None,
    ) -> tree_pb2.ListAllResponse:
        """One page of the space's sessions that pass the filters, in (created_at, id)
        order."""
        request = tree_pb2.ListAllRequest(
            space_id=str(space_id),
            status=status,
            page_size=page_size,
            page_token=page_token,
            filter=session_filter,
        )
        return await self._call(
            "ListAll", self._stub.ListAll, request, tree_pb2.ListAllResponse, caller
        )

    async def get_tree(
        self, caller: Caller, space_id: UUID, *, root_id: UUID | None, max_depth: int | None
    ) -> bytes:
        """The forest (or one subtree) in pre-order: the GetTreeResponse's bytes, unparsed.

        The gateway's own GetTreeResponse has the same fields (tests compare the
        descriptors), so it passes them on as they are: a 10,000-node tree is not
        parsed and built again (DESIGN §9: the gateway's GetTree within 1.2x the tree's).
        """
        request = tree_pb2.GetTreeRequest(space_id=str(space_id))
        if root_id is not None:
            request.root_id = str(root_id)
        if max_depth is not None:
            request.max_depth = max_depth
        return await self._call("GetTree", self._raw_get_tree, request, bytes, caller, long=True)

    async def archive(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.TopologyNode:
        """Archive the session (idempotent, never cascades); its node without its children
        and refs (neither read: a SessionSummary names neither)."""
        request = tree_pb2.ArchiveRequest(
            space_id=str(space_id), session_id=str(session_id), without_links=True
        )
        reply = await self._call(
            "Archive", self._stub.Archive, request, tree_pb2.ArchiveResponse, caller
        )
        return reply.node

    async def unarchive(
        self, caller: Caller, space_id: UUID, session_id: UUID
    ) -> common_pb2.TopologyNode:
        """Make the session active again (idempotent, never cascades); its node without its
        children and refs (as `archive`)."""
        request = tree_pb2.UnarchiveRequest(
            space_id=str(space_id), session_id=str(session_id), without_links=True
        )
        reply = await self._call(
            "Unarchive", self._stub.Unarchive, request, tree_pb2.UnarchiveResponse, caller
        )
        return reply.node

    async def delete_subtree(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        *,
        count_only: bool = False,
        max_reply_bytes: int = 0,
    ) -> tree_pb2.DeleteSubtreeResponse:
        """Erase the session and its subtree; the erased ids (none with `count_only`) and
        their count, refused when they would not fit `max_reply_bytes` (0 = the tree's
        limit). Not retried (a second call is NOT_FOUND).

        A long call: it gets the caller's whole deadline (a large subtree takes seconds).
        """
        request = tree_pb2.DeleteSubtreeRequest(
            space_id=str(space_id),
            session_id=str(session_id),
            count_only=count_only,
            max_reply_bytes=max_reply_bytes,
        )
        reply = await self._call(
            "DeleteSubtree",
            self._stub.DeleteSubtree,
            request,
            tree_pb2.DeleteSubtreeResponse,
            caller,
            retry=False,
            long=True,
        )
        return reply

    async def update_label(
        self, caller: Caller, space_id: UUID, session_id: UUID, label: str
    ) -> common_pb2.TopologyNode:
        """Rename the session (SESSION_ARCHIVED when it is archived); its node without its
        children and refs (as `archive`)."""
        request = tree_pb2.UpdateLabelRequest(
            space_id=str(space_id), session_id=str(session_id), label=label, without_links=True
        )
        reply = await self._call(
            "UpdateLabel", self._stub.UpdateLabel, request, tree_pb2.UpdateLabelResponse, caller
        )
        return reply.node

    async def update_metadata(
        self,
        caller: Caller,
        space_id: UUID,
        session_id: UUID,
        *,
        set_: Mapping[str, str],
        remove: Sequence[str],
    ) -> dict[str, str]:
        """Write and remove the session's metadata keys in one transaction; its metadata."""
        request = tree_pb2.UpdateSessionMetadataRequest(
            space_id=str(space_id), session_id=str(session_id), set=set_, remove=remove
        )
        reply = await self._call(
            "UpdateSessionMetadata",
            self._stub.UpdateSessionMetadata,
            request,
            tree_pb2.UpdateSessionMetadataResponse,
            caller,
        )
        return dict(reply.metadata)

    async def resolve_prefix(
        self, caller: Caller, space_id: UUID, prefix: str, limit: int
    ) -> Sequence[common_pb2.SessionSummary]:
        """The visible sessions whose id starts with `prefix`, by id, at most `limit`."""
        request = tree_pb2.ResolveSessionPrefixRequest(
            space_id=str(space_id), prefix=prefix, limit=limit
        )
        reply = await self._call(
            "ResolveSessionPrefix",
            self._stub.ResolveSessionPrefix,
            request,
            tree_pb2.ResolveSessionPrefixResponse,
            caller,
        )
        return reply.sessions

    async def get_retention(
        self, caller: Caller, space_id: UUID
    ) -> common_pb2.RetentionPolicy | None:
        """The space's retention policy (None: none set)."""
        request = tree_pb2.GetRetentionRequest(space_id=str(space_id))
        reply = await self._call(
            "GetRetention", self._stub.GetRetention, request, tree_pb2.GetRetentionResponse, caller
        )
        return reply.policy if reply.HasField("policy") else None

    async def put_retention(
        self, caller: Caller, space_id: UUID, policy: common_pb2.RetentionPolicy
    ) -> common_pb2.RetentionPolicy:
        """Set the space's retention policy; as stored."""
        request = tree_pb2.PutRetentionRequest(space_id=str(space_id), policy=policy)
        reply = await self._call(
            "PutRetention", self._stub.PutRetention, request, tree_pb2.PutRetentionResponse, caller
        )
        return reply.policy

    async def apply_retention(
        self, caller: Caller, space_id: UUID, dry_run: bool, max_batches: int, page_token: str
    ) -> tree_pb2.ApplyRetentionResponse:
        """Apply (or list) the space's retention now; a long call (the caller's deadline)."""
        request = tree_pb2.ApplyRetentionRequest(
            space_id=str(space_id), dry_run=dry_run, max_batches=max_batches, page_token=page_token
        )
        reply: tree_pb2.ApplyRetentionResponse = await self._call(
            "ApplyRetention",
            self._stub.ApplyRetention,
            request,
            tree_pb2.ApplyRetentionResponse,
            caller,
            long=True,
        )
        return reply

    async def set_pinned(
        self, caller: Caller, space_id: UUID, session_id: UUID, pinned: bool
    ) -> bool:
        """Pin or unpin a session; the flag as stored."""
        request = tree_pb2.SetPinnedRequest(
            space_id=str(space_id), session_id=str(session_id), pinned=pinned
        )
        reply = await self._call(
            "SetPinned", self._stub.SetPinned, request, tree_pb2.SetPinnedResponse, caller
        )
        return reply.pinned
