"""Renaming a session in a real headless Chromium, and labels as long as the gateway allows:
it counts a label's characters (code points), where a browser's maxlength counts UTF-16 code
units, two for an emoji."""

from __future__ import annotations

import pytest
from playwright.async_api import Request, expect

from stello.agent.v1 import agent_pb2
from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import open_console

pytestmark = pytest.mark.browser

EMOJI = "\U0001f600"  # one character beyond the BMP: two UTF-16 code units


def label_writes(browser: BrowserPage) -> list[Request]:
    """Every request the page makes that names a label (a rename, a fork, a new root)."""
    seen: list[Request] = []
    browser.page.on("request", lambda r: seen.append(r) if r.method in ("PUT", "POST") else None)
    return seen


async def test_rename_shows_the_new_label_everywhere_and_a_refusal_in_the_dialog(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Rename… opens a dialog holding the label; a label the gateway refuses keeps the dialog
    open with what was typed and says why; a good one shows in the session's title, the
    browser tab's title, the forest, and another tab (its forest, and the lineage and
    "Forked from" of a child it shows)."""
    root = await console.stack.root(label="Before")
    child = await console.stack.fork(root.id, "Kid")
    page = browser_page.page
    await open_console(console, browser_page, f"#/session/{root.id}")
    other = await browser_page.context.new_page()
    await other.goto(f"{console.base}#/session/{child.id}")
    await expect(other.locator("#lineage-nav")).to_contain_text("Before")
    await expect(other.locator("p", has_text="Forked from")).to_have_text("Forked from Before")
    await page.get_by_role("button", name="Rename…").click()
    field = page.locator("#rename-label")
    await expect(field).to_have_value("Before")
    await expect(page).to_have_title("Before · Stello console")
    await field.fill("   ")
    await page.get_by_role("button", name="Rename", exact=True).click()
    alert = page.locator("dialog[open] [role=alert]")
    await expect(alert).to_contain_text("INVALID_ARGUMENT: label: must not be empty")
    await expect(field).to_have_value("   ")
    await field.fill("After")
    await page.get_by_role("button", name="Rename", exact=True).click()
    await expect(page.locator("dialog")).to_have_count(0)
    await expect(page.locator("#session-label")).to_have_text("After")
    for tab in (page, other):
        node = tab.locator(f'#forest .node[data-id="{root.id}"] .label')
        await expect(node).to_have_text("After")
    await expect(other.locator("#lineage-nav")).to_contain_text("After")
    await expect(page).to_have_title("After · Stello console")
    await expect(other).to_have_title("Kid · Stello console")
    await expect(other.locator("p", has_text="Forked from")).to_have_text("Forked from After")
    await browser_page.shot("renamed")
    assert (await console.stack.view(root.id)).node.label == "After"
    assert browser_page.console_errors(r"Failed to load resource.*400") == []


async def test_a_rename_of_a_session_deleted_meanwhile_closes_the_dialog(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """The session goes while the dialog is open: the dialog closes and the view says the
    session was deleted (the dialog stayed, and Rename said NOT_FOUND in it)."""
    root = await console.stack.root(label="Going")
    page = browser_page.page
    await open_console(console, browser_page, f"#/session/{root.id}")
    await page.get_by_role("button", name="Rename…").click()
    await page.locator("#rename-label").fill("Gone already")
    await console.stack.gw.DeleteSession(
        agent_pb2.DeleteSessionRequest(space_id=console.stack.space.sid, session_id=root.id)
    )
    await expect(page.locator("#view-gone")).to_have_text(
        "This session was deleted. Back to the forest"
    )
    await expect(page.locator("dialog")).to_have_count(0)
    await expect(page.get_by_text("NOT_FOUND")).to_have_count(0)
    assert browser_page.console_errors() == []


async def test_labels_of_astral_characters_count_as_the_gateway_counts_them(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """150 emoji are 150 characters (300 UTF-16 code units): a new root and a fork keep them
    all (maxlength="200" cut them to 100); 201 are refused in the dialog, naming the limit,
    before any request; 200 are a rename the gateway keeps."""
    page = browser_page.page
    await open_console(console, browser_page)
    await page.get_by_role("button", name="New root").click()
    await page.locator("#root-label").fill(EMOJI * 150)
    await page.get_by_role("button", name="Create", exact=True).click()
    await expect(page.locator("#session-label")).to_have_text(EMOJI * 150)
    await page.get_by_role("button", name="Fork…").click()
    await page.locator("#fork-label").fill(EMOJI * 199 + "!")
    await page.get_by_role("button", name="Fork", exact=True).click()
    await expect(page.locator("#session-label")).to_have_text(EMOJI * 199 + "!")
    writes = label_writes(browser_page)
    await page.get_by_role("button", name="Rename…").click()
    await page.locator("#rename-label").fill(EMOJI * 201)
    await page.get_by_role("button", name="Rename", exact=True).click()
    await expect(page.locator("dialog[open] [role=alert]")).to_have_text(
        "INVALID_ARGUMENT: label: must be at most 200 characters, got 201"
    )
    assert writes == []
    await page.locator("#rename-label").fill(EMOJI * 200)
    await page.get_by_role("button", name="Rename", exact=True).click()
    await expect(page.locator("#session-label")).to_have_text(EMOJI * 200)
    tree = (await console.stack.view(await session_id(browser_page))).node
    assert tree.label == EMOJI * 200
    assert browser_page.console_errors() == []


async def session_id(browser: BrowserPage) -> str:
    """The id of the session the page shows."""
    found = await browser.page.locator("article.session").get_attribute("data-id")
    assert found is not None
    return found


async def test_a_long_label_without_spaces_fits_the_dialogs_on_a_phone(
    console: ConsoleStack, phone_page: BrowserPage
) -> None:
    """A label of 200 characters with no space in it (a path, say) names the session in the
    fork, rename and delete dialogs' titles: it breaks inside the dialog, which never scrolls
    sideways on a phone."""
    root = await console.stack.root(label="notes/" + "x" * 194)
    page = phone_page.page
    await open_console(console, phone_page, f"#/session/{root.id}")
    for button in ("Fork…", "Rename…", "Delete…"):
        await page.get_by_role("button", name=button).click()
        box = page.locator("dialog[open]")
        await expect(box).to_be_visible()
        widths = await box.evaluate("(e) => [e.scrollWidth, e.clientWidth]")
        assert widths[0] <= widths[1], button
        await page.keyboard.press("Escape")
        await expect(page.locator("dialog")).to_have_count(0)
    assert phone_page.console_errors() == []


async def test_a_long_label_without_spaces_fits_a_forks_view_on_a_phone(
    console: ConsoleStack, phone_page: BrowserPage
) -> None:
    """A fork of a session whose label is a 200-character path: its lineage and its "Forked
    from" line break the label inside the window; nothing of the view scrolls sideways."""
    root = await console.stack.root(label="notes/" + "x" * 194)
    child = await console.stack.fork(root.id, "notes/" + "y" * 194)
    page = phone_page.page
    await open_console(console, phone_page, f"#/session/{child.id}")
    await expect(page.locator("#session-source")).to_be_visible()
    for part in ("#lineage-nav", "#session-source", ".session-top", "#detail"):
        widths = await page.locator(part).evaluate("(e) => [e.scrollWidth, e.clientWidth]")
        assert widths[0] <= widths[1], part
    assert phone_page.console_errors() == []


async def test_a_rename_by_keyboard_keeps_the_focus_on_its_button(
    console: ConsoleStack, browser_page: BrowserPage
) -> None:
    """Enter on Rename…, a new label, Enter: the dialog closes and the focus is back on
    Rename… (the redrawn actions dropped it to the page's start); Archive by keyboard keeps
    it on the button in its place (Unarchive)."""
    root = await console.stack.root(label="Keys")
    page = browser_page.page
    await open_console(console, browser_page, f"#/session/{root.id}")
    await page.locator("#rename").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#rename-label")).to_be_focused()
    await page.keyboard.press("Control+A")
    await page.keyboard.type("Keys renamed")
    await page.keyboard.press("Enter")
    await expect(page.locator("#session-label")).to_have_text("Keys renamed")
    await expect(page.locator("#rename")).to_be_focused()
    await page.locator("#archive").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#session-status")).to_have_text("archived")
    await expect(page.locator("#unarchive")).to_be_focused()
    assert browser_page.console_errors() == []


async def test_a_long_lineages_actions_stay_in_reach_on_a_phone(
    console: ConsoleStack, phone_page: BrowserPage
) -> None:
    """A session 30 deep, its ancestors' labels long: on a 390x844 phone each action button
    of its view shows inside the window, not hidden below the scrolled top (the lineage
    pushed them past the top's bottom edge), and a tap reaches it."""
    parent = await console.stack.root(label="Ancestor 0 " + "with a long descriptive label " * 3)
    for depth in range(1, 30):
        label = f"Ancestor {depth} " + "with a long descriptive label " * 3
        parent = await console.stack.fork(parent.id, label.strip())
    page = phone_page.page
    await open_console(console, phone_page, f"#/session/{parent.id}")
    await expect(page.locator("#lineage .ancestor")).not_to_have_count(0)
    buttons = page.locator("#session-actions button")
    await expect(buttons).not_to_have_count(0)
    for n in range(await buttons.count()):
        reached = await buttons.nth(n).evaluate(
            """(button) => {
                const box = button.getBoundingClientRect();
                const inside = box.top >= 0 && box.left >= 0 &&
                    box.bottom <= innerHeight && box.right <= innerWidth;
                const hit = document.elementFromPoint(
                    box.left + box.width / 2, box.top + box.height / 2);
                return inside && Boolean(hit && button.contains(hit));
            }"""
        )
        assert reached, await buttons.nth(n).text_content()
    await phone_page.shot("phone-long-lineage")
    await page.locator("#rename").tap()
    await expect(page.locator("dialog[open] #rename-label")).to_be_visible()
    assert phone_page.console_errors() == []
