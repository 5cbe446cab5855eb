"""An action on a session another client deleted a moment ago, before the deletion's live event
reached the page, in a real headless Chromium: the page says the session was deleted elsewhere
and shows it as that event will, never a raw NOT_FOUND."""

from __future__ import annotations

import pytest
from playwright.async_api import Route, expect

from stello.agent.v1 import agent_pb2
from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import open_console

pytestmark = pytest.mark.browser

# The button that starts each action, and its dialog's button (None: no dialog).
ACTIONS = {
    "Delete": ("Delete…", "Delete"),
    "Archive": ("Archive", None),
    "Rename": ("Rename…", "Rename"),
    "Fork": ("Fork…", "Fork"),
}


async def no_live_events(route: Route) -> None:
    """The live stream never connects: no deletion event can reach the page first."""
    await route.abort()


@pytest.mark.parametrize("action", ACTIONS)
async def test_an_action_on_a_session_deleted_elsewhere_shows_it_deleted(
    action: str, console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """The open session (and the one below it) is deleted by another client; the page, not
    told yet, runs `action` on it: the dialog closes, the view says the session was deleted
    elsewhere, and it and its subtree leave the forest (the banner said NOT_FOUND, or the
    dialog stayed open saying it)."""
    root = await console.stack.root(label="Stays")
    going = await console.stack.fork(root.id, label="Going")
    await console.stack.fork(going.id, label="Below")
    page = browser_page.page
    await page.route("**/api/events*", no_live_events)
    await open_console(console, browser_page, f"#/session/{going.id}")
    await expect(page.locator("#session-label")).to_have_text("Going")
    await expect(page.locator(".forest-count")).to_have_text("3 sessions in 1 tree")
    await console.stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=console.stack.space.sid, session_id=going.id)
    )
    opener, submit = ACTIONS[action]
    await page.get_by_role("button", name=opener, exact=True).click()
    if submit is not None:
        await page.locator("dialog[open]").get_by_role("button", name=submit, exact=True).click()
    await expect(page.locator("#view-gone")).to_have_text(
        f"This session was deleted elsewhere before your {action} reached it. Back to the forest"
    )
    await expect(page.locator("dialog")).to_have_count(0)
    await expect(page.locator("#error")).to_be_hidden()
    await expect(page.get_by_text("NOT_FOUND")).to_have_count(0)
    await expect(page.locator(".forest-count")).to_have_text("1 session in 1 tree")
    await expect(page.locator(f'#forest .node[data-id="{going.id}"]')).to_have_count(0)
    await expect(page).to_have_title("Stello console")
    assert browser_page.console_errors("Failed to load resource") == []
