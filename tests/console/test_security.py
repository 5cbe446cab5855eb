"""The console's guard (DESIGN §8.1): launch token and cookie, Host, Origin, CSP headers."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from stello_console import ConsoleOptions, LaunchToken, console_secret, running_console
from tests.console.conftest import ConsoleStack
from tests.console.http import Reply, fetch, signed_headers
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


async def signed_in(console: ConsoleStack) -> dict[str, str]:
    """Exchange the launch token; the headers the page then sends (cookie, page key)."""
    assert console.console.launch is not None
    reply = await fetch(console.port, f"/?token={console.console.launch.token}")
    assert reply.header("set-cookie") is not None
    return signed_headers(reply)


class TestSignIn:
    async def test_the_token_becomes_a_strict_http_only_cookie(self, console: ConsoleStack) -> None:
        """/?token= answers the page with its page key in a meta tag, setting an HttpOnly
        SameSite=Strict cookie; another path answers 303 to itself without the token."""
        launch = console.console.launch
        assert launch is not None
        reply = await fetch(console.port, f"/?token={launch.token}")
        assert reply.status == 200
        assert f'<meta name="stello-page-key" content="{launch.page}">' in reply.text
        cookie = reply.header("set-cookie") or ""
        assert cookie.startswith(f"stello_console_{console.port}=")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert launch.token not in cookie and launch.page not in cookie
        assert "content-security-policy" in {name.lower() for name, _ in reply.headers}
        other = await fetch(console.port, f"/static/app.js?token={launch.token}")
        assert other.status == 303
        assert other.header("location") == "/static/app.js"
        assert other.header("set-cookie") == cookie
        plain = await fetch(console.port, "/", headers=signed_headers(reply))
        assert "stello-page-key" not in plain.text  # only the sign-in's answer carries it

    async def test_the_cookie_alone_opens_no_api(self, console: ConsoleStack) -> None:
        """Cookies ignore ports, so any server of this host gets the cookie: replayed alone,
        with the console's own Host and Origin, or with a wrong page key, the API answers 401
        (CONSOLE_SIGNED_OUT); with the page key, 200."""
        signed = await signed_in(console)
        own = {"Origin": f"http://127.0.0.1:{console.port}", "Cookie": signed["Cookie"]}
        for headers in (own, {**own, "X-Stello-Page": "guess"}):
            for path in ("/api/tree", "/api/events", "/api/config"):
                reply = await fetch(console.port, path, headers=headers)
                assert reply.status == 401, (path, reply.text)
                assert reply.json()["error"]["reason"] == "CONSOLE_SIGNED_OUT"
        assert (await fetch(console.port, "/api/tree", headers={**own, **signed})).status == 200

    async def test_the_cookie_opens_the_page_and_the_api(self, console: ConsoleStack) -> None:
        """With the cookie, the page and /api answer 200."""
        signed = await signed_in(console)
        page = await fetch(console.port, "/", headers=signed)
        api = await fetch(console.port, "/api/tree", headers=signed)
        assert (page.status, api.status) == (200, 200)
        assert "app.js" in page.text and api.json() == {"nodes": []}

    @pytest.mark.parametrize("path", ["/", "/api/tree", "/api/events", "/static/app.js"])
    async def test_without_the_cookie_everything_is_refused(
        self, console: ConsoleStack, path: str
    ) -> None:
        """No cookie: 403 with a message saying to open the printed URL."""
        reply = await fetch(console.port, path)
        assert reply.status == 403
        assert "open the URL `stello up` printed" in reply.text

    async def test_a_wrong_token_or_cookie_is_refused(self, console: ConsoleStack) -> None:
        """A guessed token gets no cookie; a forged cookie opens nothing."""
        wrong = await fetch(console.port, "/?token=guess")
        forged = await fetch(
            console.port, "/api/tree", headers={"Cookie": f"stello_console_{console.port}=x"}
        )
        assert (wrong.status, forged.status) == (403, 403)
        assert wrong.header("set-cookie") is None

    async def test_the_redirect_stays_on_this_site(self, console: ConsoleStack) -> None:
        """A path like //evil.example redirects to /evil.example, never to another host."""
        assert console.console.launch is not None
        token = console.console.launch.token
        reply = await fetch(console.port, f"//evil.example?token={token}")
        assert reply.status == 303 and reply.header("location") == "/evil.example"

    @pytest.mark.parametrize(
        ("path", "location"),
        [
            pytest.param("/%5Cevil.example", "/%5Cevil.example", id="backslash-host"),
            pytest.param("/%5C%5Cevil.example/x", "/%5C%5Cevil.example/x", id="two-backslashes"),
            pytest.param("/%0d%0aX-Evil:%201", "/%0D%0AX-Evil:%201", id="crlf"),
            pytest.param("/a%20b/%C3%A9", "/a%20b/%C3%A9", id="space-and-non-ascii"),
        ],
    )
    async def test_the_redirect_is_a_quoted_path_of_this_site(
        self, console: ConsoleStack, path: str, location: str
    ) -> None:
        """A path a browser would read as another host (/\\host) or that holds a CR/LF is
        redirected to itself quoted, on this site (an open redirect, and an h11 error with a
        traceback and an empty reply, before); no header is injected."""
        assert console.console.launch is not None
        reply = await fetch(console.port, f"{path}?token={console.console.launch.token}")
        assert (reply.status, reply.header("location")) == (303, location)
        assert reply.header("x-evil") is None

    @pytest.mark.parametrize(
        "other",
        [
            pytest.param('json={"a":1}', id="json"),
            pytest.param('other="a b', id="open-quote-and-space"),
            pytest.param("a=é", id="non-ascii"),
        ],
    )
    async def test_the_cookie_is_found_beside_any_other(
        self, console: ConsoleStack, other: str
    ) -> None:
        """Another cookie of this host that Python's SimpleCookie cannot parse, sent first,
        does not hide the console's own (it signed the user out before)."""
        signed = await signed_in(console)
        reply = await fetch(
            console.port, "/api/tree", headers={**signed, "Cookie": f"{other}; {signed['Cookie']}"}
        )
        assert reply.status == 200, reply.text


class TestHostAndOrigin:
    @pytest.mark.parametrize(
        "host",
        [
            pytest.param("evil.example", id="rebound-name"),
            pytest.param("evil.example:{port}", id="rebound-name-with-port"),
            pytest.param("127.0.0.1:1", id="other-port"),
            pytest.param("", id="empty"),
        ],
    )
    async def test_a_foreign_host_is_refused(self, console: ConsoleStack, host: str) -> None:
        """A Host that is not this server (DNS rebinding) is refused, even with the cookie."""
        signed = await signed_in(console)
        reply = await fetch(
            console.port,
            "/api/tree",
            host=host.format(port=console.port),
            headers=signed,
        )
        assert reply.status == 403 and "is not this console" in reply.text

    @pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
    async def test_loopback_names_are_this_host(self, console: ConsoleStack, name: str) -> None:
        """127.0.0.1 and localhost with the listening port are accepted."""
        signed = await signed_in(console)
        reply = await fetch(
            console.port, "/api/tree", host=f"{name}:{console.port}", headers=signed
        )
        assert reply.status == 200

    async def test_a_foreign_origin_is_refused(self, console: ConsoleStack) -> None:
        """A request from another origin is refused, reads and writes alike."""
        signed = await signed_in(console)
        evil = {**signed, "Origin": "http://evil.example"}
        read = await fetch(console.port, "/api/tree", headers=evil)
        write = await fetch(
            console.port,
            "/api/roots",
            method="POST",
            headers={**evil, "Content-Type": "application/json"},
            body={"label": "x"},
        )
        assert (read.status, write.status) == (403, 403)
        assert "http://evil.example" in read.text
        assert (await fetch(console.port, "/api/tree", headers=signed)).json() == {"nodes": []}

    async def test_a_write_without_origin_is_refused(self, console: ConsoleStack) -> None:
        """A POST with no Origin header is refused and creates nothing."""
        signed = await signed_in(console)
        reply = await fetch(console.port, "/api/roots", method="POST", headers=signed, body={})
        assert reply.status == 403 and "Origin" in reply.text
        tree = await fetch(console.port, "/api/tree", headers=signed)
        assert tree.json() == {"nodes": []}

    @pytest.mark.parametrize("site", ["cross-site", "same-site"])
    async def test_another_sites_fetch_is_refused(self, console: ConsoleStack, site: str) -> None:
        """Sec-Fetch-Site cross-site or same-site (another port of this host) is refused."""
        signed = await signed_in(console)
        reply = await fetch(console.port, "/api/tree", headers={**signed, "Sec-Fetch-Site": site})
        assert reply.status == 403

    @pytest.mark.parametrize("site", ["same-origin", "none"])
    async def test_its_own_page_and_a_typed_address_pass(
        self, console: ConsoleStack, site: str
    ) -> None:
        """Sec-Fetch-Site same-origin (its page) or none (the address bar) goes through."""
        signed = await signed_in(console)
        reply = await fetch(console.port, "/api/tree", headers={**signed, "Sec-Fetch-Site": site})
        assert reply.status == 200

    async def test_its_own_origin_may_write(self, console: ConsoleStack) -> None:
        """A POST from the console's own origin goes through."""
        signed = await signed_in(console)
        reply = await fetch(
            console.port,
            "/api/roots",
            method="POST",
            headers={**signed, "Origin": f"http://127.0.0.1:{console.port}"},
            body={"label": "Made here"},
        )
        assert reply.status == 200 and reply.json()["label"] == "Made here"


class TestSignOut:
    async def test_sign_out_expires_the_cookie(self, console: ConsoleStack) -> None:
        """POST /api/sign-out from the console's origin answers the cookie emptied, expired,
        HttpOnly and SameSite=Strict, signed in or not."""
        own = {"Origin": f"http://127.0.0.1:{console.port}"}
        signed = await signed_in(console)
        for headers in ({**own, **signed}, own):
            reply = await fetch(console.port, "/api/sign-out", method="POST", headers=headers)
            assert (reply.status, reply.json()) == (200, {"signed_out": True})
            expired = reply.header("set-cookie") or ""
            assert expired.startswith(f"stello_console_{console.port}=;"), expired
            assert "Max-Age=0" in expired and "HttpOnly" in expired
            assert "SameSite=Strict" in expired

    @pytest.mark.parametrize(
        ("method", "headers"),
        [
            pytest.param("POST", {}, id="no-origin"),
            pytest.param("POST", {"Origin": "http://evil.example"}, id="foreign-origin"),
            pytest.param("POST", {"Sec-Fetch-Site": "same-site"}, id="same-site"),
            pytest.param("GET", {}, id="get"),
        ],
    )
    async def test_only_the_consoles_own_post_signs_out(
        self, console: ConsoleStack, method: str, headers: dict[str, str]
    ) -> None:
        """A sign-out without Origin, from another origin or site, or by GET is not one: no
        cookie is expired (another page cannot sign the browser out)."""
        signed = await signed_in(console)
        if "Sec-Fetch-Site" in headers:
            headers = {**headers, "Origin": f"http://127.0.0.1:{console.port}"}
        reply = await fetch(
            console.port, "/api/sign-out", method=method, headers={**headers, **signed}
        )
        assert reply.status in (403, 404, 405), reply.text
        assert reply.header("set-cookie") is None


class TestLiveRelay:
    @pytest.mark.parametrize(
        ("host", "headers", "says"),
        [
            pytest.param("evil.example:{port}", {}, "is not this console", id="rebound-host"),
            pytest.param(None, {"Origin": "http://evil.example"}, "evil.example", id="origin"),
            pytest.param(None, {"Sec-Fetch-Site": "same-site"}, "other sites", id="same-site"),
            pytest.param(None, {"Sec-Fetch-Site": "cross-site"}, "other sites", id="cross-site"),
        ],
    )
    async def test_the_event_stream_is_guarded_like_every_endpoint(
        self, console: ConsoleStack, host: str | None, headers: dict[str, str], says: str
    ) -> None:
        """Even signed in, another Host, Origin or site gets no event stream: 403."""
        signed = await signed_in(console)
        reply = await fetch(
            console.port,
            "/api/events",
            host=host.format(port=console.port) if host else None,
            headers={**signed, **headers},
        )
        assert reply.status == 403 and says in reply.text
        assert reply.header("content-type") == "text/plain; charset=utf-8"


class TestHeaders:
    @staticmethod
    def assert_strict(reply: Reply) -> None:
        """The strict policy and its companions are on the reply."""
        policy = reply.header("content-security-policy") or ""
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "require-trusted-types-for 'script'" in policy
        assert reply.header("x-content-type-options") == "nosniff"
        assert reply.header("referrer-policy") == "no-referrer"

    async def test_every_answer_carries_the_policy(self, console: ConsoleStack) -> None:
        """Page, assets, API answers and refusals all carry the Content Security Policy."""
        signed = await signed_in(console)
        for path in ("/", "/static/app.js", "/api/tree", "/api/sessions/nope"):
            self.assert_strict(await fetch(console.port, path, headers=signed))
        self.assert_strict(await fetch(console.port, "/"))

    async def test_the_page_has_no_inline_script(self, console: ConsoleStack) -> None:
        """index.html loads its script from a file and has no inline handlers or styles."""
        signed = await signed_in(console)
        page = (await fetch(console.port, "/", headers=signed)).text
        assert '<script type="module" src="/static/app.js"></script>' in page
        assert page.count("<script") == 1
        assert " on" not in page.replace(" one", "")  # no onclick= and friends
        assert "style=" not in page and "<style" not in page


class TestDeployedConsole:
    async def test_the_api_wants_a_key(self, key_console: ConsoleStack) -> None:
        """Without Authorization and X-Stello-Space the API answers 401 asking to sign in."""
        reply = await fetch(key_console.port, "/api/tree")
        assert reply.status == 401
        assert reply.json()["error"]["code"] == "UNAUTHENTICATED"
        assert "API key" in reply.json()["error"]["message"]

    async def test_the_page_sends_the_key(self, key_console: ConsoleStack) -> None:
        """With the key and space in headers the API acts as that key; the page needs none."""
        space = key_console.stack.space
        page = await fetch(key_console.port, "/")
        reply = await fetch(
            key_console.port,
            "/api/tree",
            headers={"Authorization": f"Bearer {space.key}", "X-Stello-Space": space.sid},
        )
        assert (page.status, reply.status) == (200, 200)

    async def test_a_wrong_key_is_the_gateways_unauthenticated(
        self, key_console: ConsoleStack
    ) -> None:
        """A key the gateway does not know answers 401 with the gateway's message."""
        space = key_console.stack.space
        reply = await fetch(
            key_console.port,
            "/api/tree",
            headers={"Authorization": "Bearer nope", "X-Stello-Space": space.sid},
        )
        assert reply.status == 401 and reply.json()["error"]["code"] == "UNAUTHENTICATED"

    @pytest.mark.parametrize(
        ("key", "said"),
        [
            pytest.param("stello x", "holds a character no key has", id="space"),
            pytest.param("stello_" + "x" * 300, "is 307 characters", id="too-long"),
        ],
    )
    async def test_a_key_no_key_can_be_names_the_pages_field(
        self, key_console: ConsoleStack, key: str, said: str
    ) -> None:
        """A key typed with a space, or longer than any key, is refused naming the page's
        API key field, not the SDK's `key=` nor the CLI's STELLO_KEY."""
        space = key_console.stack.space
        reply = await fetch(
            key_console.port,
            "/api/tree",
            headers={"Authorization": f"Bearer {key}", "X-Stello-Space": space.sid},
        )
        message = reply.json()["error"]["message"]
        assert reply.status == 400 and said in message, message
        assert "(the API key field)" in message
        assert "key=" not in message and "STELLO_KEY" not in message

    async def test_another_spaces_session_is_not_found(
        self, key_console: ConsoleStack, other_space: object
    ) -> None:
        """A key of another space cannot read this space's session: NOT_FOUND, no leak."""
        assert isinstance(other_space, TestSpace)
        root = await key_console.stack.root(label="Private")
        reply = await fetch(
            key_console.port,
            f"/api/sessions/{root.id}",
            headers={
                "Authorization": f"Bearer {other_space.key}",
                "X-Stello-Space": other_space.sid,
            },
        )
        assert reply.status == 404 and "Private" not in reply.text


async def test_an_allowed_host_is_answered(space: TestSpace) -> None:
    """--allowed-host NAME: that Host (say, behind a proxy) is answered; others still refused."""
    options = ConsoleOptions(
        gateway="127.0.0.1:9", port=0, allowed_hosts=frozenset({"console.example.com"})
    )
    async with running_console(options) as console:
        named = await fetch(console.port, "/", host="console.example.com")
        other = await fetch(console.port, "/", host="other.example.com")
        origin = await fetch(
            console.port,
            "/",
            host="console.example.com",
            headers={"Origin": "https://console.example.com"},
        )
    assert (named.status, other.status, origin.status) == (200, 403, 200)


class TestSigningSecret:
    def test_it_is_kept_readable_by_the_user_only(self, tmp_path: Path) -> None:
        """Made once with mode 0600 and read back the same; a copy with looser bits is
        tightened; the token and cookie it stands for are the same every time."""
        path = tmp_path / "config" / "console-secret.json"
        made = console_secret(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)
        assert console_secret(path) == made
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert LaunchToken.from_secret(made) == LaunchToken.from_secret(console_secret(path))
        token = LaunchToken.from_secret(made)
        assert token.token != token.session

    def test_renew_or_a_broken_file_makes_a_new_one(self, tmp_path: Path) -> None:
        """`renew` replaces the secret (old tokens stop matching); a file that holds no
        secret is replaced rather than trusted."""
        path = tmp_path / "console-secret.json"
        first = console_secret(path)
        renewed = console_secret(path, renew=True)
        assert renewed != first and console_secret(path) == renewed
        path.write_text('{"console_secret": "abcd"}')
        assert console_secret(path) not in (first, renewed, bytes.fromhex("abcd"))
        assert [p.name for p in tmp_path.iterdir()] == ["console-secret.json"]  # no drafts
