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

from stello_console.api import CallerOf
from stello_console.errors import ConsoleInputError
from stello_console.gateway import ConsoleGateway

MAX_CANDIDATES = 10
MAX_PREFIX_DIGITS = 32
HEX = frozenset(string.hexdigits)


class Lookup:
    """The finding endpoints over the console's gateway; `caller_of` says who each request is."""

    def __init__(self, gateway: ConsoleGateway, caller_of: CallerOf) -> None:
        self._gateway = gateway
        self._caller_of = caller_of

    def routes(self) -> list[Route]:
        """The /api routes of this module."""
        return [Route("/api/space", self.space), Route("/api/resolve", self.resolve)]

    async def space(self, request: Request) -> Response:
        """The request's space: its id and name (the name is "" when the key does not list it)."""
        caller = self._caller_of(request)
        name = await self._gateway.space_name(caller)
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
        sessions = await self._gateway.resolve(caller, digits, MAX_CANDIDATES)
        return JSONResponse({"sessions": sessions})
