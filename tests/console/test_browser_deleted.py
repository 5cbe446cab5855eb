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


# What the user typed before pressing it: the box, the button, and the words the gone view
# keeps it under (its box and Copy button are #kept-NAME-text, #kept-NAME-copy).
TYPED = {
    "message": ("#message", "#send", "Send", "Your message was not sent. Here it is to copy:"),
    "memory": (
        "#memory-text",
        "#save-memory",
        "Save",
        "Your memory was not saved. Here it is to copy:",
    ),
    "insight": (
        "#insight-text",
        "#save-insight",
        "Save",
        "Your insight was not saved. Here it is to copy:",
    ),
}


@pytest.mark.parametrize("name", TYPED)
async def test_typed_text_outlives_a_session_deleted_elsewhere(
    name: str, console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Send (a message) or Save (the memory, the insight) on a session another client deleted,
    its deletion event not here yet: the view says the session was deleted elsewhere and it
    leaves the forest, as for the actions above, and what the user typed stays on the page,
    in a box to select and a Copy button that puts it on the clipboard (the banner said
    NOT_FOUND, or the reply's place did; then the session's view stayed as if it were there)."""
    root = await console.stack.root(label="Stays")
    going = await console.stack.fork(root.id, label="Going")
    page = browser_page.page
    await browser_page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.route("**/api/events*", no_live_events)
    await open_console(console, browser_page, f"#/session/{going.id}")
    await expect(page.locator("#session-label")).to_have_text("Going")
    await console.stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=console.stack.space.sid, session_id=going.id)
    )
    box, button, action, words = TYPED[name]
    typed = f"a long {name}\nthat took a while\u2014to write"
    if name != "message":
        await page.locator(f"details:has({box}) > summary").click()
    await page.locator(box).fill(typed)
    await page.locator(button).click()
    await expect(page.locator("#view-gone")).to_have_text(
        f"This session was deleted elsewhere before your {action} reached it. Back to the forest"
    )
    await expect(page.locator(f"#kept-{name}")).to_contain_text(words)
    kept = page.locator(f"#kept-{name}-text")
    await expect(kept).to_have_value(typed)
    await expect(kept).not_to_be_editable()
    await page.locator(f"#kept-{name}-copy").click()
    await expect(page.locator(f"#kept-{name}-copy")).to_have_text("Copied")
    assert await page.evaluate("navigator.clipboard.readText()") == typed
    await expect(page.locator("#error")).to_be_hidden()
    await expect(page.get_by_text("NOT_FOUND")).to_have_count(0)
    await expect(page.locator(".forest-count")).to_have_text("1 session in 1 tree")
    await expect(page.locator(f'#forest .node[data-id="{going.id}"]')).to_have_count(0)
    assert browser_page.console_errors("Failed to load resource") == []


async def test_a_live_deletion_keeps_what_was_typed(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """The session's deletion event arrives while the user has a message in the box, not
    sent, and an edited memory, not saved: the view says the session was deleted and keeps
    both to copy (they went with the view), but no text of a box left as saved or empty."""
    going = await console.stack.root(label="Going")
    page = browser_page.page
    await open_console(console, browser_page, f"#/session/{going.id}")
    await expect(page.locator("#session-label")).to_have_text("Going")
    await expect(page.locator("#live")).to_have_text("live")
    await page.locator("#message").fill("half a thought")
    await page.locator("details:has(#memory-text) > summary").click()
    await page.locator("#memory-text").fill("a note to keep")
    await console.stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=console.stack.space.sid, session_id=going.id)
    )
    await expect(page.locator("#view-gone")).to_have_text(
        "This session was deleted. Back to the forest"
    )
    await expect(page.locator("#kept-message-text")).to_have_value("half a thought")
    await expect(page.locator("#kept-memory-text")).to_have_value("a note to keep")
    await expect(page.locator(".kept")).to_have_count(2)
    await browser_page.shot("deleted-kept")
    assert browser_page.console_errors() == []
