"""Stop while a reply streams, in a real headless Chromium (explore8 F8).

The held provider (conftest) streams REPLY_HEAD and then waits: a reply that
would never end by itself, like a runaway model. Stop aborts the page's fetch;
the console then cancels its SendStream, and the gateway stores nothing of the
turn and gives its lease back at once (agent.proto, Send).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest
from playwright.async_api import Page, expect

from tests.console.conftest import REPLY_HEAD, BrowserPage, ConsoleStack
from tests.console.test_browser import open_console

pytestmark = pytest.mark.browser

LEASE = "SELECT turn_token FROM sessions WHERE space_id = $1 AND id = $2"
STOPPED = "Stopped — nothing was stored."


async def lease_is_free(pool: asyncpg.Pool, console: ConsoleStack, session_id: str) -> bool:
    """Whether no turn holds the session's lease (read in the database)."""
    space = console.stack.space.id
    return await pool.fetchval(LEASE, space, uuid.UUID(session_id)) is None


GIVEN_BACK_WITHIN_S = 3.0
"""How soon a stopped turn's lease is free: the gateway gives it back after it cut the model
call, a storage call the page does not wait for (the page says "stopped" first); far under
the lease's own lifetime (`turn_lease_ttl_s`, 10 s), so a lease left to expire fails."""


async def until_lease_free(pool: asyncpg.Pool, console: ConsoleStack, session_id: str) -> None:
    """Until no turn holds the session's lease, within GIVEN_BACK_WITHIN_S (polled: a row
    of the database, which no event here tells)."""
    async with asyncio.timeout(GIVEN_BACK_WITHIN_S):
        while True:
            if await lease_is_free(pool, console, session_id):
                return
            await asyncio.sleep(0.02)


async def streaming(page: Page, message: str) -> None:
    """Type `message`, send it, and wait for the reply's first words."""
    await page.locator("#message").fill(message)
    await page.locator("#send").click()
    await expect(page.locator("#streaming")).to_have_text(REPLY_HEAD)


async def sent_and_stored(page: Page, console: ConsoleStack, seq: int, message: str) -> None:
    """Send `message` (the provider not held): its reply is stored as record `seq`."""
    console.provider.release.set()
    await page.locator("#message").fill(message)
    await page.locator("#send").click()
    stored = page.locator(f'#records li.role-assistant[data-seq="{seq}"] .content')
    await expect(stored).to_have_text(f"{REPLY_HEAD}reply to: {message}")


class TestStop:
    async def test_stop_cancels_the_turn_says_nothing_was_stored_and_frees_the_session(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """Stop shows only while a reply streams; pressing it ends the stream within a
        second, the gateway's model call is cut, the page says nothing was stored (and
        nothing is, the lease is free) and the next message is answered at once."""
        root = await console.stack.root(label="Chat")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        stop = page.get_by_role("button", name="Stop")
        await expect(page.locator("#stop")).to_be_hidden()
        console.provider.release.clear()
        await streaming(page, "write forever")
        await expect(stop).to_be_visible()
        await expect(page.locator("#send")).to_be_hidden()
        began = time.monotonic()
        await stop.click()
        await asyncio.wait_for(console.provider.cut.wait(), 1)
        await expect(page.locator("#send-note")).to_contain_text(STOPPED, timeout=1000)
        assert time.monotonic() - began < 1.5
        await expect(page.locator("li.record.stopped .content")).to_have_text(REPLY_HEAD)
        await expect(page.locator("li.record.stopped")).to_contain_text("stopped · not stored")
        await expect(page.locator("#message")).to_have_value("write forever")
        await expect(page.locator("#stop")).to_be_hidden()
        await expect(page.locator("#send")).to_be_visible()
        await browser_page.shot("session-stopped")
        assert await console.stack.records(root.id) == []
        await until_lease_free(pool, console, root.id)  # given back after the cut
        await sent_and_stored(page, console, 2, "and now?")
        await expect(page.locator("#stop")).to_be_hidden()
        assert [r.content for r in await console.stack.records(root.id)] == [
            "and now?",
            f"{REPLY_HEAD}reply to: and now?",
        ]
        assert browser_page.console_errors() == []

    async def test_escape_or_the_keyboard_stops_too(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Escape in the message box stops the reply; after Ctrl+Enter, Tab reaches the
        Stop button (its name "Stop") and Enter stops; each time nothing is stored."""
        root = await console.stack.root(label="Keys")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        console.provider.release.clear()
        await streaming(page, "first")
        await page.locator("#message").press("Escape")
        await expect(page.locator("#send-note")).to_contain_text(STOPPED)
        await page.locator("#message").fill("second")
        await page.locator("#message").press("Control+Enter")
        await expect(page.locator("#streaming")).to_have_text(REPLY_HEAD)
        await page.keyboard.press("Tab")
        focused = page.locator(":focus")
        await expect(focused).to_have_attribute("id", "stop")
        await expect(focused).to_have_accessible_name("Stop")
        await page.keyboard.press("Enter")
        await expect(page.locator("li.record.stopped")).to_have_count(2)
        await expect(page.locator("#message")).to_be_focused()
        assert await console.stack.records(root.id) == []
        await sent_and_stored(page, console, 2, "third")
        assert browser_page.console_errors() == []
