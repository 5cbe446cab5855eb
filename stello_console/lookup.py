"""Finding things: the space's name for the top bar, and "go to session" by an id prefix.

Two endpoints beside `stello_console.api`, each one bounded gateway call:

- ``GET /api/space``: the caller's space as ``{id, name}`` (WhoAmI lists the
  spaces the key reaches; the bar shows the name, the id on hover).
- ``GET /api/resolve?prefix=HEX``: the sessions whose id starts with those hex
  digits (hyphens ignored, any case), at most ``MAX_CANDIDATES`` in id order,
  as ``{sessions: [{id, parent_id, label, status, turn_count}]}``: the same
  ResolveSessionPrefix the CLI resolves its SESSION arguments with (one range
  scan of the space's id index, never a read of the whole space).
"""

from __future__ import annotations

import string

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello_client import dicts
from stello_console.api import CallerOf
from stello_console.errors import ConsoleInputError

MAX_CANDIDATES = 10
MAX_PREFIX_DIGITS = 32
HEX = frozenset(string.hexdigits)


class Lookup:
    """The finding endpoints over one gateway stub; `caller_of` says who each request is."""

    def __init__(
        self, stub: agent_pb2_grpc.AgentGatewayStub, caller_of: CallerOf, timeout_s: float = 30.0
    ) -> None:
        self._stub = stub
        self._caller_of = caller_of
        self._timeout = timeout_s

    def routes(self) -> list[Route]:
        """The /api routes of this module."""
        return [Route("/api/space", self.space), Route("/api/resolve", self.resolve)]

    async def space(self, request: Request) -> Response:
        """The request's space: its id and name (the name is "" when the key does not list it)."""
        caller = self._caller_of(request)
        reply = await self._stub.WhoAmI(
            agent_pb2.WhoAmIRequest(), timeout=self._timeout, metadata=caller.metadata
        )
        name = next((s.name for s in reply.spaces if s.id == caller.space_id), "")
        return JSONResponse({"id": caller.space_id, "name": name})

    async def resolve(self, request: Request) -> Response:
        """Sessions whose id starts with ?prefix= (1..32 hex digits, hyphens ignored)."""
        given = request.query_params.get("prefix", "")
        digits = given.replace("-", "").lower()
        if not digits or len(digits) > MAX_PREFIX_DIGITS or not HEX.issuperset(digits):
            raise ConsoleInputError(
                f"prefix: give 1 to {MAX_PREFIX_DIGITS} hex digits of a session id "
                f"(0-9, a-f), got {given!r}"
            )
        caller = self._caller_of(request)
        reply = await self._stub.ResolveSessionPrefix(
            agent_pb2.ResolveSessionPrefixRequest(
                space_id=caller.space_id, prefix=digits, limit=MAX_CANDIDATES
            ),
            timeout=self._timeout,
            metadata=caller.metadata,
        )
        sessions = [
            {
                "id": s.id,
                "parent_id": dicts.optional(s, "parent_id"),
                "label": s.label,
                "status": dicts.status_name(s.status),
                "turn_count": s.turn_count,
            }
            for s in reply.sessions
        ]
        return JSONResponse({"sessions": sessions})
