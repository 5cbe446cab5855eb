"""The console's calls to the gateway, over gRPC with the user's key, answered as plain dicts.

The console is a client like any other: it imports no service package and
reads nothing but the public `stello.agent.v1.AgentGateway` API. Records come
page by page (ListRecords' byte-bounded pages and their tokens), never a whole
history at once (STYLE §17); the forest changes node by node (GetTree of one
session) as WatchSpace reports them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import WATCH_CURSOR_METADATA, bearer_metadata
from stello.common.v1 import common_pb2
from stello_client import dicts
from stello_console.convert import event_dict, record_dict, view_dict

JsonDict = dict[str, Any]

# How long a read that met UNAVAILABLE waits for the channel before it is asked again.
READY_WAIT_S = 2.0

CONTEXTS = {
    "": common_pb2.FORK_CONTEXT_UNSPECIFIED,
    "none": common_pb2.FORK_CONTEXT_NONE,
    "inherit": common_pb2.FORK_CONTEXT_INHERIT,
    "compress": common_pb2.FORK_CONTEXT_COMPRESS,
}
STATUSES = {
    "": common_pb2.SESSION_STATUS_UNSPECIFIED,
    "active": common_pb2.SESSION_STATUS_ACTIVE,
    "archived": common_pb2.SESSION_STATUS_ARCHIVED,
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a console request acts as: the key it forwards and the space it names."""

    key: str
    space_id: str

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Per-call metadata authenticating as the key."""
        return bearer_metadata(self.key)


@dataclass(frozen=True, slots=True)
class ForkForm:
    """The fork dialog's fields, as ForkRequest takes them (None = not set)."""

    label: str
    context: str = ""
    inherit_until_seq: int | None = None
    profile: str | None = None
    profile_vars: dict[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    prompt: str | None = None
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class RecordPage:
    """Which page of records: `limit` of them after seq `after` (None: the newest ones),
    continuing a walk when `token` is a page's next_page_token."""

    limit: int
    after: int | None = None
    token: str = ""


@dataclass(frozen=True, slots=True)
class RootForm:
    """The new-root dialog's fields, as CreateRootRequest takes them (None = not set)."""

    label: str | None = None
    system_prompt: str | None = None
    profile: str | None = None
    profile_vars: dict[str, str] = field(default_factory=dict)
    request_id: str = ""


class ConsoleGateway:
    """One console's gateway stub; every method acts as the `Caller` it is given."""

    def __init__(self, channel: grpc.aio.Channel, timeout_s: float = 30.0) -> None:
        self._channel = channel
        self._stub = agent_pb2_grpc.AgentGatewayStub(channel)
        self._timeout = timeout_s

    def _call(self, caller: Caller) -> dict[str, Any]:
        return {"timeout": self._timeout, "metadata": caller.metadata}

    async def _read(
        self, method: Callable[..., Awaitable[Any]], request: Any, caller: Caller
    ) -> Any:
        """A read, asked once more after UNAVAILABLE if the channel is ready within
        READY_WAIT_S: a gateway that has just come back (the channel still in its
        reconnect backoff) is not an outage to show. Reads are safe to repeat."""
        try:
            return await method(request, **self._call(caller))
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            try:
                await asyncio.wait_for(self._channel.channel_ready(), READY_WAIT_S)
            except TimeoutError:
                raise error from None
            return await method(request, **self._call(caller))

    async def tree(self, caller: Caller) -> list[JsonDict]:
        """The forest in pre-order (GetTree, capped by the gateway)."""
        reply = await self._read(
            self._stub.GetTree, agent_pb2.GetTreeRequest(space_id=caller.space_id), caller
        )
        return [dicts.node_dict(node) for node in reply.nodes]

    async def session(self, caller: Caller, session_id: str) -> JsonDict:
        """The joined view of one session (GetSession)."""
        reply = await self._read(
            self._stub.GetSession,
            agent_pb2.GetSessionRequest(space_id=caller.space_id, session_id=session_id),
            caller,
        )
        return view_dict(reply.session)

    async def lineage(
        self, caller: Caller, session_id: str, page_size: int, page_token: str
    ) -> JsonDict:
        """One page of the session's ancestors, nearest first (GetLineage), as digests, and
        the token of the next page up the chain ("" = the page ends at the root)."""
        reply = await self._read(
            self._stub.GetLineage,
            agent_pb2.GetLineageRequest(
                space_id=caller.space_id,
                session_id=session_id,
                page_size=page_size,
                page_token=page_token,
            ),
            caller,
        )
        return {
            "ancestors": [dicts.digest_dict(digest) for digest in reply.ancestors],
            "next_page_token": reply.next_page_token,
        }

    async def node(self, caller: Caller, session_id: str) -> JsonDict:
        """One session as a forest node (GetTree of it alone: `max_depth` 0)."""
        reply = await self._read(
            self._stub.GetTree,
            agent_pb2.GetTreeRequest(space_id=caller.space_id, root_id=session_id, max_depth=0),
            caller,
        )
        return dicts.node_dict(reply.nodes[0])

    async def nodes(self, caller: Caller, session_ids: list[str]) -> JsonDict:
        """The sessions as forest nodes, in the order given, and the ids no longer there.

        One GetTree of each (at once); NOT_FOUND names a session that is gone
        (or never was in the space); any other failure raises.
        """
        found = await asyncio.gather(
            *(self.node(caller, session_id) for session_id in session_ids),
            return_exceptions=True,
        )
        nodes, missing = [], []
        for session_id, result in zip(session_ids, found, strict=True):
            if isinstance(result, grpc.aio.AioRpcError) and (
                result.code() == grpc.StatusCode.NOT_FOUND
            ):
                missing.append(session_id)
            elif isinstance(result, BaseException):
                raise result
            else:
                nodes.append(result)
        return {"nodes": nodes, "missing": missing}

    async def records(self, caller: Caller, session_id: str, page: RecordPage) -> JsonDict:
        """One page of records, oldest first, and the token of the next one ("" = none).

        Without `page.after` the walk goes from the newest record to older ones;
        with it, from the record after that seq to newer ones. Pages are
        bounded in count and bytes; the token continues the same walk.
        """
        request = agent_pb2.ListRecordsRequest(
            space_id=caller.space_id,
            session_id=session_id,
            limit=page.limit,
            newest_first=page.after is None,
            page_token=page.token,
        )
        if page.after is not None:
            request.after_seq = page.after
        reply = await self._read(self._stub.ListRecords, request, caller)
        return {
            "records": [record_dict(record) for record in reply.records],
            "next_page_token": reply.next_page_token,
        }

    async def digests(
        self, caller: Caller, status: str, page_token: str, page_size: int
    ) -> JsonDict:
        """One page of session digests (ListSessionDigests)."""
        reply = await self._read(
            self._stub.ListSessionDigests,
            agent_pb2.ListSessionDigestsRequest(
                space_id=caller.space_id,
                status=STATUSES[status],
                page_size=page_size,
                page_token=page_token,
            ),
            caller,
        )
        return {
            "digests": [dicts.digest_dict(digest) for digest in reply.digests],
            "next_page_token": reply.next_page_token,
        }

    async def profiles(self, caller: Caller) -> list[JsonDict]:
        """The gateway's fork profiles: name, context and template variables."""
        reply = await self._read(
            self._stub.ListProfiles, agent_pb2.ListProfilesRequest(space_id=caller.space_id), caller
        )
        return [
            {
                "name": profile.name,
                "context": common_pb2.ForkContext.Name(profile.context)
                .removeprefix("FORK_CONTEXT_")
                .lower(),
                "variables": list(profile.variables),
            }
            for profile in reply.profiles
        ]

    async def create_root(self, caller: Caller, form: RootForm) -> JsonDict:
        """A new root session (CreateRoot)."""
        request = agent_pb2.CreateRootRequest(
            space_id=caller.space_id, profile_vars=form.profile_vars, request_id=form.request_id
        )
        _set_optional(
            request, label=form.label, system_prompt=form.system_prompt, profile=form.profile
        )
        reply = await self._stub.CreateRoot(request, **self._call(caller))
        return dicts.session_dict(reply.session)

    async def fork(self, caller: Caller, source_id: str, form: ForkForm) -> JsonDict:
        """A child of `source_id` (Fork)."""
        request = agent_pb2.ForkRequest(
            space_id=caller.space_id,
            source_session_id=source_id,
            label=form.label,
            context=CONTEXTS[form.context],
            profile_vars=form.profile_vars,
            request_id=form.request_id,
        )
        _set_optional(
            request,
            inherit_until_seq=form.inherit_until_seq,
            profile=form.profile,
            system_prompt=form.system_prompt,
            prompt=form.prompt,
        )
        reply = await self._stub.Fork(request, **self._call(caller))
        return dicts.session_dict(reply.session)

    async def archive(self, caller: Caller, session_id: str) -> JsonDict:
        """Archive the session (never cascades)."""
        reply = await self._stub.Archive(
            agent_pb2.ArchiveRequest(space_id=caller.space_id, session_id=session_id),
            **self._call(caller),
        )
        return dicts.session_dict(reply.session)

    async def unarchive(self, caller: Caller, session_id: str) -> JsonDict:
        """Make an archived session active again."""
        reply = await self._stub.Unarchive(
            agent_pb2.UnarchiveRequest(space_id=caller.space_id, session_id=session_id),
            **self._call(caller),
        )
        return dicts.session_dict(reply.session)

    async def delete(self, caller: Caller, session_id: str) -> JsonDict:
        """Erase the session and its subtree; the erased ids."""
        reply = await self._stub.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=caller.space_id, session_id=session_id),
            **self._call(caller),
        )
        return {"deleted_ids": list(reply.deleted_ids)}

    async def put_insight(self, caller: Caller, session_id: str, content: str) -> JsonDict:
        """Replace the session's insight."""
        await self._stub.PutInsight(
            agent_pb2.PutInsightRequest(
                space_id=caller.space_id, session_id=session_id, content=content
            ),
            **self._call(caller),
        )
        return {"insight": content}

    async def put_memory(self, caller: Caller, session_id: str, content: str) -> JsonDict:
        """Replace the session's memory."""
        await self._stub.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=caller.space_id, session_id=session_id, content=content
            ),
            **self._call(caller),
        )
        return {"memory": content}

    async def send(
        self, caller: Caller, session_id: str, content: str, request_id: str
    ) -> AsyncIterator[tuple[str, JsonDict]]:
        """One SendStream turn as (event, data) pairs: delta, tool_call, then done.

        Closing the iterator early (the page went away) cancels the call, and a
        cancelled turn stores nothing.
        """
        call = self._stub.SendStream(
            agent_pb2.SendStreamRequest(
                space_id=caller.space_id,
                session_id=session_id,
                content=content,
                request_id=request_id,
            ),
            metadata=caller.metadata,
        )
        try:
            async for event in call:
                kind = event.WhichOneof("event")
                if kind == "text_delta":
                    yield "delta", {"text": event.text_delta.text}
                elif kind == "tool_call":
                    yield "tool_call", dicts.tool_call_dict(event.tool_call)
                elif kind == "done":
                    done = dicts.turn_dict(event.done)
                    done["records"] = [record_dict(record) for record in event.done.records]
                    yield "done", done
        finally:
            call.cancel()

    async def watch(
        self, caller: Caller, after_cursor: str | None
    ) -> AsyncIterator[tuple[str, JsonDict]]:
        """The space's changes (WatchSpace) after `after_cursor` (None: from now).

        First ("ready", {cursor, resumed}) once the gateway fixed where the
        stream starts (its initial metadata), then ("change", event) per
        event; the gateway's failure raises. Closing the iterator cancels the call.
        """
        request = agent_pb2.WatchSpaceRequest(space_id=caller.space_id)
        if after_cursor is not None:
            request.after_cursor = after_cursor
        call = self._stub.WatchSpace(request, metadata=caller.metadata)
        try:
            start = dict(await call.initial_metadata() or ()).get(WATCH_CURSOR_METADATA)
            if start is not None:
                yield "ready", {"cursor": str(start), "resumed": after_cursor is not None}
            async for message in call:
                yield "change", event_dict(message.event)
        finally:
            call.cancel()


def _set_optional(message: Any, **fields: Any) -> None:
    """Set each field that is not None (proto3 optional fields keep their presence)."""
    for name, value in fields.items():
        if value is not None:
            setattr(message, name, value)
