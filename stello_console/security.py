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
- **Sign-in** (the local console of `stello up`): ``?token=`` with the console's
  token is exchanged for an HttpOnly, SameSite=Strict cookie: the page (``/``)
  is answered with it, carrying a second secret, the page key, in a meta tag;
  another path is redirected to itself without the token. Every other request
  needs that cookie (an API request without it is answered JSON with reason
  ``CONSOLE_SIGNED_OUT``, so an open page can say what to do), and an API
  request the page key too, in an ``X-Stello-Page`` header: cookies ignore
  ports, so every other server on this host receives the cookie, but the page
  keeps its key in its origin's storage (an origin includes the port), which
  no other server's page can read. The cookie alone is refused (401). A
  deployed console has no token: its API calls carry the user's key in a
  header, which no other site can make a browser send.
- **Sign-out** (the local console): ``POST /api/sign-out`` from the console's
  own page (Origin checked like any write) answers with the cookie expired,
  signed in or not. The cookie is the browser's, not a tab's: every tab of
  that browser on this console is signed out (the page tells its other tabs at
  once), and every live stream open then ends (a browser still signed in
  resumes it by cursor, one signed out is refused). The
  printed URL still signs in; only a new secret makes a copied cookie or URL
  worthless. The page forgets its key at sign-out.
- **The signing secret** both are derived from is kept in a file beside the
  saved credentials, readable by the user only (`console_secret`): a restart
  of `stello up` keeps open tabs signed in and the printed URL valid. The
  trade-off: a leaked URL stays valid until the user asks for a new secret
  (``stello up --new-console-token``), which signs every tab out.

Every answer carries a strict Content Security Policy (scripts only from this
origin, no inline script, no eval, Trusted Types for DOM sinks), so even markup
that slipped into the page could not run.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
SECRET_BYTES = 32
SIGNED_OUT_REASON = "CONSOLE_SIGNED_OUT"
SIGN_OUT_PATH = "/api/sign-out"
PAGE_HEADER = "x-stello-page"
NO_PAGE_KEY = (
    "this page holds no sign-in of its own (the cookie alone does not sign in): open the "
    "URL `stello up` printed"
)
NOT_SIGNED_IN = (
    "not signed in: open the URL `stello up` printed (it has the token; after "
    "`stello up --new-console-token` only the new URL signs in)"
)

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
        token: the secret in the printed URL.
        session: the cookie's value (a different secret, never shown).
        page: the page key, handed to the page at sign-in and sent back with every API
            request (a third secret: the cookie reaches every port, the page key does not).

    Made at random (valid while this process serves), or derived from a kept
    signing secret (`from_secret`: valid across restarts until it is renewed).
    """

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    page: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @classmethod
    def from_secret(cls, secret: bytes) -> LaunchToken:
        """The token and cookie a signing secret stands for (the same every launch)."""
        token = _derive(secret, b"stello console url token")
        session = _derive(secret, b"stello console session cookie")
        return cls(token, session, _derive(secret, b"stello console page key"))

    def cookie_name(self, port: int) -> str:
        """Cookies ignore ports: one name per port keeps two consoles apart."""
        return f"stello_console_{port}"


def console_secret(path: Path, *, renew: bool = False) -> bytes:
    """The signing secret kept in `path`, made (and written readable by the user only) when
    the file is missing, is not one, or `renew` asks for a new one (old tabs sign out)."""
    if not renew:
        kept = _read_secret(path)
        if kept is not None:
            os.chmod(path, 0o600)  # a copy restored with looser bits is tightened
            return kept
    secret = secrets.token_bytes(SECRET_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"console_secret": secret.hex()}, handle)
    os.replace(draft, path)  # a reader sees the old file or the whole new one
    return secret


def _read_secret(path: Path) -> bytes | None:
    """The secret in `path`, or None when there is no such file or it holds none."""
    try:
        data = json.loads(path.read_text())
        secret = bytes.fromhex(data["console_secret"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return secret if len(secret) == SECRET_BYTES else None


def _derive(secret: bytes, purpose: bytes) -> str:
    digest = hmac.new(secret, purpose, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


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

    def __init__(
        self, app: ASGIApp, policy: AccessPolicy, on_sign_out: Callable[[], None] | None = None
    ) -> None:
        self._app = app
        self._policy = policy
        self._on_sign_out = on_sign_out

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
        if launch is not None and method == "POST" and scope["path"] == SIGN_OUT_PATH:
            await _sign_out(send, launch, port)
            if self._on_sign_out is not None:
                self._on_sign_out()  # the open live streams end: none outlives its sign-in
            return
        if launch is not None and not await self._signed_in(
            scope, receive, send, headers, launch, port
        ):
            return
        await self._app(scope, receive, _with_headers(send, SECURITY_HEADERS))

    async def _signed_in(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Headers,
        launch: LaunchToken,
        port: int,
    ) -> bool:
        """True to go on; else the answer (token exchange or refusal) has been sent."""
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            if not hmac.compare_digest(query["token"].encode(), launch.token.encode()):
                await _refuse(
                    send,
                    403,
                    "wrong token: open the URL `stello up` printed (a URL from before "
                    "`stello up --new-console-token` no longer signs in)",
                )
                return False
            del query["token"]
            if scope["path"] == "/":  # the page: it takes its key (and drops the token itself)
                scope = {**scope, "query_string": urlencode(query).encode()}
                scope["state"] = {**scope.get("state", {}), "page_key": launch.page}
                cookie = (b"set-cookie", _session_cookie(launch, port))
                await self._app(scope, receive, _with_headers(send, (*SECURITY_HEADERS, cookie)))
                return False
            location = _same_site(scope["path"]) + (f"?{urlencode(query)}" if query else "")
            await _redirect(send, location, _session_cookie(launch, port))
            return False
        # Starlette's parser, not SimpleCookie: that one drops the whole header at the first
        # value it dislikes (JSON, a space, non-ASCII), and any page of this host sets those.
        given = cookie_parser(headers.get("cookie", "")).get(launch.cookie_name(port))
        if given is None or not hmac.compare_digest(given.encode(), launch.session.encode()):
            if scope["path"].startswith("/api/"):
                await _refuse_json(send, 403, NOT_SIGNED_IN, SIGNED_OUT_REASON)
            else:
                await _refuse(send, 403, NOT_SIGNED_IN)
            return False
        if scope["path"].startswith("/api/"):
            key = headers.get(PAGE_HEADER, "")
            if not hmac.compare_digest(key.encode(), launch.page.encode()):
                await _refuse_json(send, 401, NO_PAGE_KEY, SIGNED_OUT_REASON)
                return False
        return True


def _same_site(path: str) -> str:
    """`path` (decoded) as a Location on this site: one leading slash ("//host" and "/\\host"
    are other sites to a browser), the rest quoted (a CR/LF is no header value)."""
    return "/" + quote(path.lstrip("/"), safe="/:@!$&'()*+,;=~")


def _port(scope: Scope) -> int:
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0


def _session_cookie(launch: LaunchToken, port: int) -> bytes:
    return (
        f"{launch.cookie_name(port)}={launch.session}; Path=/; HttpOnly; SameSite=Strict"
    ).encode()


def _expired_cookie(launch: LaunchToken, port: int) -> bytes:
    """The session cookie emptied and expired: the browser forgets it."""
    name = launch.cookie_name(port)
    return f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict".encode()


async def _sign_out(send: Send, launch: LaunchToken, port: int) -> None:
    """The local console's sign-out: the browser is told to drop the session cookie."""
    body = json.dumps({"signed_out": True}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"set-cookie", _expired_cookie(launch, port)),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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


async def _refuse_json(send: Send, status: int, message: str, reason: str) -> None:
    """A refusal as the page's JSON error (`stello_console.errors`), so it can say what to do."""
    error = {"code": "UNAUTHENTICATED", "message": message, "reason": reason}
    body = json.dumps({"error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
