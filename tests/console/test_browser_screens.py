"""The console on every screen and keyboard, in a real headless Chromium (issue #36).

The three screens a user meets first (the forest, a conversation, the fork dialog) at
1280x800 and as a phone (390x844, touch, no hover): nothing wider than the window,
the newest message, the composer and the fork action in view; screenshots of each go
to the artefacts folder (`conftest.artefacts()`; `desktop-conversation.png` is the one
the README shows as docs/console.png, copied by hand). A fork driven by the keyboard alone,
with the focus visible at every step; axe-core, injected by the test (the console
never ships it), finds no serious or critical violation on any of the three screens.
And the layout defects that issue named: lineage slots overlapping, the scroll
position kept across sessions, a compress summary shown twice, a conversation opened
at its first record, the space shown by its UUID.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from playwright.async_api import Locator, Page, expect

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.console.conftest import REPLY_HEAD, BrowserPage, ConsoleStack
from tests.console.test_browser import open_console
from tests.gateway.conftest import Stack, record

pytestmark = pytest.mark.browser

LONG_LINK = "https://example.com/" + "very_long_path_segment_" * 8  # no break in it
MAX_TABS = 80  # more Tab presses than any path below needs


async def conversation(stack: Stack, label: str, turns: int) -> common_pb2.SessionSummary:
    """A root with `turns` user/assistant pairs, one of them an unbreakable long link."""
    root = await stack.root(label=label, system_prompt="You are a careful research assistant.")
    records = []
    for n in range(1, turns + 1):
        records.append(record("user", f"Question {n}: what did the survey find about topic {n}?"))
        answer = f"Answer {n}: the survey found a steady trend in topic {n}, with details."
        records.append(record("assistant", LONG_LINK if n == 2 else answer))
    await stack.append(root.id, *records)
    return root


async def demo_forest(stack: Stack, pool: asyncpg.Pool) -> common_pb2.SessionSummary:
    """A small forest as a user builds one; returns the conversation the screens open.

    The records are appended straight to storage, so the turn counts a user would see
    are set in the table (a screenshot of "0 turns" beside a conversation reads as a bug).
    """
    research = await conversation(stack, "Market research", 6)
    pricing = await stack.fork(research.id, "Pricing deep dive", context="FORK_CONTEXT_INHERIT")
    summary = await stack.fork(research.id, "Summary for the board")
    questions = await stack.fork(summary.id, "Board questions")
    travel = await stack.root(label="Travel plans")
    old = await stack.root(label="Old experiment")
    await stack.gw.Archive(agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=old.id))
    turns = [(research, 6), (pricing, 2), (summary, 1), (questions, 3), (travel, 4), (old, 2)]
    await pool.executemany(
        "UPDATE sessions SET turn_count = $3 WHERE space_id = $1 AND id = $2",
        [(stack.space.id, uuid.UUID(s.id), count) for s, count in turns],
    )
    return research


async def no_horizontal_scroll(page: Page) -> None:
    """Nothing is wider than the window: the page never scrolls sideways."""
    widths = await page.evaluate(
        "() => [document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]"
    )
    assert max(widths[:2]) <= widths[2], f"page {widths[:2]} wider than the window {widths[2]}"


async def in_view(locator: Locator) -> None:
    """`locator` is shown and wholly inside the window (after any scroll the page did)."""
    await expect(locator).to_be_visible()
    await expect(locator).to_be_in_viewport(ratio=1)


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two bounding boxes share any area."""
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


async def box(locator: Locator) -> dict[str, float]:
    """The bounding box of a visible element."""
    found = await locator.bounding_box()
    assert found is not None, locator
    return {"x": found["x"], "y": found["y"], "width": found["width"], "height": found["height"]}


@pytest.fixture(params=["desktop", "phone"])
def screen(request: pytest.FixtureRequest) -> BrowserPage:
    """The page of the size under test: 1280x800, or a 390x844 touch phone."""
    name = "browser_page" if request.param == "desktop" else "phone_page"
    page: BrowserPage = request.getfixturevalue(name)
    return page


class TestScreens:
    async def test_the_three_screens_fit_and_show_what_matters(
        self,
        console: ConsoleStack,
        screen: BrowserPage,
        request: pytest.FixtureRequest,
        pool: asyncpg.Pool,
    ) -> None:
        """Forest, conversation, fork dialog and a search hit in a long unbroken link: no
        sideways scroll; the newest message, the composer and its fork action in view; the
        dialog inside the window."""
        size = request.node.callspec.params["screen"]
        page = screen.page
        research = await demo_forest(console.stack, pool)
        await open_console(console, screen)
        await expect(page.locator(".forest-count")).to_contain_text("6 sessions")
        node = page.locator(f'#forest .node[data-id="{research.id}"]')
        await in_view(node)
        for control in ("#refresh", "#new-root", "#forest-filter", "#goto-id"):
            await in_view(page.locator(control))
        await no_horizontal_scroll(page)
        await screen.shot(f"{size}-forest")

        await node.click()
        await expect(page.locator("#session-label")).to_have_text("Market research")
        newest = page.locator('#records li[data-seq="12"]')
        await in_view(newest)
        await in_view(page.locator("#message"))
        await in_view(newest.locator(".fork-here"))
        await no_horizontal_scroll(page)
        await screen.shot(f"{size}-conversation")

        if size == "phone":
            await newest.locator(".fork-here").tap()
        else:
            await newest.locator(".fork-here").click()
        dialog = page.locator("dialog[open]")
        await expect(page.locator("#fork-up-to")).to_have_value("12")
        for field in ("#fork-label", "#fork-context"):
            await in_view(page.locator(field))
        await in_view(dialog.get_by_role("button", name="Fork", exact=True))
        await no_horizontal_scroll(page)
        await screen.shot(f"{size}-fork-dialog")
        await page.keyboard.press("Escape")
        await expect(dialog).to_have_count(0)

        await page.locator("#search").fill("example")  # a hit in the long link
        await page.locator("#search").press("Enter")
        await expect(page.locator("#hits .hit")).to_have_count(1)
        sizes = await page.locator("#hits").evaluate("(el) => [el.scrollWidth, el.clientWidth]")
        assert sizes[0] <= sizes[1], f"a hit {sizes[0]} px wide in a list {sizes[1]} px wide"
        await no_horizontal_scroll(page)
        await screen.shot(f"{size}-search")

        if size == "phone":  # one column: the forest is a tap away
            await page.locator("#nav-forest").tap()
            await in_view(node)
        assert screen.console_errors() == []


async def focus_on(page: Page, target: Locator, key: str = "Tab") -> None:
    """Press `key` until `target` has the focus, checking every stop shows where it is."""
    for _ in range(MAX_TABS):
        await page.keyboard.press(key)
        state = await page.evaluate(
            """() => {
              const el = document.activeElement;
              const style = getComputedStyle(el);
              return {
                tag: el.tagName, id: el.id, text: (el.textContent || "").slice(0, 40),
                visible: el.matches(":focus-visible")
                  && (style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2
                      || style.boxShadow !== "none"),
              };
            }"""
        )
        assert state["visible"], f"the focus is not visible on {state}"
        if await target.evaluate("(el) => el === document.activeElement"):
            return
    raise AssertionError(f"{key} never reached {target}")


class TestKeyboard:
    async def test_a_fork_from_a_message_by_keyboard_alone(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Tab into the forest, arrows to a session, Enter opens it, Tab to record #3's "Fork
        here", Enter, type a label, Tab to Fork, Enter: the child holds records #1..#3."""
        page = browser_page.page
        await console.stack.root(label="Another root")
        source = await conversation(console.stack, "Keyboard source", 3)
        await open_console(console, browser_page)
        target = page.locator(f'#forest [role="treeitem"][data-id="{source.id}"]')
        await expect(target).to_be_visible()
        await focus_on(page, page.locator('#forest [role="treeitem"]').first)
        await focus_on(page, target, "ArrowDown")
        await page.keyboard.press("Enter")
        await expect(page.locator("#session-label")).to_have_text("Keyboard source")
        fork_here = page.locator('#records li[data-seq="3"] .fork-here')
        await focus_on(page, fork_here)
        await page.keyboard.press("Enter")
        label = page.locator("#fork-label")
        await expect(label).to_be_focused()
        await page.keyboard.press("Control+A")
        await page.keyboard.type("Forked by keys")
        await focus_on(page, page.locator("dialog").get_by_role("button", name="Fork", exact=True))
        await page.keyboard.press("Enter")
        await expect(page.locator("#session-label")).to_have_text("Forked by keys")
        await expect(page.locator("#records li[data-seq]")).to_have_count(3)
        children = (await console.stack.view(source.id)).node.children
        assert [r.content for r in await console.stack.records(children[0])][-1].startswith(
            "Question 2"
        )
        assert browser_page.console_errors() == []

    async def test_the_forest_is_a_tree_for_the_keyboard(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """One Tab stop; Left collapses a node, Right expands it, Right again enters it."""
        page = browser_page.page
        top = await console.stack.root(label="Top")
        child = await console.stack.fork(top.id, "Below")
        await open_console(console, browser_page)
        row = page.locator(f'#forest [role="treeitem"][data-id="{top.id}"]')
        await expect(row).to_have_attribute("aria-expanded", "true")
        await focus_on(page, row)
        await page.keyboard.press("ArrowLeft")
        await expect(row).to_have_attribute("aria-expanded", "false")
        await expect(page.locator(f'#forest [data-id="{child.id}"]')).to_have_count(0)
        await page.keyboard.press("ArrowRight")
        await page.keyboard.press("ArrowRight")
        below = page.locator(f'#forest [role="treeitem"][data-id="{child.id}"]')
        await expect(below).to_be_focused()
        assert await page.locator('#forest [tabindex="0"]').count() == 1
        assert browser_page.console_errors() == []

    async def test_a_digest_and_a_search_hit_open_by_keyboard(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Tab reaches a digest's row and a search hit (links), Enter opens each."""
        page = browser_page.page
        first = await console.stack.root(label="Digest by keys")
        second = await conversation(console.stack, "Hit by keys", 1)
        await open_console(console, browser_page, "#/digests")
        digest = page.locator(f'#digests tr[data-id="{first.id}"] a')
        await expect(digest).to_have_count(1)
        await page.locator("#digest-status").focus()
        await focus_on(page, digest)
        await page.keyboard.press("Enter")
        await expect(page.locator("#session-label")).to_have_text("Digest by keys")
        await page.locator("#search").fill("Question")
        await page.locator("#search").press("Enter")
        hit = page.locator(f'#hits .hit[data-session="{second.id}"] a')
        await expect(hit).to_have_count(1)
        await focus_on(page, hit)
        await page.keyboard.press("Enter")
        await expect(page.locator("#session-label")).to_have_text("Hit by keys")
        assert browser_page.console_errors() == []


SERIOUS = ("serious", "critical")


async def axe_violations(page: Page, axe: str) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    await page.evaluate(axe)  # through the debugger protocol: the page's CSP stays as it is
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + " | " + n.failureSummary),
          }));
        }"""
    )
    return [v for v in found if v["impact"] in SERIOUS]


class TestAccessibility:
    async def test_axe_finds_nothing_serious_on_the_three_screens(
        self, console: ConsoleStack, browser_page: BrowserPage, axe: str, pool: asyncpg.Pool
    ) -> None:
        """No serious or critical axe-core violation on the forest, a conversation, and the
        fork dialog."""
        page = browser_page.page
        research = await demo_forest(console.stack, pool)
        await open_console(console, browser_page)
        await expect(page.locator(".forest-count")).to_contain_text("6 sessions")
        found = {"forest": await axe_violations(page, axe)}
        await page.goto(f"{console.base}#/session/{research.id}")
        await expect(page.locator('#records li[data-seq="12"]')).to_be_visible()
        found["conversation"] = await axe_violations(page, axe)
        await page.locator('#records li[data-seq="4"] .fork-here').click()
        await expect(page.locator("#fork-label")).to_be_visible()
        found["fork dialog"] = await axe_violations(page, axe)
        report = [
            f"{where}: {v['id']} ({v['impact']}) {v['help']}: {v['nodes']}"
            for where, violations in found.items()
            for v in violations
        ]
        assert report == []
        assert browser_page.console_errors() == []

    async def test_axe_finds_nothing_serious_on_stop_and_sign_out(
        self, console: ConsoleStack, browser_page: BrowserPage, axe: str
    ) -> None:
        """No serious or critical axe-core violation while a reply streams (Stop shown), once
        it is stopped, and on the signed-out page with its sign-in field."""
        root = await console.stack.root(label="Chat")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        console.provider.release.clear()
        await page.locator("#message").fill("on and on")
        await page.locator("#send").click()
        await expect(page.locator("#streaming")).to_have_text(REPLY_HEAD)
        found = {"streaming": await axe_violations(page, axe)}
        await page.get_by_role("button", name="Stop").click()
        await expect(page.locator("#send-note")).to_be_visible()
        found["stopped"] = await axe_violations(page, axe)
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.locator("#sign-in-url")).to_be_visible()
        found["signed out"] = await axe_violations(page, axe)
        report = [
            f"{where}: {v['id']} ({v['impact']}) {v['help']}: {v['nodes']}"
            for where, violations in found.items()
            for v in violations
        ]
        assert report == []
        assert browser_page.console_errors() == []


class TestLayout:
    async def test_open_lineage_slots_overlap_nothing(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """An ancestor's memory and insight, both opened, overlap neither each other nor the
        session's title."""
        page = browser_page.page
        stack = console.stack
        root = await stack.root(label="Parent with notes")
        space = stack.space.sid
        long_note = "a note that runs on for a while " * 6
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=space, session_id=root.id, content=long_note)
        )
        await stack.gw.PutInsight(
            agent_pb2.PutInsightRequest(space_id=space, session_id=root.id, content=long_note)
        )
        child = await stack.fork(root.id, "Child")
        await open_console(console, browser_page, f"#/session/{child.id}")
        memory = page.locator("#lineage details.lineage-memory")
        insight = page.locator("#lineage details.lineage-insight")
        await memory.locator("summary").click()
        await insight.locator("summary").click()
        boxes = {
            "memory": await box(memory.locator("pre")),
            "insight": await box(insight.locator("pre")),
            "title": await box(page.locator("#session-head")),
        }
        await browser_page.shot("lineage-slots-open")
        assert not overlap(boxes["memory"], boxes["insight"]), boxes
        assert not overlap(boxes["memory"], boxes["title"]), boxes
        assert not overlap(boxes["insight"], boxes["title"]), boxes

    async def test_another_session_opens_at_its_top_not_the_old_scroll(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Scrolled down in one session, opening another shows its lineage and title in full,
        below the top bar."""
        page = browser_page.page
        first = await conversation(console.stack, "First long one", 20)
        second = await console.stack.fork(
            first.id, "Second long one", context="FORK_CONTEXT_INHERIT"
        )
        await open_console(console, browser_page, f"#/session/{first.id}")
        await expect(page.locator('#records li[data-seq="40"]')).to_be_visible()
        await page.evaluate(
            "() => document.querySelectorAll('#detail, #detail *').forEach((el) => {"
            " el.scrollTop = el.scrollHeight / 2; })"
        )
        await page.locator(f'#forest .node[data-id="{second.id}"]').click()
        await expect(page.locator("#session-label")).to_have_text("Second long one")
        bar = await box(page.locator("#bar"))
        for part in ("#lineage-nav", "#session-head"):
            await in_view(page.locator(part))
            assert (await box(page.locator(part)))["y"] >= bar["y"] + bar["height"], part

    async def test_a_conversation_opens_at_its_newest_record(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A 40-record session opens with record #40 and the composer in view."""
        page = browser_page.page
        session = await conversation(console.stack, "Long chat", 20)
        await open_console(console, browser_page, f"#/session/{session.id}")
        await in_view(page.locator('#records li[data-seq="40"]'))
        await in_view(page.locator("#message"))
        await in_view(page.locator("#session-head"))

    async def test_a_compress_summary_is_shown_once(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A COMPRESS fork's summary (its system prompt) appears once in the view."""
        page = browser_page.page
        source = await conversation(console.stack, "To compress", 2)
        child = await console.stack.fork(source.id, "Compressed", context="FORK_CONTEXT_COMPRESS")
        summary = (await console.stack.view(child.id)).system_prompt
        assert "summary of" in summary
        await open_console(console, browser_page, f"#/session/{child.id}")
        await expect(page.locator("#system-prompt")).to_contain_text("summary of")
        await page.locator("summary", has_text="Config").click()
        await expect(page.locator("#config")).to_be_visible()
        shown = await page.locator("article.session").inner_text()
        assert shown.count("summary of") == 1, shown
        await browser_page.shot("compress-config")

    async def test_the_bar_names_the_space(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The top bar shows the space's name (its id on hover), not its UUID."""
        page = browser_page.page
        who = await console.stack.gw.WhoAmI(agent_pb2.WhoAmIRequest())
        name = next(s.name for s in who.spaces if s.id == console.stack.space.sid)
        await open_console(console, browser_page)
        await expect(page.locator("#space")).to_have_text(name)
        await expect(page.locator("#space")).to_have_attribute("title", console.stack.space.sid)


async def lines_of(ids: Locator) -> list[int]:
    """How many lines each element of `ids` takes (its inline boxes' count)."""
    counts: list[int] = await ids.evaluate_all("(all) => all.map((e) => e.getClientRects().length)")
    return counts


class TestShortIds:
    async def test_a_short_id_stays_on_one_line_on_a_phone(
        self, console: ConsoleStack, phone_page: BrowserPage
    ) -> None:
        """The first digits of an id never break over two lines on a phone: the digests' Id
        column broke each over four (`code`'s overflow-wrap: anywhere let the table shrink it
        to two digits a line). A search hit's and "Go to id"'s candidates keep theirs whole
        too, wherever labels of every length from 20 to 59 characters put them on a line."""
        stack = console.stack
        ids = []
        for n in range(20, 60):
            root = await stack.root(label="L" * n)
            await stack.append(root.id, record("user", "needle"))
            ids.append(root.id)
        # 40 ids, 16 first digits: some digit starts two of them or more.
        digit = max("0123456789abcdef", key=lambda d: sum(i.startswith(d) for i in ids))
        page = phone_page.page
        await open_console(console, phone_page, "#/digests")
        await expect(page.locator("#digests tr[data-id]")).to_have_count(40)
        assert set(await lines_of(page.locator("#digests tr[data-id] td code"))) == {1}
        await page.goto(f"{console.base}#/search/needle")
        await expect(page.locator("#hits .hit")).to_have_count(20)
        assert set(await lines_of(page.locator("#hits .hit code"))) == {1}
        await page.goto(f"{console.base}#/")
        await page.locator("#goto-id").fill(digit)
        await page.locator("#goto-go").click()
        found = page.locator("#goto-found li code")
        await expect(found).to_have_count(sum(i.startswith(digit) for i in ids))
        assert set(await lines_of(found)) == {1}
        await phone_page.shot("phone-short-ids")
        assert phone_page.console_errors() == []

    async def test_a_sessions_whole_id_is_not_split_on_a_phone(
        self, console: ConsoleStack, phone_page: BrowserPage
    ) -> None:
        """The session's id in its meta line (after "0 turns · created ... · last active
        ...") was split over two lines on a phone where it met the line's end
        ("0de6230d-91bc-4aed-b852-" over "d0bec42a6bbc"): it fits a line of its own, so it
        goes there whole."""
        root = await console.stack.root(label="Whole id")
        page = phone_page.page
        await open_console(console, phone_page, f"#/session/{root.id}")
        code = page.locator("#session-meta code")
        await expect(code).to_have_text(root.id)
        assert await text_lines(code) == 1

    async def test_go_to_ids_candidates_fit_the_forest_pane_on_a_phone(
        self, console: ConsoleStack, phone_page: BrowserPage
    ) -> None:
        """ "Go to id" listing several candidates on a phone: a label with no space in it ran
        past the window's edge, cut off, and the filter box beside the list grew as tall as
        it; now every candidate stays inside the window and the filter keeps its height."""
        ids = [(await console.stack.root(label="path/" + "x" * 80)).id for _ in range(17)]
        # 17 ids, 16 first digits: some digit starts two of them or more.
        digit = max("0123456789abcdef", key=lambda d: sum(i.startswith(d) for i in ids))
        page = phone_page.page
        await open_console(console, phone_page)
        alone = await filter_height(page)
        await page.locator("#goto-id").fill(digit)
        await page.locator("#goto-go").click()
        found = page.locator("#goto-found li")
        await expect(found).to_have_count(sum(i.startswith(digit) for i in ids))
        width = await page.evaluate("() => document.documentElement.clientWidth")
        rights = await found.evaluate_all(
            "(all) => all.map((e) => Math.max(...[...e.querySelectorAll('*')].map("
            "(c) => c.getBoundingClientRect().right)))"
        )
        assert max(rights) <= width
        assert await filter_height(page) == alone
        await phone_page.shot("phone-go-to-candidates")
        assert phone_page.console_errors() == []


async def filter_height(page: Page) -> float:
    """The forest filter box's height, in CSS pixels."""
    height: float = await page.locator("#forest-filter").evaluate(
        "(e) => e.getBoundingClientRect().height"
    )
    return height


async def text_lines(element: Locator) -> int:
    """How many lines the text of `element` takes (its text's line boxes, by their tops)."""
    lines: int = await element.evaluate(
        """(e) => {
          const range = document.createRange();
          range.selectNodeContents(e);
          return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        }"""
    )
    return lines
