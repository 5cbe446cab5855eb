"""A console restart in a real headless Chromium: open tabs stay signed in and resume their
live stream from its cursor; a renewed token signs them out with a page saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Request, expect

from stello_console import LaunchToken, console_secret, running_console
from tests.console.conftest import BrowserPage, GatewayStack

pytestmark = pytest.mark.browser


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
