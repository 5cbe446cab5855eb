"""The session view's lineage in a real headless Chromium, read from GetLineage page by page.

The chains are seeded straight into the database after the page loaded its forest (a
COPY writes no space event), so the forest holds none of them: whatever the lineage
shows came from the lineage endpoint, as for a deep link into a forest not expanded
that far.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from playwright.async_api import expect

from stello.agent.v1 import agent_pb2
from stello.tree.v1 import tree_pb2
from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import XSS, open_console
from tests.tree.seed import chain, seed_topology

pytestmark = pytest.mark.browser

LIVE_TIMEOUT_MS = 5_000
EMPTY_FOREST = "No sessions yet: create a root."


async def put_slots(
    pool: asyncpg.Pool, space_id: uuid.UUID, *slots: tuple[uuid.UUID, str | None, str | None]
) -> None:
    """(session, memory, insight) rows straight into storage, as the gateway tests seed them."""
    rows = [(space_id, session, memory, insight) for session, memory, insight in slots]
    async with pool.acquire() as con:
        await con.copy_records_to_table(
            "session_slots", records=rows, columns=["space_id", "session_id", "memory", "insight"]
        )


class TestLineage:
    async def test_a_deep_link_shows_every_ancestor_the_forest_never_loaded(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """A depth-4 session opened by its link: n0 > n1 > n2 > n3 > itself, root first, with
        turn counts and slots (markup as text, collapsed); an ancestor's archive and rename by
        another client redraw it."""
        page = browser_page.page
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await open_console(console, browser_page)
        await expect(page.locator(".forest-count")).to_have_text(EMPTY_FOREST)
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        space = console.stack.space
        ids = await seed_topology(pool, space.id, chain(5))
        await put_slots(pool, space.id, (ids[1], XSS, None), (ids[2], None, "look further up"))
        await page.goto(f"{console.base}#/session/{ids[4]}")
        await expect(page.locator("#session-label")).to_have_text("n4")
        ancestors = page.locator("#lineage li.ancestor")
        await expect(ancestors.locator("a")).to_have_text(["n0", "n1", "n2", "n3"])
        assert [await a.get_attribute("href") for a in await ancestors.locator("a").all()] == [
            f"#/session/{i}" for i in ids[:4]
        ]
        await expect(page.locator("#lineage .lineage-self")).to_have_text("n4")
        await expect(ancestors.locator(".turns")).to_have_text(["0 turns"] * 4)
        await expect(page.locator(".forest-count")).to_have_text(EMPTY_FOREST)
        await expect(page.locator("#lineage-more")).to_have_count(0)
        memory = ancestors.nth(1).locator("details.lineage-memory")
        await expect(memory).not_to_have_attribute("open", "")
        await memory.locator("summary").click()
        await expect(memory.locator("pre")).to_have_text(XSS)
        await expect(ancestors.nth(2).locator("details.lineage-insight pre")).to_have_text(
            "look further up"
        )
        await expect(ancestors.locator("details")).to_have_count(2)
        assert await page.locator("img").count() == 0
        await browser_page.shot("session-lineage")

        await console.stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=space.sid, session_id=str(ids[2]))
        )
        await console.stack.tree.UpdateLabel(
            tree_pb2.UpdateLabelRequest(space_id=space.sid, session_id=str(ids[1]), label="one")
        )
        await expect(ancestors.locator("a")).to_have_text(
            ["n0", "one", "n2", "n3"], timeout=LIVE_TIMEOUT_MS
        )
        archived = ancestors.nth(2)
        await expect(archived).to_have_class("ancestor archived", timeout=LIVE_TIMEOUT_MS)
        await expect(archived.locator("a")).to_have_css("color", "rgb(91, 98, 117)")  # dimmed
        await expect(archived.locator(".badge")).to_have_text("archived")
        await expect(ancestors.nth(1)).to_have_class("ancestor")
        assert dialogs == []
        assert browser_page.console_errors() == []

    async def test_a_long_chain_shows_a_page_then_the_rest_on_request(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """23 ancestors: the nearest 20 (n3..n22) and "3 more ancestors"; the button reads the
        next page; two bounded requests in all."""
        page = browser_page.page
        await open_console(console, browser_page)
        # The forest is loaded (empty) and live before the chain is seeded behind its back.
        await expect(page.locator(".forest-count")).to_have_text(EMPTY_FOREST)
        await expect(page.locator("#live")).to_have_attribute("data-state", "live")
        ids = await seed_topology(pool, console.stack.space.id, chain(24))
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if "/lineage" in r.url else None)
        await page.goto(f"{console.base}#/session/{ids[-1]}")
        links = page.locator("#lineage li.ancestor a")
        await expect(links).to_have_text([f"n{n}" for n in range(3, 23)])
        more = page.locator("#lineage-more")
        await expect(more).to_have_text("3 more ancestors…")
        await more.click()
        await expect(links).to_have_text([f"n{n}" for n in range(23)])
        await expect(more).to_have_count(0)
        await expect(page.locator(".forest-count")).to_have_text(EMPTY_FOREST)
        assert len(asked) == 2
        assert all("page_size=20" in url for url in asked)
        assert "page_token=" not in asked[0] and "page_token=" in asked[1]
        assert browser_page.console_errors() == []

    async def test_a_root_says_so(self, console: ConsoleStack, browser_page: BrowserPage) -> None:
        """A root has no ancestors: the nav says "Root session" and lists nothing."""
        root = await console.stack.root(label="Alone")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#session-label")).to_have_text("Alone")
        await expect(page.locator("#lineage-nav")).to_have_text("Root session")
        await expect(page.locator("#lineage")).to_have_count(0)
        assert browser_page.console_errors() == []
