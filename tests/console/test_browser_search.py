"""Search and jump in a real headless Chromium: the forest's label filter, and "go to
session" by an id prefix (as the CLI takes SESSION arguments); and their endpoints."""

from __future__ import annotations

from collections import defaultdict

import pytest
from playwright.async_api import expect

from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.http import fetch
from tests.console.test_browser import open_console
from tests.console.test_security import signed_in
from tests.gateway.conftest import record

pytestmark = pytest.mark.browser


class TestFilter:
    async def test_a_label_prefix_keeps_matches_and_their_ancestors(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Typing "alp" keeps Alpha and Alpine route (with its parent Beta for context), also
        under a collapsed node; a word's start matches too, its accents and strokes read as
        their base letters as search reads them ("cafe" keeps "café", "lodz" "Łódź");
        clearing shows every session. A match whose children the filter hides shows no fold
        toggle (it showed "▾", expanded, over nothing)."""
        stack = console.stack
        alpha = await stack.root(label="Alpha")
        beta = await stack.root(label="Beta")
        alpine = await stack.fork(beta.id, "Alpine route")
        zeta = await stack.fork(alpine.id, "Zeta")
        gamma = await stack.root(label="Gamma Łódź café")
        page = browser_page.page
        await open_console(console, browser_page)
        rows = page.locator("#forest .node")
        await expect(rows).to_have_count(5)
        await page.locator(f'#forest .node[data-id="{beta.id}"] .toggle').click()
        await expect(rows).to_have_count(3)
        await page.locator("#forest-filter").fill("alp")
        await expect(rows.locator(".label")).to_have_text(["Alpha", "Beta", "Alpine route"])
        await expect(page.locator(".forest-count")).to_have_text("2 of 5 sessions match “alp”")
        await expect(page.locator(f'#forest .node[data-id="{beta.id}"]')).to_have_class(
            "node context"
        )
        await expect(page.locator(f'#forest .node[data-id="{beta.id}"] .toggle')).to_have_text("▾")
        alpine_row = page.locator(f'#forest .node[data-id="{alpine.id}"]')
        await expect(alpine_row.locator(".toggle")).to_have_text("")
        assert await alpine_row.get_attribute("aria-expanded") is None
        await page.locator("#forest-filter").fill("ROUTE")
        await expect(rows.locator(".label")).to_have_text(["Beta", "Alpine route"])
        for typed in ("cafe", "LODZ", "Café"):
            await page.locator("#forest-filter").fill(typed)
            await expect(rows.locator(".label")).to_have_text(["Gamma Łódź café"])
        await page.locator("#forest-filter").fill("nothing like it")
        await expect(rows).to_have_count(0)
        await expect(page.locator(".forest-count")).to_contain_text("No label starts with")
        await page.locator("#forest-filter").fill("")
        await expect(rows).to_have_count(3)  # Beta is still collapsed
        for hidden in (alpine, zeta):
            await expect(page.locator(f'#forest [data-id="{hidden.id}"]')).to_have_count(0)
        for shown in (alpha, beta, gamma):
            await expect(page.locator(f'#forest [data-id="{shown.id}"]')).to_be_visible()
        assert browser_page.console_errors() == []


# What the Go to id box says of text that is no session id nor its start (the API's `prefix`,
# which it said, is no word of the page).
NOT_AN_ID = (
    "Go to id: “{}” is not a session id nor its start: type 1 to 32 of its hex digits"
    " (0-9, a-f; hyphens are ignored)."
)


class TestGoTo:
    async def test_an_id_prefix_opens_its_session_or_lists_the_candidates(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Eight digits open that session; one digit that several ids start with lists them
        (a click opens one); digits no id starts with say so, and text that is not hex, or too
        long, is said naming the Go to id box (it named the API's field, `prefix`)."""
        stack = console.stack
        made = [await stack.root(label=f"Root {n}") for n in range(17)]  # 17 > 16 digits
        by_digit = defaultdict(list)
        for session in made:
            by_digit[session.id[0]].append(session)
        digit, shared = next((d, s) for d, s in by_digit.items() if len(s) > 1)
        target = made[5]
        page = browser_page.page
        await open_console(console, browser_page)
        goto = page.locator("#goto-id")

        await goto.fill(target.id[:8].upper())
        await goto.press("Enter")
        await expect(page.locator("#session-label")).to_have_text(target.label)
        await expect(page).to_have_url(f"{console.base}#/session/{target.id}")

        await goto.fill(digit)
        await page.locator("#goto-go").click()
        found = page.locator("#goto-found li a")
        await expect(found).to_have_count(len(shared))
        # By its link, not its label: "Root 1" is also in "Root 10" to "Root 16" (ci5).
        await page.locator(f'#goto-found li a[href="#/session/{shared[1].id}"]').click()
        await expect(page.locator("#session-label")).to_have_text(shared[1].label)

        unused = next(d for d in "0123456789abcdef" if d not in by_digit)
        await goto.fill(f"{unused}0000")
        await goto.press("Enter")
        await expect(page.locator("#goto-found")).to_have_text(
            f"No session id starts with “{unused}0000”."
        )
        await goto.fill("not-hex")
        await goto.press("Enter")
        await expect(page.locator("#goto-found")).to_have_text(NOT_AN_ID.format("not-hex"))
        await goto.fill(target.id + "0")  # 33 digits
        await goto.press("Enter")
        await expect(page.locator("#goto-found")).to_have_text(NOT_AN_ID.format(f"{target.id}0"))
        await expect(page.get_by_text("prefix")).to_have_count(0)
        assert browser_page.console_errors() == []

    async def test_a_late_answer_keeps_what_was_typed_since(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A lookup answered after the user typed on neither clears the input nor opens the
        session it named: the text typed meanwhile stays (an answer for the text still there
        opens its session and clears the input as before)."""
        target = await console.stack.root(label="Target")
        page = browser_page.page
        await open_console(console, browser_page)
        # /api/resolve waits for the test to release it.
        await page.evaluate(
            """() => {
              const real = window.fetch;
              window.releaseLookup = null;
              window.fetch = (input, init) => {
                if (!String(input).includes("/api/resolve")) return real(input, init);
                return new Promise((resolve) => {
                  window.releaseLookup = () => resolve(real(input, init));
                });
              };
            }"""
        )
        goto = page.locator("#goto-id")
        await goto.fill(target.id[:8])
        await goto.press("Enter")
        await page.wait_for_function("() => window.releaseLookup !== null")
        await goto.fill(target.id[:8] + " and more")
        await page.evaluate("() => window.releaseLookup()")
        await page.wait_for_timeout(500)
        await expect(goto).to_have_value(target.id[:8] + " and more")
        await expect(page.locator("#session-label")).to_have_count(0)
        assert "#/session/" not in page.url
        await page.evaluate("() => { window.releaseLookup = null; }")
        await goto.fill(target.id[:8])
        await goto.press("Enter")
        await page.wait_for_function("() => window.releaseLookup !== null")
        await page.evaluate("() => window.releaseLookup()")
        await expect(page.locator("#session-label")).to_have_text(target.label)
        await expect(goto).to_have_value("")
        assert browser_page.console_errors() == []


class TestEndpoints:
    async def test_resolve_and_space_answer_json(self, console: ConsoleStack) -> None:
        """/api/resolve answers the sessions an id prefix names (hyphens ignored), refuses
        what is not hex naming `prefix`; /api/space names the caller's space."""
        root = await console.stack.root(label="Named")
        headers = await signed_in(console)
        dashed = root.id[:13]  # "xxxxxxxx-xxxx": a hyphen in it
        reply = await fetch(console.port, f"/api/resolve?prefix={dashed}", headers=headers)
        assert reply.status == 200
        assert [s["label"] for s in reply.json()["sessions"]] == ["Named"]
        bad = await fetch(console.port, "/api/resolve?prefix=xyz", headers=headers)
        assert bad.status == 400 and bad.json()["error"]["message"].startswith("prefix:")
        space = (await fetch(console.port, "/api/space", headers=headers)).json()
        assert space["id"] == console.stack.space.sid
        assert space["name"].startswith("space-")


class TestRecordSearch:
    async def test_a_hit_opens_its_session_at_the_record(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The bar's search box lists the hits, newest first, the match marked (a Chinese
        one too, cut by code points after an emoji); a hit opens its session scrolled to
        the record, in a window read around it; "More" reads the next page. The count reads
        as English: "1 record matches" (it said "1 records match")."""
        stack = console.stack
        old = await stack.root(label="Old talk")
        await stack.append(
            old.id,
            record("user", "where is the 🫖 茶壶 kettle"),
            *(record("assistant", f"filler {n}") for n in range(60)),  # beyond the first page
        )
        new = await stack.root(label="New talk")
        await stack.append(new.id, *(record("user", f"kettle {n}") for n in range(25)))
        page = browser_page.page
        await open_console(console, browser_page)
        await page.locator("#search").fill("茶壶")
        await page.locator("#search").press("Enter")
        hits = page.locator("#hits .hit")
        await expect(hits).to_have_count(1)
        await expect(page.locator("#search-count")).to_have_text("1 record matches “茶壶”")
        await expect(hits.locator("mark")).to_have_text(["茶壶"])
        await expect(hits.locator(".label")).to_have_text("Old talk")
        await page.locator("#search").fill("kettle")
        await page.locator("#search").press("Enter")
        await expect(hits).to_have_count(20)
        await expect(page.locator("#search-count")).to_have_text("20+ records match “kettle”")
        await expect(hits.first.locator(".label")).to_have_text("New talk")
        await page.locator("#search-more").click()
        await expect(hits).to_have_count(26)
        await expect(page.locator("#search-count")).to_have_text("26 records match “kettle”")
        await expect(page.locator("#search-more")).to_have_count(0)
        await hits.last.click()
        await expect(page.locator("#session-label")).to_have_text("Old talk")
        await expect(page).to_have_url(f"{console.base}#/session/{old.id}/at/1")
        found = page.locator('#records li.found[data-seq="1"]')
        await expect(found).to_be_in_viewport()
        await page.locator("#search").fill("-kettle")
        await page.locator("#search").press("Enter")
        await expect(page.locator("#error-text")).to_contain_text("query")
        assert browser_page.console_errors("the server responded with a status of 400") == []

    async def test_a_record_far_back_opens_in_a_window_of_two_reads(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """#/session/ID/at/1 of 600 records (12 pages back): two record reads, the window
        around #1 marked, newer pages on request; a SEQ that is no whole number or is past
        the last record is said in the page, after at most two reads (no walk)."""
        stack = console.stack
        long = await stack.root(label="Long talk")
        for start in range(0, 600, 200):
            await stack.append(long.id, *(record("user", f"m{start + n}") for n in range(200)))
        page = browser_page.page
        reads: list[str] = []
        page.on("request", lambda r: reads.append(r.url) if "/records" in r.url else None)
        await open_console(console, browser_page)
        reads.clear()
        await page.goto(f"{console.base}#/session/{long.id}/at/1")
        await expect(page.locator('#records li.found[data-seq="1"]')).to_be_in_viewport()
        items = page.locator("#records li[data-seq]")
        await expect(items).to_have_count(26)  # #1 and the 25 after it
        assert len(reads) == 2, reads
        await page.locator("#newer").click()
        await expect(items).to_have_count(51)
        await expect(page.locator("#older")).to_be_hidden()
        await expect(page.locator("#records-notice")).to_be_hidden()

        reads.clear()
        await page.goto(f"{console.base}#/session/{long.id}/at/abc")
        notice = page.locator("#records-notice")
        await expect(notice).to_contain_text("There is no record “abc” to open")
        await expect(items.last).to_have_attribute("data-seq", "600")
        assert len(reads) == 1, reads
        reads.clear()
        await page.goto(f"{console.base}#/session/{long.id}/at/999999")
        await expect(notice).to_contain_text("Record #999999 is not in this session")
        await expect(notice).to_contain_text("its last record is #600")
        assert len(reads) == 2, reads
        assert browser_page.console_errors() == []

    async def test_a_query_counts_characters_as_the_gateway_does(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The search box had maxlength="1000", which counts UTF-16 code units: a query of 600
        characters beyond the BMP (1,200 units, within the gateway's 1,000 characters) was cut
        to 500 and another query searched; now it is searched whole, and one the gateway
        refuses (1,001 characters) says why rather than being cut short."""
        page = browser_page.page
        await open_console(console, browser_page)
        query = "\U0001d431" * 600  # MATHEMATICAL BOLD SMALL X: one character, two units
        await page.locator("#search").fill(query)
        await page.locator("#search").press("Enter")
        await expect(page.locator("#search-count")).to_have_text(f"No record matches “{query}”.")
        await page.locator("#search").fill("x" * 1001)
        await page.locator("#search").press("Enter")
        await expect(page.locator("#view-error")).to_contain_text(
            "must be at most 1000 characters, got 1001"
        )
        assert browser_page.console_errors(r"Failed to load resource.*400") == []

    async def test_the_endpoint_answers_hits_as_json(self, console: ConsoleStack) -> None:
        """/api/search?q= answers hits with code-point matches; a bad query is a 400 naming
        `query`."""
        root = await console.stack.root(label="Json")
        await console.stack.append(root.id, record("user", "a kettle"))
        headers = await signed_in(console)
        reply = await fetch(console.port, "/api/search?q=kettle", headers=headers)
        assert reply.status == 200
        [hit] = reply.json()["hits"]
        assert (hit["label"], hit["seq"], hit["matches"]) == ("Json", 1, [[2, 8]])
        bad = await fetch(console.port, "/api/search?q=", headers=headers)
        assert bad.status == 400 and "query" in bad.json()["error"]["message"]


class TestCurrentPage:
    async def test_the_bars_current_link_follows_the_page_shown(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The forest marks Forest current (aria-current="page", highlighted); search and a
        session's view are neither link's page, digests marks Digests; back to the forest
        marks Forest again."""
        session = await console.stack.root(label="Alpha")
        page = browser_page.page
        await open_console(console, browser_page)
        forest, digests = page.locator("#nav-forest"), page.locator("#nav-digests")

        async def marked(current: list[bool]) -> None:
            for link, on in zip((forest, digests), current, strict=True):
                if on:
                    await expect(link).to_have_attribute("aria-current", "page")
                    await expect(link).to_have_class("current")
                else:
                    await expect(link).not_to_have_attribute("aria-current", "page")
                    await expect(link).not_to_have_class("current")

        await marked([True, False])
        await page.locator("#search").fill("hello")
        await page.locator("#search").press("Enter")
        await expect(page).to_have_url(f"{console.base}#/search/hello")
        await marked([False, False])
        await page.goto(f"{console.base}#/session/{session.id}")
        await expect(page.locator("#session-label")).to_have_text("Alpha")
        await marked([False, False])
        await digests.click()
        await marked([False, True])
        await forest.click()
        await marked([True, False])
        assert browser_page.console_errors() == []
