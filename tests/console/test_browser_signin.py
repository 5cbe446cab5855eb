"""Signing in and out in a real headless Chromium: a console restart keeps open tabs signed in
(their live stream resumes from its cursor); a renewed token signs them out with a page saying
what to do; "Sign out" forgets a deployed console's key in this tab only, and the local
console's cookie in the whole browser (it says so)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page, Request, expect

from stello.auth import KeyStore
from stello_console import LaunchToken, console_secret, running_console
from tests.console.conftest import BrowserPage, ConsoleStack, GatewayStack

pytestmark = pytest.mark.browser
AT_ONCE_MS = 3_000  # a broadcast arrives in milliseconds; a tab's next request may never come


def events_requests(browser: BrowserPage) -> list[Request]:
    """Every request the page makes to /api/events, as it makes them."""
    seen: list[Request] = []
    browser.page.on("request", lambda r: seen.append(r) if "/api/events" in r.url else None)
    return seen


async def test_a_restart_keeps_the_tab_signed_in_and_live(
    gateway_stack: GatewayStack, browser_page: BrowserPage, tmp_path: Path
) -> None:
    """The console restarts on its port with the kept secret: the tab is still signed in, its
    live stream resumes from its cursor (a change made meanwhile shows, no forest reload)."""
    secret_file = tmp_path / "console-secret.json"
    page = browser_page.page
    trees = []
    page.on("request", lambda r: trees.append(r.url) if "/api/tree" in r.url else None)
    streams = events_requests(browser_page)
    before = await gateway_stack.stack.root(label="Before")
    options = gateway_stack.options(launch=LaunchToken.from_secret(console_secret(secret_file)))
    async with running_console(options) as first:
        await page.goto(first.url)
        await expect(page.locator(f'#forest .node[data-id="{before.id}"]')).to_be_visible()
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
    await expect(page.locator("#live")).to_have_attribute("data-state", "reconnecting")
    read_before = len(trees)
    during = await gateway_stack.stack.root(label="Made while the console was down")
    kept = LaunchToken.from_secret(console_secret(secret_file))
    again = gateway_stack.options(port=first.port, launch=kept)
    async with running_console(again) as second:
        assert second.url == first.url
        node = page.locator(f'#forest .node[data-id="{during.id}"]')
        await expect(node).to_contain_text("Made while the console was down")
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        resumed = [r for r in streams if r.headers.get("last-event-id")]
        assert resumed, "the stream never resumed from a cursor"
        assert len(trees) == read_before, trees  # no forest reload: the change came live
    assert browser_page.console_errors("Failed to load resource", "ERR_CONNECTION_REFUSED") == []


async def test_a_renewed_token_signs_the_tab_out_and_says_what_to_do(
    gateway_stack: GatewayStack, browser_page: BrowserPage, tmp_path: Path
) -> None:
    """After --new-console-token (a new secret), the open tab shows a page naming the flag
    and telling to open the new URL, instead of failing calls."""
    secret_file = tmp_path / "console-secret.json"
    page = browser_page.page
    options = gateway_stack.options(launch=LaunchToken.from_secret(console_secret(secret_file)))
    async with running_console(options) as first:
        await page.goto(first.url)
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
    renewed = LaunchToken.from_secret(console_secret(secret_file, renew=True))
    async with running_console(gateway_stack.options(port=first.port, launch=renewed)) as second:
        assert second.url != first.url
        signed_out = page.locator("#signed-out")
        await expect(signed_out).to_contain_text("stello up --new-console-token")
        await expect(signed_out).to_contain_text("URL that stello up printed last")
        await expect(page.locator("#live")).to_have_attribute("data-state", "off")
        await expect(page.locator("#refresh")).to_be_hidden()
        await browser_page.shot("signed-out")
    assert browser_page.console_errors("Failed to load resource", "ERR_CONNECTION_REFUSED") == []


async def api_status(page: Page) -> int:
    """The status of the tab's GET /api/tree sent as the page sends it (key headers too)."""
    return int(
        await page.evaluate(
            """async () => {
              const key = sessionStorage.getItem("stello_console.key");
              const space = sessionStorage.getItem("stello_console.space");
              const page = localStorage.getItem("stello_console.page_key") || "";
              const headers = key
                ? { authorization: `Bearer ${key}`, "x-stello-space": space }
                : { "x-stello-page": page };
              return (await fetch("/api/tree", { headers })).status;
            }"""
        )
    )


async def test_sign_out_on_the_local_console_signs_the_browser_out_and_says_so(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Sign out on the local console: the tab says it covers every tab of this browser and
    offers a sign-in; the browser holds no console cookie, the tab's API calls are refused,
    another tab (which followed this one's live stream) says it is signed out at once, with no
    request of its own, and pasting the printed URL signs in."""
    root = await console.stack.root(label="Kept")
    page = browser_page.page
    other = await browser_page.context.new_page()
    await page.goto(console.console.url)
    await expect(page.locator("#live")).to_have_attribute("data-state", "live")  # it leads
    await other.goto(f"{console.base}#/session/{root.id}")
    await expect(other.locator("#session-label")).to_have_text("Kept")
    sign_out = page.get_by_role("button", name="Sign out")
    await expect(sign_out).to_have_attribute(
        "title", "Sign this browser out of the console (every tab of it)"
    )
    await sign_out.click()
    signed_out = page.locator("#signed-out")
    await expect(signed_out).to_contain_text("You signed out")
    await expect(signed_out).to_contain_text("every tab of it on this console is signed out")
    await expect(page.locator("#live")).to_have_attribute("data-state", "off")
    await expect(page.locator("#sign-out")).to_be_hidden()
    await browser_page.shot("signed-out-local")
    assert await browser_page.context.cookies() == []
    assert await api_status(page) == 403
    await expect(other.locator("#signed-out")).to_contain_text(
        "This browser signed out", timeout=AT_ONCE_MS
    )
    await expect(other.locator("#live")).to_have_attribute("data-state", "off")
    await page.locator("#sign-in-url").fill(console.console.url)
    await page.locator("#sign-in").click()
    await expect(page.locator(f'#forest .node[data-id="{root.id}"]')).to_be_visible()
    assert await api_status(page) == 200
    assert browser_page.console_errors("Failed to load resource.*403") == []


async def test_a_follower_tabs_sign_out_ends_the_shared_stream_in_every_tab(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """A tab that follows the shared live stream signs out: the tab that leads it ends the
    stream and, with every other tab, says it is signed out at once (no request of their own,
    no change needed), and no tab holds or waits for the stream's lock any more."""
    root = await console.stack.root(label="Watched")
    leader = browser_page.page
    await leader.goto(console.console.url)
    await expect(leader.locator("#live")).to_have_attribute("data-state", "live")  # it leads
    follower = await browser_page.context.new_page()
    bystander = await browser_page.context.new_page()
    for tab in (follower, bystander):
        await tab.goto(f"{console.base}#/session/{root.id}")
        await expect(tab.locator("#session-label")).to_have_text("Watched")
        await expect(tab.locator("#live")).to_have_attribute("data-state", "live")
    await follower.get_by_role("button", name="Sign out").click()
    await expect(follower.locator("#signed-out")).to_contain_text("You signed out")
    for tab in (leader, bystander):
        await expect(tab.locator("#signed-out")).to_contain_text(
            "This browser signed out", timeout=AT_ONCE_MS
        )
        await expect(tab.locator("#live")).to_have_attribute("data-state", "off")
    await leader.wait_for_function(
        """async () => {
          const { held, pending } = await navigator.locks.query();
          return held.length === 0 && pending.length === 0;
        }""",
        timeout=AT_ONCE_MS,
    )
    for tab in (leader, follower, bystander):
        assert await api_status(tab) == 403
    assert browser_page.console_errors("Failed to load resource.*403") == []


async def signed_in_with_key(page: Page, console: ConsoleStack) -> None:
    """Sign in on the deployed console's form with the stack's key and space."""
    space = console.stack.space
    await page.goto(console.base)
    await page.locator("#sign-in-key").fill(space.key)
    await page.locator("#sign-in-space").fill(space.sid)
    await page.locator("#sign-in").click()
    await expect(page.locator("#forest")).to_be_visible()


async def test_sign_out_on_a_deployed_console_forgets_this_tabs_key_only(
    key_console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Sign out on a deployed console: this tab forgets its key and space and shows the
    sign-in form saying so; its API calls are refused; another tab keeps its sign-in."""
    root = await key_console.stack.root(label="Other tab")
    page = browser_page.page
    other = await browser_page.context.new_page()
    await signed_in_with_key(page, key_console)
    await signed_in_with_key(other, key_console)
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.locator("#sign-in-note")).to_have_text(
        "Signed out: this tab forgot its key. Other tabs keep theirs until they sign out."
    )
    await expect(page.locator("#sign-in-key")).to_be_visible()
    await expect(page.locator("#sign-out")).to_be_hidden()
    key = await page.evaluate("() => sessionStorage.getItem('stello_console.key')")
    assert key is None
    assert await api_status(page) == 401
    await other.get_by_role("button", name="Refresh").click()
    await expect(other.locator(f'#forest .node[data-id="{root.id}"]')).to_be_visible()
    assert await api_status(other) == 200
    assert browser_page.console_errors("Failed to load resource.*401") == []


async def test_a_sign_out_closes_the_dialogs_left_open(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Another tab signs the browser out while this one has its fork dialog open: the
    signed-out page shows with no dialog over it (the modal dialog stayed, over the sign-in)."""
    root = await console.stack.root(label="Mid-fork")
    page = browser_page.page
    await page.goto(console.console.url)
    await expect(page.locator("#live")).to_have_attribute("data-state", "live")  # it leads
    other = await browser_page.context.new_page()
    await other.goto(f"{console.base}#/session/{root.id}")
    await other.get_by_role("button", name="Fork…").click()
    await expect(other.locator("dialog[open] #fork-label")).to_be_visible()
    await page.get_by_role("button", name="Sign out").click()
    await expect(other.locator("#signed-out")).to_contain_text(
        "This browser signed out", timeout=AT_ONCE_MS
    )
    await expect(other.locator("dialog")).to_have_count(0)
    await expect(other.locator("#sign-in-url")).to_be_editable()
    assert browser_page.console_errors("Failed to load resource.*403") == []


async def test_a_refused_key_closes_the_dialogs_left_open(
    key_console: ConsoleStack, browser_page: BrowserPage, keys: KeyStore
) -> None:
    """A deployed console's key is revoked while the fork dialog is open: pressing Fork is
    refused, and the sign-in form comes back with no dialog over it, saying why."""
    root = await key_console.stack.root(label="Mid-fork")
    page = browser_page.page
    await signed_in_with_key(page, key_console)
    await page.goto(f"{key_console.base}#/session/{root.id}")
    await page.get_by_role("button", name="Fork…").click()
    await expect(page.locator("dialog[open] #fork-label")).to_be_visible()
    assert await keys.revoke(key_console.stack.space.key_id)
    await page.locator("dialog[open]").get_by_role("button", name="Fork", exact=True).click()
    await expect(page.locator("#sign-in-key")).to_be_editable()
    await expect(page.locator("dialog")).to_have_count(0)
    await expect(page.locator(".sign-in")).to_contain_text("revoked")
    assert browser_page.console_errors("Failed to load resource.*401") == []


async def test_a_key_revoked_while_idle_asks_every_tab_for_a_key_again(
    key_console: ConsoleStack, browser_page: BrowserPage, keys: KeyStore
) -> None:
    """A deployed console's key is revoked while its tabs make no call (one with its fork
    dialog open): the live stream's refusal closes the dialog and brings back the sign-in
    form saying why, in the tab that reads the stream and in the one that follows it (the
    badge said "live updates: off" under the open dialog until the user's next call); the
    form gives the gateway's words for this key (revoked), not the watch's."""
    root = await key_console.stack.root(label="Idle")
    page = browser_page.page
    other = await browser_page.context.new_page()
    await signed_in_with_key(page, key_console)
    await expect(page.locator("#live")).to_have_attribute("data-state", "live")  # it leads
    await signed_in_with_key(other, key_console)
    await expect(other.locator("#live")).to_have_attribute("data-state", "live")
    await page.goto(f"{key_console.base}#/session/{root.id}")
    await page.get_by_role("button", name="Fork…").click()
    await expect(page.locator("dialog[open] #fork-label")).to_be_visible()
    assert await keys.revoke(key_console.stack.space.key_id)
    for tab in (page, other):
        await expect(tab.locator("#sign-in-key")).to_be_editable()
        await expect(tab.locator(".sign-in .error-text")).to_contain_text("revoked")
        await expect(tab.locator("dialog")).to_have_count(0)
        assert await tab.evaluate("() => sessionStorage.getItem('stello_console.key')") is None
    assert browser_page.console_errors("Failed to load resource.*401") == []
