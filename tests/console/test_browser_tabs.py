"""Many tabs of one browser: they share one live stream, so none waits for a connection.

A browser keeps six HTTP/1.1 connections per host:port for all its tabs; a live stream per
tab would take them all by the sixth tab and leave every tab's requests waiting. The tabs
elect one (a Web Lock) to read the stream and relay it (a BroadcastChannel).
"""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, Page, expect

from tests.console.conftest import DESKTOP, ConsoleStack, open_page
from tests.gateway.conftest import Backends, FakeSummarizer, close_stack, open_stack, record
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.browser

TABS = 8
QUICK_MS = 5_000  # a page that waits for a free connection waits until a tab closes


async def signed_in(page: Page, base: str, space: TestSpace) -> None:
    """Sign this tab in to a deployed console with `space`'s key, and wait until it is live."""
    await page.goto(base)
    await page.locator("#sign-in-key").fill(space.key)
    await page.locator("#sign-in-space").fill(space.sid)
    await page.locator("#sign-in").click()
    await live(page)


async def live(page: Page) -> None:
    """Wait until the page shows the forest and its badge says live."""
    await expect(page.locator(".forest-count")).to_be_visible(timeout=QUICK_MS)
    await expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=QUICK_MS)


class TestTabs:
    async def test_eight_tabs_load_follow_changes_and_survive_the_leader_closing(
        self, console: ConsoleStack, browser: Browser
    ) -> None:
        """Eight tabs in one browser all load and go live; a session opens at once in the
        first; another client's changes reach every tab; the first tab (the one reading the
        stream) closes and the others keep following, nothing shown twice."""
        stack = console.stack
        root = await stack.root(label="Shared")
        async with open_page(browser, DESKTOP) as opened:
            first = opened.page
            await first.goto(console.console.url)
            await live(first)
            tabs = [first]
            for _ in range(TABS - 1):
                tab = await opened.context.new_page()
                await tab.goto(console.base)
                await live(tab)
                tabs.append(tab)
            await first.goto(f"{console.base}#/session/{root.id}")
            await expect(first.locator("#session-label")).to_have_text("Shared", timeout=QUICK_MS)
            child = await stack.fork(root.id, "Seen everywhere")
            for tab in tabs:
                node = tab.locator(f'#forest .node[data-id="{child.id}"]')
                await expect(node).to_be_visible(timeout=QUICK_MS)
            watcher = tabs[1]
            await watcher.goto(f"{console.base}#/session/{root.id}")
            await expect(watcher.locator("#records .empty")).to_be_visible()
            await first.close()
            await stack.append(root.id, record("user", "after the leader"))
            later = await stack.fork(root.id, "After the leader")
            for tab in tabs[1:]:
                node = tab.locator(f'#forest .node[data-id="{later.id}"]')
                await expect(node).to_be_visible(timeout=QUICK_MS)
                await expect(tab.locator("#live")).to_have_attribute("data-state", "live")
            await expect(watcher.locator('#records li[data-seq="1"] .content')).to_have_text(
                "after the leader"
            )
            assert await watcher.locator("#records li[data-seq]").count() == 1
            assert opened.console_errors() == []

    async def test_tabs_signed_in_to_other_spaces_keep_their_own_streams(
        self,
        key_console: ConsoleStack,
        browser: Browser,
        backends: Backends,
        other_space: TestSpace,
        summarizer: FakeSummarizer,
    ) -> None:
        """A deployed console, one browser: two tabs in one space share a stream, a third in
        another space follows its own; each space's change reaches its tabs only."""
        mine = key_console.stack.space
        async with open_page(browser, DESKTOP) as opened:
            first = opened.page
            second = await opened.context.new_page()
            theirs = await opened.context.new_page()
            await signed_in(first, key_console.base, mine)
            await signed_in(second, key_console.base, mine)
            await signed_in(theirs, key_console.base, other_space)
            other = await open_stack(backends, key_console.stack.gateway, other_space, summarizer)
            try:
                their_root = await other.root(label="theirs")
            finally:
                await close_stack(other)
            my_root = await key_console.stack.root(label="mine")
            for tab in (first, second):
                await expect(tab.locator(f'#forest .node[data-id="{my_root.id}"]')).to_be_visible(
                    timeout=QUICK_MS
                )
            their_node = theirs.locator(f'#forest .node[data-id="{their_root.id}"]')
            await expect(their_node).to_be_visible(timeout=QUICK_MS)
            await expect(theirs.locator(".forest-count")).to_have_text("1 session in 1 tree")
            for tab in (first, second):
                await expect(tab.locator(".forest-count")).to_have_text("1 session in 1 tree")
            assert opened.console_errors() == []
