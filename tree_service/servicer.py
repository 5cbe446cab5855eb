"""SessionTree over gRPC: validate and convert, call the service once, convert back.

No SQL, no rules, no try blocks: domain errors raised below are mapped to
statuses by the kernel's call chain, which checks auth and tenancy (a
foreign space_id answers NOT_FOUND) first and hands over the parsed space_id.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc

from stello.errors import Violations
from stello.rules import metadata
from stello.rules.prefixes import match_limit, parse_prefix
from stello.stored.idempotency import fingerprint
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from stello.validation import label, page_size, parse_uuid, space_uuid
from tree_service.convert import (
    add_summaries,
    config_from_proto,
    config_to_proto,
    entries_to_proto,
    filter_from_proto,
    metadata_change,
    node_to_proto,
    nodes_to_proto,
    optional_uuid,
    request_id,
    status_filter,
    swept_ids,
    tree_reply,
)
from tree_service.models import NewSession, PageQuery, SweepQuery, TreeQuery
from tree_service.retention.service import RetentionService
from tree_service.retention.wire import (
    PAGE_TOKEN_DRY_RUN_ONLY,
    POLICY_REQUIRED,
    actions_to_proto,
    page_cursor,
    page_token,
    policy_from_proto,
    policy_to_proto,
)
from tree_service.service import TreeService

Context = grpc.aio.ServicerContext[Any, Any]


def _session(request: Any) -> tuple[uuid.UUID, uuid.UUID]:
    """(space_id, session_id) of a request, both UUIDs, or INVALID_ARGUMENT naming them."""
    violations = Violations()
    space_id = space_uuid(request.space_id, violations)
    session_id = parse_uuid(request.session_id, "session_id", violations)
    violations.raise_if_any()
    return space_id, session_id


def _ref(request: Any) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """(space_id, from_id, to_id) of AddRef / RemoveRef."""
    violations = Violations()
    space_id = space_uuid(request.space_id, violations)
    from_id = parse_uuid(request.from_id, "from_id", violations)
    to_id = parse_uuid(request.to_id, "to_id", violations)
    violations.raise_if_any()
    return space_id, from_id, to_id


ANSWER_MARGIN_S = 0.1
"""DeleteSubtree's work ends this long before its caller's deadline, so that its own
DEADLINE_EXCEEDED (what was rolled back) is sent before gRPC ends the call: at the deadline
itself the two raced, and the server's answer failed in gRPC's core (logged as an
ExecuteBatchError), the client getting gRPC's bare "Deadline Exceeded"."""


class TreeServicer(tree_pb2_grpc.SessionTreeServicer):
    """The SessionTree RPCs, one service call each."""

    def __init__(
        self, service: TreeService, retention: RetentionService, *, max_slot_bytes: int
    ) -> None:
        self._service = service
        self._retention = retention
        self._max_slot_bytes = max_slot_bytes

    async def CreateSession(
        self, request: tree_pb2.CreateSessionRequest, context: Context
    ) -> tree_pb2.CreateSessionResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        new = NewSession(
            space_id=space_id,
            parent_id=optional_uuid(request, "parent_id", violations),
            label=label(request.label, violations) if request.HasField("label") else None,
            source_session_id=optional_uuid(request, "source_session_id", violations),
            config=(
                config_from_proto(request.config, violations, self._max_slot_bytes)
                if request.HasField("config")
                else None
            ),
            provisional=request.provisional,
            request_id=request_id(request.request_id, violations),
            request_hash=fingerprint(request) if request.request_id else b"",
            metadata=dict(request.metadata),
            copy_source_metadata=request.copy_source_metadata,
        )
        metadata.check_pairs(new.metadata, violations, "metadata")
        if request.copy_source_metadata and not request.HasField("source_session_id"):
            violations.add("copy_source_metadata", "needs source_session_id")
        violations.raise_if_any()
        node = await self._service.sessions.create_session(new)
        return tree_pb2.CreateSessionResponse(node=node_to_proto(node))

    async def CommitSession(
        self, request: tree_pb2.CommitSessionRequest, context: Context
    ) -> tree_pb2.CommitSessionResponse:
        node, pairs = await self._service.sessions.commit_session(*_session(request))
        return tree_pb2.CommitSessionResponse(node=node_to_proto(node), metadata=pairs)

    async def GetNode(
        self, request: tree_pb2.GetNodeRequest, context: Context
    ) -> tree_pb2.GetNodeResponse:
        if not request.include_config:
            node = await self._service.nodes.get_node(*_session(request))
            return tree_pb2.GetNodeResponse(node=node_to_proto(node))
        node, config, pairs = await self._service.nodes.get_node_with_config(*_session(request))
        reply = tree_pb2.GetNodeResponse(node=node_to_proto(node), metadata=pairs)
        if config is not None:
            reply.config.CopyFrom(config_to_proto(config))
        return reply

    async def ListRoots(
        self, request: tree_pb2.ListRootsRequest, context: Context
    ) -> tree_pb2.ListRootsResponse:
        space_id = space_uuid(request.space_id)
        nodes = await self._service.nodes.list_roots(space_id)
        return tree_pb2.ListRootsResponse(nodes=nodes_to_proto(nodes))

    async def ListAll(
        self, request: tree_pb2.ListAllRequest, context: Context
    ) -> tree_pb2.ListAllResponse:
        violations = Violations()
        query = PageQuery(
            space_id=space_uuid(request.space_id, violations),
            status=status_filter(request.status, violations),
            page_size=page_size(request.page_size, violations),
            page_token=request.page_token,
            filter=filter_from_proto(request.filter, violations),
        )
        violations.raise_if_any()
        page = await self._service.nodes.list_all(query)
        reply = tree_pb2.ListAllResponse(next_page_token=page.next_page_token)
        add_summaries(reply.sessions, page.sessions)
        return reply

    async def GetChildren(
        self, request: tree_pb2.GetChildrenRequest, context: Context
    ) -> tree_pb2.GetChildrenResponse:
        nodes = await self._service.nodes.get_children(*_session(request))
        return tree_pb2.GetChildrenResponse(nodes=nodes_to_proto(nodes))

    async def GetSiblings(
        self, request: tree_pb2.GetSiblingsRequest, context: Context
    ) -> tree_pb2.GetSiblingsResponse:
        nodes = await self._service.nodes.get_siblings(*_session(request))
        return tree_pb2.GetSiblingsResponse(nodes=nodes_to_proto(nodes))

    async def GetAncestors(
        self, request: tree_pb2.GetAncestorsRequest, context: Context
    ) -> tree_pb2.GetAncestorsResponse:
        nodes = await self._service.nodes.get_ancestors(*_session(request))
        return tree_pb2.GetAncestorsResponse(nodes=nodes_to_proto(nodes))

    async def ListAncestors(
        self, request: tree_pb2.ListAncestorsRequest, context: Context
    ) -> tree_pb2.ListAncestorsResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        session_id = parse_uuid(request.session_id, "session_id", violations)
        size = page_size(request.page_size, violations)
        violations.raise_if_any()
        entries, token = await self._service.nodes.list_ancestors(
            space_id, session_id, size, request.page_token
        )
        return tree_pb2.ListAncestorsResponse(
            nodes=entries_to_proto(entries), next_page_token=token
        )

    async def GetTree(self, request: tree_pb2.GetTreeRequest, context: Context) -> bytes:
        """The reply's bytes, built from the rows (`tree_reply`; served raw: `RAW_REPLIES`)."""
        violations = Violations()
        max_depth = request.max_depth if request.HasField("max_depth") else None
        if max_depth is not None and max_depth < 0:
            violations.add("max_depth", f"must not be negative, got {max_depth}")
        query = TreeQuery(
            space_id=space_uuid(request.space_id, violations),
            root_id=optional_uuid(request, "root_id", violations),
            max_depth=max_depth,
        )
        violations.raise_if_any()
        return tree_reply(await self._service.trees.get_tree(query))

    async def AddRef(
        self, request: tree_pb2.AddRefRequest, context: Context
    ) -> tree_pb2.AddRefResponse:
        node = await self._service.refs.add_ref(*_ref(request))
        return tree_pb2.AddRefResponse(node=node_to_proto(node))

    async def RemoveRef(
        self, request: tree_pb2.RemoveRefRequest, context: Context
    ) -> tree_pb2.RemoveRefResponse:
        node = await self._service.refs.remove_ref(*_ref(request))
        return tree_pb2.RemoveRefResponse(node=node_to_proto(node))

    async def Archive(
        self, request: tree_pb2.ArchiveRequest, context: Context
    ) -> tree_pb2.ArchiveResponse:
        node = await self._service.sessions.set_status(
            *_session(request), "archived", linked=not request.without_links
        )
        return tree_pb2.ArchiveResponse(node=node_to_proto(node))

    async def Unarchive(
        self, request: tree_pb2.UnarchiveRequest, context: Context
    ) -> tree_pb2.UnarchiveResponse:
        node = await self._service.sessions.set_status(
            *_session(request), "active", linked=not request.without_links
        )
        return tree_pb2.UnarchiveResponse(node=node_to_proto(node))

    async def UpdateLabel(
        self, request: tree_pb2.UpdateLabelRequest, context: Context
    ) -> tree_pb2.UpdateLabelResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        session_id = parse_uuid(request.session_id, "session_id", violations)
        new_label = label(request.label, violations)
        violations.raise_if_any()
        node = await self._service.sessions.update_label(
            space_id, session_id, new_label, linked=not request.without_links
        )
        return tree_pb2.UpdateLabelResponse(node=node_to_proto(node))

    async def GetConfig(
        self, request: tree_pb2.GetConfigRequest, context: Context
    ) -> tree_pb2.GetConfigResponse:
        config = await self._service.sessions.get_config(*_session(request))
        if config is None:
            return tree_pb2.GetConfigResponse()
        return tree_pb2.GetConfigResponse(config=config_to_proto(config))

    async def PutConfig(
        self, request: tree_pb2.PutConfigRequest, context: Context
    ) -> tree_pb2.PutConfigResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        session_id = parse_uuid(request.session_id, "session_id", violations)
        if not request.HasField("config"):
            violations.add("config", "is required (an empty SessionConfig is valid)")
        config = config_from_proto(request.config, violations, self._max_slot_bytes)
        violations.raise_if_any()
        stored = await self._service.sessions.put_config(space_id, session_id, config)
        return tree_pb2.PutConfigResponse(config=config_to_proto(stored))

    async def UpdateSessionMetadata(
        self, request: tree_pb2.UpdateSessionMetadataRequest, context: Context
    ) -> tree_pb2.UpdateSessionMetadataResponse:
        violations = Violations()
        change = metadata_change(request, violations)
        violations.raise_if_any()
        pairs = await self._service.sessions.update_metadata(change)
        return tree_pb2.UpdateSessionMetadataResponse(metadata=pairs)

    async def DeleteSubtree(
        self, request: tree_pb2.DeleteSubtreeRequest, context: Context
    ) -> tree_pb2.DeleteSubtreeResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        session_id = parse_uuid(request.session_id, "session_id", violations)
        limit = request.max_reply_bytes
        if limit < 0:
            violations.add("max_reply_bytes", f"must not be negative, got {limit}")
        violations.raise_if_any()
        left = context.time_remaining()
        erased = await self._service.erasure.delete_subtree(
            space_id,
            session_id,
            count_only=request.count_only,
            reply_limit=limit,
            deadline=None if left is None else time.monotonic() + max(0.0, left - ANSWER_MARGIN_S),
        )
        ids = () if request.count_only else [str(i) for i in erased]
        return tree_pb2.DeleteSubtreeResponse(deleted_ids=ids, deleted_count=len(erased))

    async def SweepProvisional(
        self, request: tree_pb2.SweepProvisionalRequest, context: Context
    ) -> tree_pb2.SweepProvisionalResponse:
        if request.older_than_s < 0:
            violations = Violations()
            violations.add("older_than_s", f"must not be negative, got {request.older_than_s}")
            violations.raise_if_any()
        query = SweepQuery(older_than_s=float(request.older_than_s), dry_run=request.dry_run)
        removed = await self._service.sweeps.sweep(query)
        return tree_pb2.SweepProvisionalResponse(removed_ids=swept_ids(removed))

    async def ResolveSessionPrefix(
        self, request: tree_pb2.ResolveSessionPrefixRequest, context: Context
    ) -> tree_pb2.ResolveSessionPrefixResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        digits = parse_prefix(request.prefix, violations)
        limit = match_limit(request.limit, violations)
        violations.raise_if_any()
        found = await self._service.nodes.resolve_prefix(space_id, digits, limit)
        reply = tree_pb2.ResolveSessionPrefixResponse()
        add_summaries(reply.sessions, found)
        return reply

    async def GetRetention(
        self, request: tree_pb2.GetRetentionRequest, context: Context
    ) -> tree_pb2.GetRetentionResponse:
        policy = await self._retention.policy(space_uuid(request.space_id))
        reply = tree_pb2.GetRetentionResponse()
        if policy is not None:
            reply.policy.CopyFrom(policy_to_proto(policy))
        return reply

    async def PutRetention(
        self, request: tree_pb2.PutRetentionRequest, context: Context
    ) -> tree_pb2.PutRetentionResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        if not request.HasField("policy"):
            violations.add("policy", POLICY_REQUIRED)
        policy = policy_from_proto(request.policy, violations)
        violations.raise_if_any()
        stored = await self._retention.put_policy(space_id, policy)
        return tree_pb2.PutRetentionResponse(policy=policy_to_proto(stored))

    async def ApplyRetention(
        self, request: tree_pb2.ApplyRetentionRequest, context: Context
    ) -> tree_pb2.ApplyRetentionResponse:
        violations = Violations()
        space_id = space_uuid(request.space_id, violations)
        if request.max_batches < 0:
            violations.add("max_batches", f"must not be negative, got {request.max_batches}")
        if request.page_token and not request.dry_run:
            violations.add("page_token", PAGE_TOKEN_DRY_RUN_ONLY)
        violations.raise_if_any()
        if request.dry_run:
            applied = await self._retention.dry_run(space_id, page_cursor(request.page_token))
        else:
            applied = await self._retention.apply(space_id, request.max_batches)
        return tree_pb2.ApplyRetentionResponse(
            actions=actions_to_proto(applied),
            done=applied.done,
            next_page_token=page_token(applied.next_page),
        )

    async def SetPinned(
        self, request: tree_pb2.SetPinnedRequest, context: Context
    ) -> tree_pb2.SetPinnedResponse:
        space_id, session_id = _session(request)
        pinned = await self._retention.set_pinned(space_id, session_id, request.pinned)
        return tree_pb2.SetPinnedResponse(pinned=pinned)
