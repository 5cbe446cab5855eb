"""The console's guard: every request passes Host, Origin and sign-in checks (DESIGN §8.1).

A page on loopback that is signed in can be driven by any local process or web
page, so nothing is answered before these checks:

- **Host** must name this server: a loopback name with the port it listens on,
  or one of the deployment's allowed hosts. A page on another name that
  resolves to 127.0.0.1 (DNS rebinding) is refused.
- **Origin**, when sent, must be this server's own; a request that changes
  something (any method but GET and HEAD) must send it; a browser's
  ``Sec-Fetch-Site`` must be ``same-origin`` or ``none`` (typed or opened from
  outside a page): a page on another port of the same host is "same-site" and
  would carry the cookie. Request forgery needs one of those.
- **Sign-in** (the local console of `stello up`): ``?token=`` with the launch's
  token is exchanged for an HttpOnly, SameSite=Strict cookie and redirected to
  the same path without it; every other request needs that cookie. A deployed
  console has no token: its API calls carry the user's key in a header, which
  no other site can make a browser send.

Every answer carries a strict Content Security Policy (scripts only from this
origin, no inline script, no eval, Trusted Types for DOM sinks), so even markup
that slipped into the page could not run.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SAFE_METHODS = frozenset({"GET", "HEAD"})

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True, slots=True)
class LaunchToken:
    """The local console's sign-in: the token `stello up` prints and the cookie it becomes.

    Attributes:
        token: the secret in the printed URL (valid for this launch).
        session: the cookie's value (a different secret, never shown).
    """

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def cookie_name(self, port: int) -> str:
        """Cookies ignore ports: one name per port keeps two consoles apart."""
        return f"stello_console_{port}"


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Which Host values are this server, and how a browser signs in.

    Attributes:
        allowed_hosts: extra Host header values accepted as they are (a
            deployment's public name, e.g. ``console.example.com``).
        launch: the local sign-in; None for a deployed console (key in the page).
    """

    allowed_hosts: frozenset[str] = frozenset()
    launch: LaunchToken | None = None

    def host_ok(self, host: str, port: int) -> bool:
        """True when `host` (the Host header) names this server listening on `port`."""
        if host in self.allowed_hosts:
            return True
        name, sep, given = host.rpartition(":")
        return bool(sep) and name in LOOPBACK_NAMES and given == str(port)

    def origin_refusal(self, method: str, host: str, headers: Headers) -> str | None:
        """Why the request's origin is refused, or None when it is this server's own."""
        origin = headers.get("origin")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return f"requests from {origin} are refused: the console answers its own page only"
        if origin is None and method not in SAFE_METHODS:
            return f"a {method} request must carry an Origin header (send it from the console)"
        # "same-site" too: a page on another port of this host shares the cookie's site.
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "requests from other sites or ports are refused: use the console's own page"
        return None


class Guard:
    """ASGI middleware: the checks of this module's docstring, then the app."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self._app = app
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        port = _port(scope)
        method = scope["method"]
        if not self._policy.host_ok(host, port):
            await _refuse(send, 403, f"Host {host!r} is not this console: open it by its address")
            return
        refusal = self._policy.origin_refusal(method, host, headers)
        if refusal is not None:
            await _refuse(send, 403, refusal)
            return
        launch = self._policy.launch
        if launch is not None and not await self._signed_in(scope, send, headers, launch, port):
            return
        await self._app(scope, receive, _with_headers(send, SECURITY_HEADERS))

    async def _signed_in(
        self, scope: Scope, send: Send, headers: Headers, launch: LaunchToken, port: int
    ) -> bool:
        """True to go on; else the answer (token exchange or refusal) has been sent."""
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            if not hmac.compare_digest(query["token"].encode(), launch.token.encode()):
                await _refuse(send, 403, "wrong token: open the URL `stello up` printed")
                return False
            del query["token"]
            # One leading slash: "//host" would send the browser to another site.
            location = "/" + scope["path"].lstrip("/") + (f"?{urlencode(query)}" if query else "")
            await _redirect(send, location, _session_cookie(launch, port))
            return False
        cookies = SimpleCookie()
        cookies.load(headers.get("cookie", ""))
        given = cookies.get(launch.cookie_name(port))
        if given is None or not hmac.compare_digest(given.value.encode(), launch.session.encode()):
            await _refuse(
                send, 403, "not signed in: open the URL `stello up` printed (it has the token)"
            )
            return False
        return True


def _port(scope: Scope) -> int:
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0


def _session_cookie(launch: LaunchToken, port: int) -> bytes:
    return (
        f"{launch.cookie_name(port)}={launch.session}; Path=/; HttpOnly; SameSite=Strict"
    ).encode()


def _with_headers(send: Send, extra: Iterable[tuple[bytes, bytes]]) -> Send:
    """`send` adding `extra` headers to the response start."""
    pairs = list(extra)

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *pairs]}
        await send(message)

    return wrapped


async def _redirect(send: Send, location: str, cookie: bytes) -> None:
    headers = [(b"location", location.encode()), (b"set-cookie", cookie), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, status: int, message: str) -> None:
    body = (message + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
