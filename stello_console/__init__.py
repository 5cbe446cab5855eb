"""The web console (DESIGN §8.1): a page for people over the gateway's public API.

A small ASGI app (Starlette on uvicorn) that calls the gateway over gRPC with
the user's key and serves plain JavaScript modules; `stello up` runs it on
loopback behind a token that outlives restarts (derived from a signing secret
kept beside the saved credentials), `python -m stello_console` in a deployment.
It imports no service package: it is a client of `stello.agent.v1`.

`app` is its composition root, `security` the guard (Host, Origin, sign-in), `api` the JSON
endpoints and the SendStream relay (what they read of a request: `inputs`), `live` WatchSpace
as server-sent events, `gateway` its calls through the SDK, `convert` replies as its JSON,
`lookup` the space's name and ids by prefix, `errors` failures as the page sees them;
`static/` holds the page (plain ES modules, no build step).
"""

from __future__ import annotations

import stello  # noqa: F401 (first: its import settles gRPC fork support before grpc loads)
from stello_console.app import ConsoleOptions, RunningConsole, create_console, running_console
from stello_console.gateway import Caller, ConsoleGateway
from stello_console.security import AccessPolicy, LaunchToken, console_secret

__all__ = [
    "AccessPolicy",
    "Caller",
    "ConsoleGateway",
    "ConsoleOptions",
    "LaunchToken",
    "RunningConsole",
    "console_secret",
    "create_console",
    "running_console",
]
