"""The console's JSON endpoints and its server-sent-events relays of SendStream and WatchSpace.

Each handler does three things, like a servicer (STYLE §2): read the request
into typed values (a wrong type is INVALID_ARGUMENT naming the form field),
make one `ConsoleGateway` call as the request's caller, answer JSON. Gateway
errors become JSON errors in one handler (`stello_console.errors`).

Who a request acts as: the local console of `stello up` acts with the key it
was started with (its page signed in with the launch token); a deployed
console forwards the key the page sends in ``Authorization: Bearer`` with the
space in ``X-Stello-Space`` (kept in the browser's sessionStorage, never in a URL).
A handler knows its caller before it reads a body (a deployed console answers a request
without a key 401 unread), and reads at most MAX_BODY_BYTES of it: a larger
Content-Length, or a streamed body that grows past it, is 413 naming the limit.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from stello_client.exceptions import ConfigurationError, RpcError
from stello_console.errors import (
    ConsoleInputError,
    configuration_error,
    page_error,
    rpc_error_body,
)
from stello_console.gateway import (
    CONTEXTS,
    STATUSES,
    Caller,
    ConsoleGateway,
    ForkForm,
    RecordPage,
    RootForm,
)
from stello_console.inputs import (
    MAX_SEQ,
    check_id,
    cursor,
    json_body,
    profile_vars,
    query_int,
    text,
    whole_number,
)
from stello_console.live import LiveRelay, sse

CallerOf = Callable[[Request], Caller]
RECORDS_PAGE = 50
DIGESTS_PAGE = 50
LINEAGE_PAGE = 50
MAX_LINEAGE_PAGE = 1000
SEARCH_PAGE = 20
MAX_SEARCH_PAGE = 100
MAX_NODES = 100


def fixed_caller(caller: Caller) -> CallerOf:
    """Every request acts as `caller` (the local console)."""
    return lambda _request: caller


def header_caller(request: Request) -> Caller:
    """The key and space the page sent (a deployed console)."""
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    space = request.headers.get("x-stello-space", "").strip()
    if scheme.lower() != "bearer" or not key.strip() or not space:
        raise ConsoleInputError(
            "sign in: enter your API key and space id in the page", 401, "UNAUTHENTICATED"
        )
    return Caller(key.strip(), space)


class ConsoleApi:
    """The endpoints, over one gateway stub; `caller_of` says who each request acts as."""

    def __init__(
        self,
        gateway: ConsoleGateway,
        live: LiveRelay,
        caller_of: CallerOf,
        *,
        local: bool,
        address: str,
    ) -> None:
        self._gateway = gateway
        self._live = live
        self._caller_of = caller_of
        self._local = local
        self._address = address

    def routes(self) -> list[Route]:
        """The /api routes."""
        return [
            Route("/api/config", self.config),
            Route("/api/tree", self.tree),
            Route("/api/nodes", self.nodes),
            Route("/api/events", self.events),
            Route("/api/roots", self.create_root, methods=["POST"]),
            Route("/api/digests", self.digests),
            Route("/api/search", self.search),
            Route("/api/profiles", self.profiles),
            Route("/api/sessions/{id}", self.session),
            Route("/api/sessions/{id}", self.delete, methods=["DELETE"]),
            Route("/api/sessions/{id}/records", self.records),
            Route("/api/sessions/{id}/lineage", self.lineage),
            Route("/api/sessions/{id}/send", self.send, methods=["POST"]),
            Route("/api/sessions/{id}/fork", self.fork, methods=["POST"]),
            Route("/api/sessions/{id}/archive", self.archive, methods=["POST"]),
            Route("/api/sessions/{id}/unarchive", self.unarchive, methods=["POST"]),
            Route("/api/sessions/{id}/label", self.rename, methods=["PUT"]),
            Route("/api/sessions/{id}/insight", self.put_insight, methods=["PUT"]),
            Route("/api/sessions/{id}/memory", self.put_memory, methods=["PUT"]),
        ]

    def error_response(self, request: Request, exc: Exception) -> Response:
        """A gateway or input error as the page's JSON error."""
        if isinstance(exc, RpcError):
            space = "" if self._local else request.headers.get("x-stello-space", "").strip()
            return JSONResponse(*page_error(exc, self._address, space, local=self._local))
        if isinstance(exc, ConfigurationError):
            exc = configuration_error(exc)
        assert isinstance(exc, ConsoleInputError)
        return JSONResponse(exc.body(), exc.status)

    async def config(self, request: Request) -> Response:
        """How the page signs in, the local space, and that live updates run."""
        space = self._caller_of(request).space_id if self._local else None
        return JSONResponse(
            {"mode": "local" if self._local else "key", "space_id": space, "live": True}
        )

    async def tree(self, request: Request) -> Response:
        """The forest."""
        return JSONResponse({"nodes": await self._gateway.tree(self._caller_of(request))})

    async def nodes(self, request: Request) -> Response:
        """Forest nodes by id, in the order asked (?id=A&id=B, at most 100): {nodes, missing},
        `missing` naming those no longer in the space."""
        ids = request.query_params.getlist("id")
        if not 1 <= len(ids) <= MAX_NODES:
            raise ConsoleInputError(f"id: give 1 to {MAX_NODES} session ids, got {len(ids)}")
        for value in ids:
            check_id(value, "id")
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.nodes(caller, ids))

    async def events(self, request: Request) -> Response:
        """The space's changes as server-sent events (`stello_console.live`), after the cursor
        in ``Last-Event-ID`` or ``?after=`` (neither: from now)."""
        after = cursor(request, "last-event-id", "Last-Event-ID") or cursor(request, None, "after")
        caller = self._caller_of(request)
        return _event_stream(self._live.stream(caller, after))

    async def session(self, request: Request) -> Response:
        """One session's joined view."""
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.session(caller, request.path_params["id"]))

    async def lineage(self, request: Request) -> Response:
        """A page of the session's ancestors, nearest first (parent, ..., root):
        ?page_size=N (default 50, at most 1000) &page_token= (a page's next_page_token)
        continues up the chain: {ancestors, next_page_token}, each ancestor a digest
        (id, parent_id, label, status, turn_count, memory, insight)."""
        size = query_int(request, "page_size", LINEAGE_PAGE, minimum=1, maximum=MAX_LINEAGE_PAGE)
        assert size is not None
        token = request.query_params.get("page_token", "")
        caller = self._caller_of(request)
        session_id = request.path_params["id"]
        return JSONResponse(await self._gateway.lineage(caller, session_id, size, token))

    async def records(self, request: Request) -> Response:
        """A page of records, oldest first: the newest ones, the newest before ?before=SEQ,
        or those after ?after=SEQ (not both); &limit=N (default 50); &page_token= (a page's
        next_page_token) continues the walk, to older records without `after`, to newer ones
        with it: {records, next_page_token}. A window around a record is two reads:
        before=SEQ+1 and after=SEQ."""
        after = query_int(request, "after", None, minimum=0, maximum=MAX_SEQ)
        before = query_int(request, "before", None, minimum=1, maximum=MAX_SEQ)
        if after is not None and before is not None:
            raise ConsoleInputError("after, before: give one of them, not both")
        limit = query_int(request, "limit", RECORDS_PAGE, minimum=1, maximum=1000)
        assert limit is not None
        page = RecordPage(limit, after, request.query_params.get("page_token", ""), before)
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.records(caller, request.path_params["id"], page))

    async def digests(self, request: Request) -> Response:
        """A page of digests: ?status=active|archived &page_token= &page_size= (default 50)."""
        status = request.query_params.get("status", "")
        if status not in STATUSES:
            raise ConsoleInputError(f"status: must be active, archived or empty, got {status!r}")
        size = query_int(request, "page_size", DIGESTS_PAGE, minimum=1, maximum=1000)
        assert size is not None
        token = request.query_params.get("page_token", "")
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.digests(caller, status, token, size))

    async def search(self, request: Request) -> Response:
        """A page of the records matching ?q= (SearchRecords' syntax), newest first:
        &page_size= (default 20, at most 100) &page_token= continues: {hits, next_page_token},
        each hit {session_id, label, seq, role, created_at, snippet, snippet_offset,
        matches: [[start, end], ...] in code points, reader_count, rank}."""
        size = query_int(request, "page_size", SEARCH_PAGE, minimum=1, maximum=MAX_SEARCH_PAGE)
        assert size is not None
        query = request.query_params.get("q", "")
        token = request.query_params.get("page_token", "")
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.search(caller, query, token, size))

    async def profiles(self, request: Request) -> Response:
        """The fork profiles."""
        caller = self._caller_of(request)
        return JSONResponse({"profiles": await self._gateway.profiles(caller)})

    async def create_root(self, request: Request) -> Response:
        """A new root: {label?, system_prompt?, profile?, profile_vars?, request_id?}."""
        caller = self._caller_of(request)
        body = await json_body(request)
        form = RootForm(
            label=text(body, "label"),
            system_prompt=text(body, "system_prompt"),
            profile=text(body, "profile"),
            profile_vars=profile_vars(body),
            request_id=text(body, "request_id") or "",
        )
        return JSONResponse(await self._gateway.create_root(caller, form))

    async def fork(self, request: Request) -> Response:
        """A fork: {label, context, inherit_until_seq?, profile?, profile_vars?, system_prompt?,
        prompt?, request_id?}."""
        caller = self._caller_of(request)
        body = await json_body(request)
        context = text(body, "context") or ""
        if context not in CONTEXTS:
            raise ConsoleInputError(f"context: must be none, inherit or compress, got {context!r}")
        form = ForkForm(
            label=text(body, "label") or "",
            context=context,
            inherit_until_seq=whole_number(body, "inherit_until_seq"),
            profile=text(body, "profile"),
            profile_vars=profile_vars(body),
            system_prompt=text(body, "system_prompt"),
            prompt=text(body, "prompt"),
            request_id=text(body, "request_id") or "",
        )
        return JSONResponse(await self._gateway.fork(caller, request.path_params["id"], form))

    async def archive(self, request: Request) -> Response:
        """Archive a session."""
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.archive(caller, request.path_params["id"]))

    async def unarchive(self, request: Request) -> Response:
        """Unarchive a session."""
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.unarchive(caller, request.path_params["id"]))

    async def rename(self, request: Request) -> Response:
        """Rename a session: {label}; the gateway judges the label (1..200 characters, one
        line) and answers the session as it now is."""
        caller = self._caller_of(request)
        label = text(await json_body(request), "label", required=True)
        assert label is not None
        session_id = request.path_params["id"]
        return JSONResponse(await self._gateway.rename(caller, session_id, label))

    async def delete(self, request: Request) -> Response:
        """Delete a session and its subtree (the page asked for confirmation)."""
        caller = self._caller_of(request)
        return JSONResponse(await self._gateway.delete(caller, request.path_params["id"]))

    async def put_insight(self, request: Request) -> Response:
        """Replace the insight: {content}."""
        caller = self._caller_of(request)
        content = text(await json_body(request), "content", required=True)
        assert content is not None
        session_id = request.path_params["id"]
        return JSONResponse(await self._gateway.put_insight(caller, session_id, content))

    async def put_memory(self, request: Request) -> Response:
        """Replace the memory: {content}."""
        caller = self._caller_of(request)
        content = text(await json_body(request), "content", required=True)
        assert content is not None
        session_id = request.path_params["id"]
        return JSONResponse(await self._gateway.put_memory(caller, session_id, content))

    async def send(self, request: Request) -> Response:
        """One turn, its events relayed as server-sent events: {content, request_id?}.

        A client that goes away mid-reply (the page's Stop aborts its fetch) ends the
        relay: Starlette cancels the response on the disconnect, which closes the
        SendStream, so the gateway's turn is cancelled (nothing stored, the lease given
        back) rather than left to run.
        """
        caller = self._caller_of(request)
        body = await json_body(request)
        content = text(body, "content", required=True)
        assert content is not None
        request_id = text(body, "request_id") or uuid.uuid4().hex
        events = self._gateway.send(caller, request.path_params["id"], content, request_id)
        return _event_stream(self._relay(events))

    async def _relay(self, events: AsyncIterator[tuple[str, dict[str, Any]]]) -> AsyncIterator[str]:
        """Each event as ``event: NAME`` / ``data: JSON``; a failure as a final `error` event."""
        try:
            async for name, data in events:
                yield sse(name, data)
        except RpcError as err:
            yield sse("error", rpc_error_body(err, self._address, local=self._local)["error"])
        except ConfigurationError as exc:
            yield sse("error", configuration_error(exc).body()["error"])


def _event_stream(events: AsyncIterator[str]) -> StreamingResponse:
    """Server-sent events, unbuffered by proxies (nginx honours x-accel-buffering)."""
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )
