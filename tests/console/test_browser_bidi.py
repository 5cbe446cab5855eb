"""Bidi overrides in user text in a real headless Chromium: isolated wherever text is shown.

A label or a value holding U+202E (right-to-left override) reverses everything after it up to
the end of its paragraph unless it is isolated (<bdi>, unicode-bidi: isolate): the Delete
warning would read otherwise than it says. Each place is checked for its text nodes holding
U+202E being inside an isolating element within the line that shows them.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from playwright.async_api import Locator, expect

from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import open_console
from tests.gateway.conftest import record

pytestmark = pytest.mark.browser

RLO = "\u202e"
LABEL = f"pay {RLO}gnp.exe"

# The text nodes under the element that hold U+202E, and those of them not isolated from it.
UNISOLATED = """(line) => {
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  const found = [];
  const bad = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.includes("\\u202e")) continue;
    found.push(node.data);
    let ok = false;
    for (let e = node.parentElement; e && e !== line; e = e.parentElement) {
      const bidi = getComputedStyle(e).unicodeBidi;
      if (bidi.includes("isolate") || bidi === "plaintext") ok = true;
    }
    if (!ok) bad.push(node.data);
  }
  return { found: found.length, bad };
}"""


async def isolated(line: Locator) -> None:
    """Every text holding U+202E in `line` (there is one at least) is isolated."""
    result = await line.evaluate(UNISOLATED)
    assert result["found"] > 0
    assert result["bad"] == []


class TestBidi:
    async def test_overrides_in_labels_values_and_ids_stay_isolated(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A label, a metadata value and a tool call id holding U+202E: the metadata line
        (with a value like a second pair quoted), the Delete warning, the Fork dialog (its
        title and its default label) and the record's "answers" line keep them isolated."""
        stack = console.stack
        root = await stack.root(
            label=LABEL, metadata={"note": f"x{RLO}y", "owner": "1 owner=alice"}
        )
        await stack.append(
            root.id,
            record("assistant", "calling", tool_calls=[]),
            record("tool", "done", tool_call_id=f"call{RLO}1"),
        )
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        metadata = page.locator("#session-metadata")
        await expect(metadata).to_have_text(f'note="x{RLO}y" owner="1 owner=alice"')
        await isolated(metadata)
        await isolated(page.locator('#records li[data-seq="2"]'))
        await page.locator("#delete").click()
        await isolated(page.locator("#delete-what"))
        await page.get_by_role("button", name="Cancel").click()
        await page.locator("#fork").click()
        await isolated(page.locator("dialog h3"))
        value = await page.locator("#fork-label").input_value()
        assert value == f"\u2068{LABEL}\u2069 fork"
        await page.get_by_role("button", name="Cancel").click()
        assert browser_page.console_errors() == []

    async def test_go_to_lists_labels_isolated(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Two ids that start alike: "Go to id" lists both labels, isolated."""
        stack = console.stack
        by_digit: dict[str, list[str]] = defaultdict(list)
        while not any(len(ids) > 1 for ids in by_digit.values()):
            root = await stack.root(label=LABEL)
            by_digit[root.id[0]].append(root.id)
        digit = next(d for d, ids in by_digit.items() if len(ids) > 1)
        page = browser_page.page
        await open_console(console, browser_page)
        await page.locator("#goto-id").fill(digit)
        await page.locator("#goto-go").click()
        found = page.locator("#goto-found li")
        await expect(found).to_have_count(len(by_digit[digit]))
        await isolated(found.first)
        assert browser_page.console_errors() == []
