"""Live updates in a real headless Chromium: another client's changes appear without a reload.

The page follows WatchSpace through the console's relay; each change shows within
LIVE_TIMEOUT_MS (a second on a quiet machine; the bound is generous for a loaded one).
Requests are counted to show that a change refetches what it names, never the forest.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from playwright.async_api import Page, expect

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from storage_service.app import create_purger
from storage_service.config import StorageSettings
from tests.console.conftest import REPLY_HEAD, BrowserPage, ConsoleStack, GatewayRestart
from tests.console.test_browser import open_console
from tests.gateway.conftest import Backends, FakeSummarizer, close_stack, open_stack, record
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.browser

LIVE_TIMEOUT_MS = 5_000


def requests_of(page: Page) -> list[str]:
    """Every URL the page requests from now on."""
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    return urls


def forest_loads(urls: list[str]) -> int:
    """How many times the page read the whole forest."""
    return sum("/api/tree" in url for url in urls)


async def open_live(console: ConsoleStack, browser: BrowserPage, fragment: str = "") -> None:
    """Open the console at `fragment` and wait until its live stream runs."""
    await open_console(console, browser, fragment)
    await expect(browser.page.locator("#live")).to_have_attribute("data-state", "live")


async def send(console: ConsoleStack, session_id: str, content: str) -> None:
    """A turn by another client (through the gateway, not the page)."""
    await console.stack.gw.Send(
        agent_pb2.SendRequest(
            space_id=console.stack.space.sid, session_id=session_id, content=content
        )
    )


class TestAnotherClient:
    async def test_a_fork_a_send_and_an_archive_appear_without_reload(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Another client's fork joins the forest, its turn joins the open session, its
        archive dims the node: without a reload, and without reading the forest again."""
        stack = console.stack
        root = await stack.root(label="Shared")
        page = browser_page.page
        urls = requests_of(page)
        await open_live(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#session-label")).to_have_text("Shared")
        await page.evaluate("() => { window.notReloaded = true; }")
        child = await stack.fork(root.id, "Their fork")
        fork = page.locator(f'#forest .node[data-id="{child.id}"]')
        await expect(fork).to_be_visible(timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator(".forest-count")).to_have_text("2 sessions in 1 tree")
        await send(console, root.id, "from elsewhere")
        reply = page.locator('#records li.role-assistant[data-seq="2"] .content')
        await expect(reply).to_have_text(
            f"{REPLY_HEAD}reply to: from elsewhere", timeout=LIVE_TIMEOUT_MS
        )
        await expect(page.locator('#records li[data-seq="1"] .content')).to_have_text(
            "from elsewhere"
        )
        root_turns = page.locator(f'#forest .node[data-id="{root.id}"] .turns')
        await expect(root_turns).to_have_text("1 turn", timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator("#session-meta")).to_contain_text("1 turn ·")
        await stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=child.id)
        )
        await expect(fork).to_have_class("node archived", timeout=LIVE_TIMEOUT_MS)
        await browser_page.shot("live-another-client")
        assert await page.evaluate("() => window.notReloaded") is True
        assert await page.locator("#records li[data-seq]").count() == 2
        assert forest_loads(urls) == 1
        assert browser_page.console_errors() == []

    async def test_renames_slots_config_and_deletes_update_the_page(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Labels, system prompt, insight, memory and config follow other clients (an edit in
        progress stays); a deleted child leaves the forest, a deleted open session says so."""
        stack = console.stack
        sid = stack.space.sid
        root = await stack.root(label="Before")
        child = await stack.fork(root.id, "Child before")
        page = browser_page.page
        await open_live(console, browser_page, f"#/session/{root.id}")
        await stack.tree.UpdateLabel(
            tree_pb2.UpdateLabelRequest(space_id=sid, session_id=root.id, label="After")
        )
        await stack.tree.UpdateLabel(
            tree_pb2.UpdateLabelRequest(space_id=sid, session_id=child.id, label="Child after")
        )
        await expect(page.locator("#session-label")).to_have_text("After", timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator(f'#forest .node[data-id="{child.id}"] .label')).to_have_text(
            "Child after", timeout=LIVE_TIMEOUT_MS
        )
        await page.locator("details:has(#memory-text) summary").click()
        await page.locator("#memory-text").fill("my unsaved note")
        await stack.storage.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(space_id=sid, session_id=root.id, content="New.")
        )
        await stack.gw.PutInsight(
            agent_pb2.PutInsightRequest(space_id=sid, session_id=root.id, content="their hint")
        )
        await stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(space_id=sid, session_id=root.id, content="their memory")
        )
        config = common_pb2.SessionConfig(system_prompt="Configured.")
        await stack.tree.PutConfig(
            tree_pb2.PutConfigRequest(space_id=sid, session_id=root.id, config=config)
        )
        await expect(page.locator("#system-prompt")).to_have_text("New.", timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator("#insight-text")).to_have_value(
            "their hint", timeout=LIVE_TIMEOUT_MS
        )
        await expect(page.locator("#config")).to_contain_text(
            "Configured.", timeout=LIVE_TIMEOUT_MS
        )
        await expect(page.locator("#memory-text")).to_have_value("my unsaved note")
        await browser_page.shot("live-slots")
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=sid, session_id=child.id)
        )
        await expect(page.locator(f'#forest .node[data-id="{child.id}"]')).to_have_count(
            0, timeout=LIVE_TIMEOUT_MS
        )
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=sid, session_id=root.id)
        )
        await expect(page.locator("#view-gone")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator(".forest-count")).to_have_text("No sessions yet: create a root.")
        assert browser_page.console_errors() == []

    async def test_a_deletion_elsewhere_closes_the_sessions_dialogs(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Another client deletes the session while its delete, rename or fork dialog is open:
        the dialog closes and the view says once that the session was deleted (the delete
        dialog stayed over it; Rename then said NOT_FOUND in its dialog)."""
        stack = console.stack
        page = browser_page.page
        await open_console(console, browser_page)
        for button in ("Delete…", "Rename…", "Fork…"):
            root = await stack.root(label=f"Doomed by {button}")
            await page.goto(f"{console.base}#/session/{root.id}")
            await expect(page.locator("#session-label")).to_have_text(f"Doomed by {button}")
            await page.get_by_role("button", name=button).click()
            await expect(page.locator("dialog[open]")).to_be_visible()
            await stack.gw.DeleteSession(
                agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=root.id)
            )
            await expect(page.locator("#view-gone")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
            await expect(page.locator("dialog")).to_have_count(0)
            await expect(page.get_by_text("This session was deleted")).to_have_count(1)
            await expect(page.locator("#error")).to_be_hidden()
        assert browser_page.console_errors() == []


class TestTenancy:
    async def test_another_spaces_changes_never_reach_the_page(
        self,
        key_console: ConsoleStack,
        browser_page: BrowserPage,
        backends: Backends,
        other_space: TestSpace,
        summarizer: FakeSummarizer,
    ) -> None:
        """A page signed in to one space: another space's new sessions are neither shown nor
        asked for, while this space's own appear."""
        space = key_console.stack.space
        page = browser_page.page
        urls = requests_of(page)
        await page.goto(key_console.base)
        await page.locator("#sign-in-key").fill(space.key)
        await page.locator("#sign-in-space").fill(space.sid)
        await page.locator("#sign-in").click()
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        other = await open_stack(backends, key_console.stack.gateway, other_space, summarizer)
        try:
            theirs = [await other.root(label=f"theirs {n}") for n in range(3)]
        finally:
            await close_stack(other)
        mine = await key_console.stack.root(label="mine")
        await expect(page.locator(f'#forest .node[data-id="{mine.id}"]')).to_be_visible(
            timeout=LIVE_TIMEOUT_MS
        )
        await expect(page.locator(".forest-count")).to_have_text("1 session in 1 tree")
        assert not [url for url in urls if any(t.id in url for t in theirs)]
        assert browser_page.console_errors() == []


class TestResume:
    async def test_a_gateway_restart_loses_and_repeats_nothing(
        self, console: ConsoleStack, gateway_restart: GatewayRestart, browser_page: BrowserPage
    ) -> None:
        """The gateway stops and comes back: the page resumes from its cursor, showing what
        changed meanwhile once, without reading the forest again."""
        stack = console.stack
        root = await stack.root(label="Steady")
        await stack.append(root.id, record("user", "first"))
        page = browser_page.page
        urls = requests_of(page)
        await open_live(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#records li[data-seq]")).to_have_count(1)
        await gateway_restart.stop()
        await expect(page.locator("#live")).to_have_attribute("data-state", "reconnecting")
        await stack.append(root.id, record("user", "while down"), record("assistant", "still"))
        await gateway_restart.start()
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        await expect(page.locator('#records li[data-seq="3"] .content')).to_have_text("still")
        child = await stack.fork(root.id, "After the restart")
        await expect(page.locator(f'#forest .node[data-id="{child.id}"]')).to_be_visible(
            timeout=LIVE_TIMEOUT_MS
        )
        await stack.append(root.id, record("user", "later"))
        await expect(page.locator('#records li[data-seq="4"]')).to_be_visible(
            timeout=LIVE_TIMEOUT_MS
        )
        seqs = await page.locator("#records li[data-seq]").evaluate_all(
            "(items) => items.map((item) => Number(item.dataset.seq))"
        )
        assert seqs == [1, 2, 3, 4]
        assert forest_loads(urls) == 1
        assert browser_page.console_errors() == []

    async def test_an_expired_cursor_reloads_the_view_and_resumes_from_now(
        self,
        console: ConsoleStack,
        gateway_restart: GatewayRestart,
        browser_page: BrowserPage,
        pool: asyncpg.Pool,
    ) -> None:
        """Changes purged while the page was away: it reloads the forest and the view (they
        show), then follows new changes live again."""
        stack = console.stack
        root = await stack.root(label="Old name")
        page = browser_page.page
        urls = requests_of(page)
        await open_live(console, browser_page, f"#/session/{root.id}")
        # The view's reads answered first: live is up before they are, and a read the stop
        # cuts off is a 503 the page reports (not what this test is about).
        await expect(page.locator("#records .empty")).to_be_visible()
        await gateway_restart.stop()
        await expect(page.locator("#live")).to_have_attribute("data-state", "reconnecting")
        await stack.append(root.id, record("user", "missed"))
        await stack.tree.UpdateLabel(
            tree_pb2.UpdateLabelRequest(
                space_id=stack.space.sid, session_id=root.id, label="New name"
            )
        )
        await asyncio.sleep(0.05)
        await create_purger(pool, StorageSettings(event_retention_s=0.01)).run_once()
        await gateway_restart.start()
        await expect(page.locator("#session-label")).to_have_text("New name")
        await expect(page.locator('#records li[data-seq="1"] .content')).to_have_text("missed")
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        assert forest_loads(urls) == 2  # the first load, and the one after the cursor expired
        child = await stack.fork(root.id, "Live again")
        await expect(page.locator(f'#forest .node[data-id="{child.id}"]')).to_be_visible(
            timeout=LIVE_TIMEOUT_MS
        )
        assert browser_page.console_errors() == []

    async def test_what_failed_while_the_gateway_was_down_loads_again(
        self, console: ConsoleStack, gateway_restart: GatewayRestart, browser_page: BrowserPage
    ) -> None:
        """A Refresh while the gateway is down fails (the forest, the open view, a banner);
        once the stream is back, both load again and the banner goes, without a Refresh."""
        stack = console.stack
        root = await stack.root(label="Back again")
        page = browser_page.page
        await open_live(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#records .empty")).to_be_visible()
        await gateway_restart.stop()
        await expect(page.locator("#live")).to_have_attribute("data-state", "reconnecting")
        await page.get_by_role("button", name="Refresh").click()
        await expect(page.locator("#view-error")).to_contain_text("not answering")
        await expect(page.locator(".forest-count")).to_contain_text("could not be loaded")
        await expect(page.locator("#error")).to_be_visible()
        await gateway_restart.start()
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        await expect(page.locator("#session-label")).to_have_text("Back again")
        await expect(page.locator(".forest-count")).to_have_text("1 session in 1 tree")
        await expect(page.locator("#error")).to_be_hidden()
        assert browser_page.console_errors("Failed to load resource.*503") == []
