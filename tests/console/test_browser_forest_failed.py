"""A forest that cannot be loaded (GetTree's TREE_TOO_LARGE) in a real headless Chromium: the
page says so, and a session still opens by its link, its lineage and records included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import asyncpg
import pytest
from playwright.async_api import expect

from storage_service.app import create_app as storage_app
from tests.console.conftest import BrowserPage, ConsoleStack
from tests.console.test_browser import open_console
from tests.gateway.conftest import STACK_TTL_S, Backends
from tests.support.fixtures import ServerStarter
from tests.tree.seed import chain, seed_topology
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

pytestmark = pytest.mark.browser

MAX_TREE_NODES = 3


@pytest.fixture(name="backends")
async def _small_tree_backends(start_server: ServerStarter) -> AsyncIterator[Backends]:
    """Storage and a tree whose GetTree answers at most MAX_TREE_NODES nodes."""
    tree_config = TreeSettings(provisioning_ttl_s=STACK_TTL_S, max_tree_nodes=MAX_TREE_NODES)
    storage = await start_server(storage_app)
    tree = await start_server(partial(tree_app, config=tree_config))
    yield Backends(storage, tree, tree_config)


class TestForestTooLarge:
    async def test_a_deep_link_opens_its_session_though_the_forest_failed(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """Five sessions over a cap of three: the forest pane and the error banner say the
        forest failed (TREE_TOO_LARGE: "more than 3 nodes"), and the link of the deepest
        session shows its label and its four ancestors (from GetLineage, not the forest)."""
        page = browser_page.page
        space = console.stack.space
        ids = await seed_topology(pool, space.id, chain(5))
        await open_console(console, browser_page, f"#/session/{ids[4]}")
        await expect(page.locator("#error-text")).to_contain_text("the tree has more than 3 nodes")
        await expect(page.locator(".forest-count")).to_contain_text(
            "The forest could not be loaded"
        )
        await expect(page.locator("#session-label")).to_have_text("n4")
        ancestors = page.locator("#lineage li.ancestor a")
        await expect(ancestors).to_have_text(["n0", "n1", "n2", "n3"])
        await ancestors.nth(1).click()
        await expect(page.locator("#session-label")).to_have_text("n1")
        # Another view is no reason to hide the forest's failure: the forest is still not there.
        await expect(page.locator("#error-text")).to_contain_text("the tree has more than 3 nodes")
        await browser_page.shot("forest-too-large")
