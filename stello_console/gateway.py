"""The console's calls to the gateway, through the SDK with the user's key, as plain dicts.

The console is a client like any other: it imports no service package and
reaches the public `stello.agent.v1.AgentGateway` API through `stello_client`
(one channel for every user: each request calls `using` its caller's key and
space). The SDK adds the key, the deadline and its retries of safe calls (a
read that meets a gateway just restarting is asked again, so a restart is not
an outage to show). Records come page by page (ListRecords' byte-bounded pages
and their tokens), never a whole history at once (STYLE §17); the forest
changes node by node (GetTree of one session) as WatchSpace reports them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from stello_client import dicts
from stello_client.aio import AsyncClient
from stello_client.exceptions import NotFound
from stello_client.types import ContextName, SendResponse, TextDelta, ToolCall
from stello_console.convert import event_dict, record_dict, view_dict

JsonDict = dict[str, Any]

CONTEXTS: dict[str, ContextName | None] = {
    "": None,
    "none": "none",
    "inherit": "inherit",
    "compress": "compress",
}
STATUSES: dict[str, Literal["active", "archived"] | None] = {
    "": None,
    "active": "active",
    "archived": "archived",
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a console request acts as: the key it forwards and the space it names."""

    key: str
    space_id: str


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
    """Which page of records: `limit` of them after seq `after` (None: the newest ones, those
    before seq `before` when it is set), continuing a walk when `token` is a page's
    next_page_token."""

    limit: int
    after: int | None = None
    token: str = ""
    before: int | None = None


@dataclass(frozen=True, slots=True)
class RootForm:
    """The new-root dialog's fields, as CreateRootRequest takes them (None = not set)."""

    label: str | None = None
    system_prompt: str | None = None
    profile: str | None = None
    profile_vars: dict[str, str] = field(default_factory=dict)
    request_id: str = ""


class ConsoleGateway:
    """One console's gateway client; every method acts as the `Caller` it is given."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def _as(self, caller: Caller) -> AsyncClient:
        return self._client.using(key=caller.key, space=caller.space_id)

    async def tree(self, caller: Caller) -> list[JsonDict]:
        """The forest in pre-order (GetTree, capped by the gateway)."""
        return [dicts.node_dict(node) for node in await self._as(caller).get_tree()]

    async def session(self, caller: Caller, session_id: str) -> JsonDict:
        """The joined view of one session (GetSession)."""
        return view_dict(await self._as(caller).get_session(session_id))

    async def lineage(
        self, caller: Caller, session_id: str, page_size: int, page_token: str
    ) -> JsonDict:
        """One page of the session's ancestors, nearest first (GetLineage), as digests, and
        the token of the next page up the chain ("" = the page ends at the root)."""
        reply = await self._as(caller).get_lineage(
            session_id, page_size=page_size, page_token=page_token
        )
        return {
            "ancestors": [dicts.digest_dict(digest) for digest in reply.ancestors],
            "next_page_token": reply.next_page_token,
        }

    async def node(self, caller: Caller, session_id: str) -> JsonDict:
        """One session as a forest node (GetTree of it alone: `max_depth` 0)."""
        nodes = await self._as(caller).get_tree(root_id=session_id, max_depth=0)
        return dicts.node_dict(nodes[0])

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
            if isinstance(result, NotFound):
                missing.append(session_id)
            elif isinstance(result, BaseException):
                raise result
            else:
                nodes.append(result)
        return {"nodes": nodes, "missing": missing}

    async def space_name(self, caller: Caller) -> str:
        """The name of the caller's space ("" when the key does not list it: WhoAmI)."""
        reply = await self._as(caller).who_am_i()
        return next((s.name for s in reply.spaces if s.id == caller.space_id), "")

    async def resolve(self, caller: Caller, prefix: str, limit: int) -> list[JsonDict]:
        """The sessions whose id starts with `prefix`, at most `limit`, in id order
        (ResolveSessionPrefix): id, parent, label, status and turns of each."""
        return [
            {
                "id": s.id,
                "parent_id": dicts.optional(s, "parent_id"),
                "label": s.label,
                "status": dicts.status_name(s.status),
                "turn_count": s.turn_count,
            }
            for s in await self._as(caller).resolve_session_prefix(prefix, limit=limit)
        ]

    async def records(self, caller: Caller, session_id: str, page: RecordPage) -> JsonDict:
        """One page of records, oldest first, and the token of the next one ("" = none).

        Without `page.after` the walk goes from the newest record (before
        `page.before`, when set) to older ones; with it, from the record after
        that seq to newer ones. Pages are bounded in count and bytes; the token
        continues the same walk.
        """
        reply = await self._as(caller).list_records(
            session_id,
            limit=page.limit,
            after_seq=page.after,
            before_seq=page.before,
            newest_first=page.after is None,
            page_token=page.token,
        )
        return {
            "records": [record_dict(record) for record in reply.records],
            "next_page_token": reply.next_page_token,
        }

    async def digests(
        self, caller: Caller, status: str, page_token: str, page_size: int
    ) -> JsonDict:
        """One page of session digests (ListSessionDigests)."""
        reply = await self._as(caller).list_session_digests(
            status=STATUSES[status], page_size=page_size, page_token=page_token
        )
        return {
            "digests": [dicts.digest_dict(digest) for digest in reply.digests],
            "next_page_token": reply.next_page_token,
        }

    async def search(self, caller: Caller, query: str, page_token: str, page_size: int) -> JsonDict:
        """One page of the records matching `query`, newest first (SearchRecords)."""
        reply = await self._as(caller).search_records(
            query, page_size=page_size, page_token=page_token
        )
        return {
            "hits": [dicts.hit_dict(hit) for hit in reply.hits],
            "next_page_token": reply.next_page_token,
        }

    async def profiles(self, caller: Caller) -> list[JsonDict]:
        """The gateway's fork profiles: name, context and template variables."""
        return [
            {
                "name": profile.name,
                "context": dicts.context_name(profile.context) or "unspecified",
                "variables": list(profile.variables),
            }
            for profile in await self._as(caller).list_profiles()
        ]

    async def create_root(self, caller: Caller, form: RootForm) -> JsonDict:
        """A new root session (CreateRoot)."""
        session = await self._as(caller).create_root(
            label=form.label,
            system_prompt=form.system_prompt,
            profile=form.profile,
            profile_vars=form.profile_vars,
            request_id=form.request_id or None,
        )
        return dicts.session_dict(session)

    async def fork(self, caller: Caller, source_id: str, form: ForkForm) -> JsonDict:
        """A child of `source_id` (Fork)."""
        session = await self._as(caller).fork(
            source_id,
            form.label,
            context=CONTEXTS[form.context],
            inherit_until_seq=form.inherit_until_seq,
            profile=form.profile,
            profile_vars=form.profile_vars,
            system_prompt=form.system_prompt,
            prompt=form.prompt,
            request_id=form.request_id or None,
        )
        return dicts.session_dict(session)

    async def archive(self, caller: Caller, session_id: str) -> JsonDict:
        """Archive the session (never cascades)."""
        return dicts.session_dict(await self._as(caller).archive(session_id))

    async def unarchive(self, caller: Caller, session_id: str) -> JsonDict:
        """Make an archived session active again."""
        return dicts.session_dict(await self._as(caller).unarchive(session_id))

    async def rename(self, caller: Caller, session_id: str, label: str) -> JsonDict:
        """Give the session a new label (UpdateLabel); the session as it now is."""
        return dicts.session_dict(await self._as(caller).update_label(session_id, label))

    async def delete(self, caller: Caller, session_id: str) -> JsonDict:
        """Erase the session and its subtree; the erased ids."""
        return {"deleted_ids": await self._as(caller).delete_session(session_id)}

    async def put_insight(self, caller: Caller, session_id: str, content: str) -> JsonDict:
        """Replace the session's insight."""
        await self._as(caller).put_insight(session_id, content)
        return {"insight": content}

    async def put_memory(self, caller: Caller, session_id: str, content: str) -> JsonDict:
        """Replace the session's memory."""
        await self._as(caller).put_memory(session_id, content)
        return {"memory": content}

    async def send(
        self, caller: Caller, session_id: str, content: str, request_id: str
    ) -> AsyncIterator[tuple[str, JsonDict]]:
        """One SendStream turn as (event, data) pairs: delta, tool_call, then done.

        Closing the iterator early (the page went away) cancels the call, and a
        cancelled turn stores nothing.
        """
        events = self._as(caller).stream(session_id, content, request_id=request_id, timeout=None)
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    yield "delta", {"text": event.text}
                elif isinstance(event, ToolCall):
                    yield "tool_call", dicts.tool_call_dict(event)
                elif isinstance(event, SendResponse):
                    done = dicts.turn_dict(event)
                    done["records"] = [record_dict(record) for record in event.records]
                    yield "done", done
        finally:
            await events.aclose()

    async def watch(
        self, caller: Caller, after_cursor: str | None
    ) -> AsyncIterator[tuple[str, JsonDict]]:
        """The space's changes (WatchSpace) after `after_cursor` (None: from now).

        First ("ready", {cursor, resumed}) once the gateway fixed where the
        stream starts (its initial metadata), then ("change", event) per
        event; the gateway's failure raises, an end too (a watch never ends by
        itself): the page resumes, paced by itself. Closing the iterator
        cancels the call.
        """
        async with self._as(caller).watch(after_cursor=after_cursor, resume=False) as events:
            start = await events.start()
            if start is not None:
                yield "ready", {"cursor": start, "resumed": after_cursor is not None}
            async for event in events:
                yield "change", event_dict(event)
