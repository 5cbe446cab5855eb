"""Reads: the tree, records, digests, lineage, profiles, skills, who the key is.

Each paged RPC has its method (one page, with `next_page_token`) and an
iterator that walks every page (`records`, `digests`, `lineage`), one call
per page as the caller consumes them: nothing is read ahead. Reads are
always retried on UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Unpack

from stello.agent.v1 import agent_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.errors import shown
from stello_client.requests import request_of, set_optional
from stello_client.types import (
    DigestFilter,
    GetLineageResponse,
    ListRecordsResponse,
    ListSessionDigestsResponse,
    OrderName,
    ProfileInfo,
    Record,
    RecordRole,
    RoleName,
    SearchOrder,
    SearchRecordsResponse,
    SearchSessionsResponse,
    SessionDigest,
    SessionStatus,
    SkillInfo,
    StatusFilter,
    TreeNode,
    WhoAmIResponse,
    record_role,
    search_order,
    session_filter,
    status_filter,
)

MAX_PAGE = 1000


def _page_size(page_size: int) -> int:
    """A page size an iterator sends as ListRecords' `limit`: 0..MAX_PAGE (0: the default).

    Raises:
        TypeError: not a whole number, naming `page_size`.
        ValueError: outside 0..MAX_PAGE, naming `page_size`.
    """
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise TypeError(f"page_size: not a value this field holds, got {shown(page_size)}")
    if not 0 <= page_size <= MAX_PAGE:
        raise ValueError(
            f"page_size: must be 1..{MAX_PAGE} (0: the default, {MAX_PAGE}), got {page_size}"
        )
    return page_size


class ReadCalls(ClientBase):
    """GetTree, ListRecords, SearchRecords, SearchSessions, ListSessionDigests, GetLineage,
    ListProfiles, ListSkills, WhoAmI, and the iterators over the paged ones."""

    async def get_tree(
        self,
        *,
        root_id: str | None = None,
        max_depth: int | None = None,
        timeout: Timeout = DEFAULT,
    ) -> list[TreeNode]:
        """The forest, or the subtree under `root_id`, in pre-order, at most `max_depth`
        levels below the top (0 = the top alone) (GetTree; not paged, capped).

        Raises:
            NotFound: `root_id` is not in the space.
            TreeTooLarge: more nodes than the gateway's cap: narrow it.
        """
        request = request_of(agent_pb2.GetTreeRequest, space_id=await self.space_id())
        set_optional(request, root_id=root_id, max_depth=max_depth)
        reply: agent_pb2.GetTreeResponse = await self._unary(
            "GetTree", request, safe=True, timeout=timeout
        )
        return list(reply.nodes)

    async def list_records(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        role: RoleName | RecordRole | None = None,
        after_seq: int | None = None,
        before_seq: int | None = None,
        newest_first: bool = False,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
    ) -> ListRecordsResponse:
        """One page of a session's records, oldest first (ListRecords): `limit` of them (None:
        the largest page), filtered by role and seq bounds; `newest_first` picks the newest.
        Send `next_page_token` back as `page_token` (same other arguments) to continue: to
        newer records, or with `newest_first` to older ones.

        Raises:
            NotFound: the session is not in the space.
            InvalidArgument: a negative limit, offset, after_seq or before_seq, a page_token
                of another walk.
        """
        request = request_of(
            agent_pb2.ListRecordsRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            offset=offset,
            role=record_role(role),
            newest_first=newest_first,
            page_token=page_token,
        )
        set_optional(request, limit=limit, after_seq=after_seq, before_seq=before_seq)
        reply: ListRecordsResponse = await self._unary(
            "ListRecords", request, safe=True, timeout=timeout
        )
        return reply

    async def records(
        self,
        session_id: str,
        *,
        role: RoleName | RecordRole | None = None,
        after_seq: int | None = None,
        before_seq: int | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        page_size: int = MAX_PAGE,
        timeout: Timeout = DEFAULT,
    ) -> AsyncGenerator[Record, None]:
        """Every record of a session (or the first `limit`), walking the pages: oldest first,
        or with `newest_first` from the newest back to the oldest. `page_size`: records per
        call, at most 1000; 0 = the default (1000), as every `page_size` 0 is a default.
        `timeout`: each page's (one call, its retries included; default: the client's).

        Raises:
            TypeError: `page_size` or `limit` not a whole number, naming it.
            ValueError: `page_size` outside 0..1000 or a negative `limit`, naming it, before
                anything is sent (ListRecords' `limit` 0 means no records, and its bound
                would name `limit`, which is not this method's keyword for the page).
            NotFound: the session is not in the space.
        """
        per_page = _page_size(page_size) or MAX_PAGE
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit: not a value this field holds, got {shown(limit)}")
        if limit is not None and limit < 0:
            raise ValueError(f"limit: must not be negative, got {limit}")
        token, taken = "", 0
        while limit is None or taken < limit:
            size = per_page if limit is None else min(per_page, limit - taken)
            page = await self.list_records(
                session_id,
                limit=size,
                role=role,
                after_seq=after_seq,
                before_seq=before_seq,
                newest_first=newest_first,
                page_token=token,
                timeout=timeout,
            )
            found = list(reversed(page.records)) if newest_first else list(page.records)
            for record in found:
                yield record
            taken += len(found)
            token = page.next_page_token
            if not token:
                return

    async def search_records(
        self,
        query: str,
        *,
        session_id: str = "",
        root_id: str = "",
        order: OrderName | SearchOrder | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
    ) -> SearchRecordsResponse:
        """One page of the space's records matching `query` (SearchRecords; the syntax is
        in agent.proto: words, "phrases", -not, or, prefix*, CJK text), newest first or
        with `order="relevance"` best first, within one session's view (`session_id`) or
        one tree (`root_id`). Each hit has a snippet and its matches in code points. Send
        `next_page_token` back as `page_token` (same other arguments) to continue.

        Raises:
            InvalidArgument: a bad query (empty, too long, only negations), both scopes.
            NotFound: the scope's session is not in the space.
            SearchTooBroad: the search ran past the deployment's time for one: narrow it.
        """
        request = request_of(
            agent_pb2.SearchRecordsRequest,
            space_id=await self.space_id(),
            query=query,
            session_id=session_id,
            root_id=root_id,
            order=search_order(order),
            page_size=page_size,
            page_token=page_token,
        )
        reply: SearchRecordsResponse = await self._unary(
            "SearchRecords", request, safe=True, timeout=timeout
        )
        return reply

    async def search_sessions(
        self,
        query: str,
        *,
        status: StatusFilter | SessionStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
    ) -> SearchSessionsResponse:
        """One page of the space's sessions whose label or one metadata value matches
        `query`, newest first (SearchSessions: each word a prefix of a word; CJK text
        anywhere; keys are not searched). Archived sessions are included unless
        `status` filters ("active" or "archived"; "all" or None: both).

        Raises:
            InvalidArgument: a bad query, a page_token of another search.
            SearchTooBroad: the search ran past the deployment's time for one: narrow it.
        """
        request = request_of(
            agent_pb2.SearchSessionsRequest,
            space_id=await self.space_id(),
            query=query,
            status=status_filter(status),
            page_size=page_size,
            page_token=page_token,
        )
        reply: SearchSessionsResponse = await self._unary(
            "SearchSessions", request, safe=True, timeout=timeout
        )
        return reply

    async def list_session_digests(
        self,
        *,
        status: StatusFilter | SessionStatus | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
        **filters: Unpack[DigestFilter],
    ) -> ListSessionDigestsResponse:
        """One page of every session's digest (id, parent, label, status, turns, memory,
        insight, metadata), archived ones too unless `status` filters ("active" or
        "archived"; "all" or None: both, as the CLI's `--status all`)
        (ListSessionDigests; `page_size` 0 = 100, at most 1000).

        `filters` narrow the listing, each served by an index: `metadata` (every pair
        must match), `label_prefix`, `parent_id`, `root_id`, `roots_only`,
        `created_after` / `created_before`, `updated_after` / `updated_before`
        (timezone-aware datetimes; after inclusive, before exclusive). Pass the same
        filters with the next page's token.

        Raises:
            TypeError: a filter no listing has, or a value not of its type (a naive
                datetime too), naming the filter, before anything is sent.
            InvalidArgument: page_size out of range, a page_token not issued here, a bad
                filter (named `filter.<field>`).
        """
        request = request_of(
            agent_pb2.ListSessionDigestsRequest,
            space_id=await self.space_id(),
            status=status_filter(status),
            page_size=page_size,
            page_token=page_token,
        )
        if filters:
            request.filter.CopyFrom(session_filter(**filters))
        reply: ListSessionDigestsResponse = await self._unary(
            "ListSessionDigests", request, safe=True, timeout=timeout
        )
        return reply

    async def digests(
        self,
        *,
        status: StatusFilter | SessionStatus | None = None,
        page_size: int = MAX_PAGE,
        timeout: Timeout = DEFAULT,
        **filters: Unpack[DigestFilter],
    ) -> AsyncGenerator[SessionDigest, None]:
        """Every session's digest that passes the filters (as `list_session_digests`),
        walking the pages (in ListAll order); `timeout` is each page's (default: the
        client's)."""
        token = ""
        while True:
            page = await self.list_session_digests(
                status=status, page_size=page_size, page_token=token, timeout=timeout, **filters
            )
            for digest in page.digests:
                yield digest
            token = page.next_page_token
            if not token:
                return

    async def get_lineage(
        self,
        session_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: Timeout = DEFAULT,
    ) -> GetLineageResponse:
        """One page of a session's ancestors, nearest first, as digests (GetLineage;
        `page_size` 0 = 100, at most 1000; `next_page_token` continues up the chain).

        Raises:
            NotFound: the session is not in the space.
        """
        request = request_of(
            agent_pb2.GetLineageRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            page_size=page_size,
            page_token=page_token,
        )
        reply: GetLineageResponse = await self._unary(
            "GetLineage", request, safe=True, timeout=timeout
        )
        return reply

    async def lineage(
        self, session_id: str, *, page_size: int = MAX_PAGE, timeout: Timeout = DEFAULT
    ) -> AsyncGenerator[SessionDigest, None]:
        """Every ancestor of a session, nearest first (parent, ..., root), walking the pages;
        `timeout` is each page's (default: the client's)."""
        token = ""
        while True:
            page = await self.get_lineage(
                session_id, page_size=page_size, page_token=token, timeout=timeout
            )
            for digest in page.ancestors:
                yield digest
            token = page.next_page_token
            if not token:
                return

    async def list_profiles(self, *, timeout: Timeout = DEFAULT) -> list[ProfileInfo]:
        """The gateway's fork profiles, in its file's order (ListProfiles)."""
        request = request_of(agent_pb2.ListProfilesRequest, space_id=await self.space_id())
        reply: agent_pb2.ListProfilesResponse = await self._unary(
            "ListProfiles", request, safe=True, timeout=timeout
        )
        return list(reply.profiles)

    async def list_skills(
        self, *, session_id: str | None = None, timeout: Timeout = DEFAULT
    ) -> list[SkillInfo]:
        """The gateway's skills, or only those `session_id`'s config allows (ListSkills).

        Raises:
            NotFound: `session_id` is not in the space.
        """
        request = request_of(agent_pb2.ListSkillsRequest, space_id=await self.space_id())
        set_optional(request, session_id=session_id)
        reply: agent_pb2.ListSkillsResponse = await self._unary(
            "ListSkills", request, safe=True, timeout=timeout
        )
        return list(reply.skills)

    async def who_am_i(self, *, timeout: Timeout = DEFAULT) -> WhoAmIResponse:
        """Who the key belongs to, its scope and the spaces it reaches (WhoAmI).

        Raises:
            Unauthenticated: the key is unknown or revoked.
        """
        reply: WhoAmIResponse = await self._unary(
            "WhoAmI", agent_pb2.WhoAmIRequest(), safe=True, timeout=timeout
        )
        return reply
