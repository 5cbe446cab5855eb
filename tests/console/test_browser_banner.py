"""The error banner in a real headless Chromium: a failed action's banner goes when an action
then succeeds, when the user opens another view, or when the user dismisses it.

An insight over STELLO_MAX_SLOT_BYTES (1 MiB here) is what fails: the gateway refuses it
(INVALID_ARGUMENT) and the page stays as it was, so only the banner says so.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from stello.settings import MIB
from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import open_console

pytestmark = pytest.mark.browser

REFUSED = r"Failed to load resource.*(400|413)"
"""The console messages of the save the gateway refuses on purpose."""


async def fail_a_save(console: ConsoleStack, browser: BrowserPage) -> Page:
    """Open a session and save an insight the gateway refuses: the banner shows why."""
    root = await console.stack.root(label="Notes")
    page = browser.page
    await open_console(console, browser, f"#/session/{root.id}")
    await expect(page.locator("#session-label")).to_have_text("Notes")
    await page.locator("details:has(#insight-text) summary").click()
    await page.locator("#insight-text").fill("x" * (MIB + 1))
    await page.locator("#save-insight").click()
    await expect(page.locator("#error")).to_be_visible()
    await expect(page.locator("#error-text")).to_contain_text("INVALID_ARGUMENT")
    return page


class TestErrorBanner:
    async def test_a_later_successful_action_takes_the_banner_away(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A save that fails, then one that succeeds on the same view: the banner goes."""
        page = await fail_a_save(console, browser_page)
        await page.locator("#insight-text").fill("short enough")
        await page.locator("#save-insight").click()
        await expect(page.locator("#save-insight")).to_have_text("Saved")
        await expect(page.locator("#error")).to_be_hidden()
        assert browser_page.console_errors(REFUSED) == []

    async def test_another_view_takes_the_banner_away(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A failed save, then Digests: the failure was the other view's, the banner goes."""
        page = await fail_a_save(console, browser_page)
        await page.locator("#nav-digests").click()
        await expect(page.locator("#digests")).to_be_visible()
        await expect(page.locator("#error")).to_be_hidden()
        assert browser_page.console_errors(REFUSED) == []

    async def test_the_user_dismisses_the_banner_from_the_keyboard(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The banner's close button has a label, Tab reaches it, Enter closes the banner."""
        page = await fail_a_save(console, browser_page)
        close = page.get_by_role("button", name="Dismiss this message")
        await expect(close).to_be_visible()
        await page.locator("#search").focus()
        for _ in range(10):  # from the search box in the bar, past its buttons, to the banner
            if await close.evaluate("button => document.activeElement === button"):
                break
            await page.keyboard.press("Tab")
        await expect(close).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(page.locator("#error")).to_be_hidden()
        await expect(page.locator("#insight-text")).to_be_visible()  # the view is untouched
        assert browser_page.console_errors(REFUSED) == []
