"""The console in a real headless Chromium: forest, send, fork, archive, injection, refusals.

Each test writes a screenshot of the view it reached to the artefacts folder
(`conftest.artefacts()`, never committed).
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from playwright.async_api import expect

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.console.conftest import REPLY_HEAD, BrowserPage, ConsoleStack, seeded_forest
from tests.gateway.conftest import record
from tests.tree.seed import chain, seed_topology

# Not `sql`: the page is what these test; the SQL under it runs in the API tests on both
# PostgreSQL versions.
pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert(1)>"


async def open_console(console: ConsoleStack, browser: BrowserPage, fragment: str = "") -> None:
    """Open the printed URL (token exchanged for the cookie), then go to `fragment`."""
    await browser.page.goto(console.console.url)
    await expect(browser.page.locator("#forest")).to_be_visible()
    if fragment:
        await browser.page.goto(console.base + fragment)


class TestForest:
    async def test_a_thousand_sessions_load_as_a_virtual_list(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """1,000 seeded sessions in 20 trees: counted, drawn as a few rows, the last reachable."""
        await seed_topology(pool, console.stack.space.id, seeded_forest(20, 50))
        tree = await console.stack.gw.GetTree(
            agent_pb2.GetTreeRequest(space_id=console.stack.space.sid)
        )
        page = browser_page.page
        await open_console(console, browser_page)
        await expect(page.locator(".forest-count")).to_have_text("1000 sessions in 20 trees")
        rows = await page.locator("#forest .node").count()
        assert 10 < rows < 100, rows
        await page.locator("#forest").evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
        last = tree.nodes[-1].id  # the end of the pre-order
        await expect(page.locator(f'#forest .node[data-id="{last}"]')).to_be_visible()
        await browser_page.shot("forest")
        assert browser_page.console_errors() == []

    @pytest.mark.slow
    async def test_ten_thousand_sessions_stay_a_few_rows(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """10,000 sessions: the document holds only the rows in view, wherever it scrolls."""
        await seed_topology(pool, console.stack.space.id, seeded_forest(100, 100))
        tree = await console.stack.gw.GetTree(
            agent_pb2.GetTreeRequest(space_id=console.stack.space.sid)
        )
        page = browser_page.page
        await open_console(console, browser_page)
        await expect(page.locator(".forest-count")).to_have_text("10000 sessions in 100 trees")
        forest = page.locator("#forest")
        for fraction in (0.5, 1.0):
            await forest.evaluate("(el, f) => { el.scrollTop = el.scrollHeight * f; }", fraction)
            assert await page.locator("#forest .node").count() < 100
        last = page.locator(f'#forest .node[data-id="{tree.nodes[-1].id}"]')
        await last.click()
        await expect(page.locator("#session-label")).to_have_text(tree.nodes[-1].label)
        assert browser_page.console_errors() == []

    async def test_a_deep_chain_keeps_every_label_in_the_pane(
        self,
        console: ConsoleStack,
        browser_page: BrowserPage,
        phone_page: BrowserPage,
        pool: asyncpg.Pool,
    ) -> None:
        """A chain 40 deep, at 1280x800 and on a phone: every row's label and turn count are
        inside the forest pane (the indent stops; deep rows show their depth), the deepest
        row (n39) among them."""
        ids = await seed_topology(pool, console.stack.space.id, chain(40))
        for opened in (browser_page, phone_page):
            await open_console(console, opened)
            await expect(opened.page.locator(".forest-count")).to_contain_text("40 sessions")
            assert await rows_fit_the_pane(opened) == []
            deepest = opened.page.locator(f'#forest .node[data-id="{ids[39]}"]')
            await expect(deepest.locator(".label")).to_have_text("n39")
            await expect(deepest.locator(".depth")).to_have_text("39")
        await browser_page.shot("forest-deep-chain")

    async def test_a_node_collapses_and_expands(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The toggle hides a node's subtree and shows it again."""
        root = await console.stack.root(label="Top")
        child = await console.stack.fork(root.id, "Below")
        page = browser_page.page
        await open_console(console, browser_page)
        below = page.locator(f'#forest .node[data-id="{child.id}"]')
        await expect(below).to_be_visible()
        toggle = page.locator(f'#forest .node[data-id="{root.id}"] .toggle')
        await toggle.click()
        await expect(below).to_have_count(0)
        await toggle.click()
        await expect(below).to_be_visible()
        assert browser_page.console_errors() == []


async def rows_fit_the_pane(browser: BrowserPage) -> list[str]:
    """Every drawn forest row whose label (whole: the test's labels are short) or turn count
    is not within the forest pane, described; the forest scrolled to its end first."""
    page = browser.page
    await page.locator(".forest-scroll").evaluate("box => box.scrollTop = box.scrollHeight")
    await page.wait_for_timeout(100)
    bad: list[str] = await page.locator("#forest-pane").evaluate(
        """pane => {
          const edge = pane.getBoundingClientRect();
          const bad = [];
          for (const row of pane.querySelectorAll(".node")) {
            const text = row.querySelector(".label");
            const label = text.getBoundingClientRect();
            const turns = row.querySelector(".turns").getBoundingClientRect();
            const cut = text.scrollWidth > text.clientWidth;
            if (cut || label.left < edge.left || label.right > edge.right
                || turns.right > edge.right) {
              bad.push(`${row.querySelector(".label").textContent}: label ${label.left}..`
                + `${label.right}, turns ..${turns.right}, pane ${edge.left}..${edge.right}`);
            }
          }
          return bad;
        }"""
    )
    return bad


class TestSession:
    async def test_a_send_streams_its_reply_into_the_page(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The reply's first words show while the model still writes; then the turn is stored."""
        root = await console.stack.root(label="Chat")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        console.provider.release.clear()
        await page.locator("#message").fill("hello there")
        await page.locator("#send").click()
        await expect(page.locator("#streaming")).to_have_text(REPLY_HEAD)
        assert await console.stack.records(root.id) == []  # nothing stored mid-stream
        console.provider.release.set()
        stored = page.locator('#records li.role-assistant[data-seq="2"] .content')
        await expect(stored).to_have_text(f"{REPLY_HEAD}reply to: hello there")
        await expect(page.locator('#records li.role-user[data-seq="1"] .content')).to_have_text(
            "hello there"
        )
        await expect(page.locator(f'#forest .node[data-id="{root.id}"] .turns')).to_have_text(
            "1 turn"
        )
        await expect(page.locator("#session-meta")).to_contain_text("1 turn ·")
        await browser_page.shot("session-sent")
        assert [r.content for r in await console.stack.records(root.id)] == [
            "hello there",
            f"{REPLY_HEAD}reply to: hello there",
        ]
        assert browser_page.console_errors() == []

    async def test_metadata_shows_as_text_and_follows_changes(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The session view shows its metadata as text (markup included) and re-reads it when
        UpdateSessionMetadata changes it."""
        root = await console.stack.root(label="Tagged", metadata={"owner": "<b>alice</b>"})
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        line = page.locator("#session-metadata")
        await expect(line).to_have_text("owner=<b>alice</b>")
        await expect(line.locator("b")).to_have_count(0)
        await console.stack.gw.UpdateSessionMetadata(
            agent_pb2.UpdateSessionMetadataRequest(
                space_id=console.stack.space.sid, session_id=root.id, set={"ticket": "T-1"}
            )
        )
        await expect(line).to_have_text("owner=<b>alice</b> ticket=T-1")
        assert browser_page.console_errors() == []

    async def test_fork_from_the_third_record_keeps_the_first_three(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """ "Fork here" on record #3 makes a child whose records are #1..#3, shown as opened;
        the label it proposes fits the gateway's 200 characters (a source's label as long as
        that is cut: "LABEL… fork" was 205 characters, refused); a refused fork says why in
        the dialog, which stays open with what was typed."""
        label = "Source " + "s" * 193  # 200 characters, the most a label has
        root = await console.stack.root(label=label)
        await console.stack.append(
            root.id,
            *(record(role, f"message {n}") for n, role in enumerate(["user", "assistant"] * 3, 1)),
        )
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        third = page.locator('#records li[data-seq="3"]')
        await third.hover()
        await third.locator(".fork-here").click()
        await expect(page.locator("#fork-up-to")).to_have_value("3")
        proposed = f"{label[:194]}… fork"
        await expect(page.locator("#fork-label")).to_have_value(proposed)
        await page.locator("#fork-up-to").fill("99")  # past the last record: refused
        await page.locator("#fork-system-prompt").fill("Kept through a refusal")
        await page.get_by_role("button", name="Fork", exact=True).click()
        await expect(page.locator("dialog[open] [role=alert]")).to_contain_text(
            "OUT_OF_RANGE: inherit_until_seq"
        )
        await expect(page.locator("#fork-system-prompt")).to_have_value("Kept through a refusal")
        await page.locator("#fork-up-to").fill("3")
        await browser_page.shot("fork-dialog")
        await page.get_by_role("button", name="Fork", exact=True).click()
        await expect(page.locator("#session-label")).to_have_text(proposed)
        await expect(page.locator("#records li[data-seq]")).to_have_count(3)
        await expect(page.locator("#lineage")).to_contain_text("Source")
        children = (await console.stack.view(root.id)).node.children
        assert len(children) == 1
        assert [r.content for r in await console.stack.records(children[0])] == [
            "message 1",
            "message 2",
            "message 3",
        ]
        await browser_page.shot("forest-session")
        assert browser_page.console_errors(r"Failed to load resource.*400") == []  # the refusal

    async def test_fork_here_on_an_open_tool_call_says_where_the_fork_ends(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """ "Fork here" on an assistant record whose tool call is answered after it: the
        gateway leaves a tool call open at the cut out, so the dialog offers the records up to
        the one before it and says why, and the child has exactly those (the dialog offered
        "up to #2" and the child silently ended at #1); at the answer, nothing is left out."""
        root = await console.stack.root(label="Tools")
        call = common_pb2.ToolCall(id="call_1", name="lookup", arguments_json="{}")
        await console.stack.append(
            root.id,
            record("user", "look it up"),
            record("assistant", "", tool_calls=[call]),
            record("tool", "found", tool_call_id="call_1"),
            record("assistant", "it is found"),
        )
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await page.locator('#records li[data-seq="3"] .fork-here').click()
        await expect(page.locator("#fork-up-to")).to_have_value("3")
        await expect(page.locator("#fork-cut")).to_have_count(0)
        await page.get_by_role("button", name="Cancel").click()
        await page.locator('#records li[data-seq="2"] .fork-here').click()
        await expect(page.locator("#fork-up-to")).to_have_value("1")
        await expect(page.locator("#fork-context option[value=inherit]")).to_have_text(
            "inherit records up to #1"
        )
        await expect(page.locator("#fork-cut")).to_have_text(
            "#2's tool calls are not all answered by #2, and a fork never keeps a tool call "
            "without its answer: this one inherits the records up to #1. Fork at #3 to keep "
            "the calls and their answers."
        )
        await page.get_by_role("button", name="Fork", exact=True).click()
        await expect(page.locator("#session-label")).to_have_text("Tools fork")
        await expect(page.locator("#records li[data-seq]")).to_have_count(1)
        assert browser_page.console_errors() == []

    async def test_archive_dims_the_node_and_unarchive_restores_it(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Archive marks the forest node archived (dimmed) and the session; Unarchive undoes it."""
        root = await console.stack.root(label="Old")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        node = page.locator(f'#forest .node[data-id="{root.id}"]')
        await page.locator("#archive").click()
        await expect(node).to_have_class("node archived selected")
        # Dimmed by colour, not opacity (its text keeps a readable contrast); retried, as
        # rows are redrawn.
        await expect(node.locator(".label")).to_have_css("font-style", "italic")
        await expect(node.locator(".label")).to_have_css("color", "rgb(91, 98, 117)")
        await expect(page.locator("#session-status")).to_have_text("archived")
        await expect(page.locator("#send")).to_be_disabled()
        await browser_page.shot("archived")
        await page.locator("#unarchive").click()
        await expect(node).to_have_class("node selected")
        view = await console.stack.view(root.id)
        assert view.node.status == 1  # SESSION_STATUS_ACTIVE
        assert browser_page.console_errors() == []

    async def test_delete_asks_then_erases_the_subtree(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Delete names what goes; Cancel keeps it; Delete erases the session and its child."""
        root = await console.stack.root(label="Doomed")
        await console.stack.fork(root.id, "Doomed child")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await page.locator("#delete").click()
        await expect(page.locator("#delete-what")).to_contain_text("and the 1 session below it")
        await page.get_by_role("button", name="Cancel").click()
        assert len((await console.stack.view(root.id)).node.children) == 1
        await page.locator("#delete").click()
        await page.locator("dialog button.danger").click()
        await expect(page.locator(".forest-count")).to_have_text("No sessions yet: create a root.")
        tree = await console.stack.gw.GetTree(
            agent_pb2.GetTreeRequest(space_id=console.stack.space.sid)
        )
        assert list(tree.nodes) == []
        assert browser_page.console_errors() == []

    async def test_insight_and_memory_are_saved(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The insight and memory editors put their text through the gateway."""
        root = await console.stack.root(label="Notes", system_prompt="Be brief.")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#system-prompt")).to_have_text("Be brief.")
        for name, text in (("insight", "look at X next"), ("memory", "knows about Y")):
            await page.locator(f"details:has(#{name}-text) summary").click()
            await page.locator(f"#{name}-text").fill(text)
            await page.locator(f"#save-{name}").click()
            await expect(page.locator(f"#save-{name}")).to_have_text("Saved")
        view = await console.stack.view(root.id)
        assert (view.insight, view.memory) == ("look at X next", "knows about Y")
        await browser_page.shot("session-slots")
        assert browser_page.console_errors() == []

    async def test_markup_in_a_record_shows_as_text_and_runs_nothing(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A record, label and memory holding <img onerror> show literally; no image, no alert."""
        root = await console.stack.root(label=XSS)
        await console.stack.append(root.id, record("user", XSS), record("assistant", XSS))
        await console.stack.gw.PutMemory(
            agent_pb2.PutMemoryRequest(
                space_id=console.stack.space.sid, session_id=root.id, content=XSS
            )
        )
        page = browser_page.page
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await open_console(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator('#records li[data-seq="1"] .content')).to_have_text(XSS)
        await expect(page.locator("#session-label")).to_have_text(XSS)
        await expect(page.locator("#memory-text")).to_have_value(XSS)
        await page.goto(console.base + "#/digests")
        await expect(page.locator("#digests tbody tr").first).to_contain_text(XSS)
        assert await page.locator("img").count() == 0
        assert dialogs == []
        assert browser_page.console_errors() == []

    async def test_inherited_records_are_marked(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A fork's inherited records carry the inherited badge; its own records do not."""
        root = await console.stack.root(label="Source")
        await console.stack.append(root.id, record("user", "old"))
        child = await console.stack.fork(root.id, "Heir", context=2, prompt="new")  # INHERIT
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{child.id}")
        await expect(page.locator('#records li[data-seq="1"] .badge.inherited')).to_be_visible()
        await expect(page.locator('#records li[data-seq="2"] .badge.inherited')).to_have_count(0)
        assert browser_page.console_errors() == []

    async def test_a_gateway_error_shows_its_message(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """An unknown session shows the gateway's NOT_FOUND message, not a blank page."""
        page = browser_page.page
        missing = "00000000-0000-4000-8000-000000000000"
        await open_console(console, browser_page, f"#/session/{missing}")
        await expect(page.locator("#error-text")).to_contain_text("NOT_FOUND")
        await expect(page.locator("#view-error")).to_contain_text("NOT_FOUND")
        await browser_page.shot("error")
        assert browser_page.console_errors(r"Failed to load resource.*404") == []

    async def test_a_reply_whose_stream_breaks_says_so_with_a_code(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A reply whose connection breaks mid-stream (the browser's TypeError "network
        error") shows as UNAVAILABLE with that reason, never as "undefined: network error"."""
        root = await console.stack.root(label="Chat")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        # The send's response: a first delta, then the connection drops (as Chromium
        # reports a reset mid-body: the reader's read() rejects with a TypeError).
        await page.evaluate(
            """() => {
              const real = window.fetch;
              window.fetch = (input, init) => {
                if (!String(input).endsWith("/send")) return real(input, init);
                const body = new ReadableStream({
                  start(controller) {
                    const delta = JSON.stringify({ text: "Half a " });
                    const block = `event: delta\\ndata: ${delta}\\n\\n`;
                    controller.enqueue(new TextEncoder().encode(block));
                    controller.error(new TypeError("network error"));
                  },
                });
                const headers = { "content-type": "text/event-stream" };
                return Promise.resolve(new Response(body, { status: 200, headers }));
              };
            }"""
        )
        await page.locator("#message").fill("hello there")
        await page.locator("#send").click()
        failed = page.locator("#records li.role-assistant .error-text")
        await expect(failed).to_have_text(
            "UNAVAILABLE: the reply's stream broke (TypeError: network error)"
        )
        await expect(page.locator("#error-text")).to_have_text(
            "UNAVAILABLE: the reply's stream broke (TypeError: network error)"
        )
        assert browser_page.console_errors() == []


class TestDigests:
    async def test_digests_page_and_filter_by_status(
        self, console: ConsoleStack, browser_page: BrowserPage, pool: asyncpg.Pool
    ) -> None:
        """60 sessions: two pages of 50 and 10; the archived filter shows only archived ones."""
        ids = await seed_topology(pool, console.stack.space.id, [None] * 60)
        await console.stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=console.stack.space.sid, session_id=str(ids[7]))
        )
        page = browser_page.page
        await open_console(console, browser_page, "#/digests")
        rows = page.locator("#digests tbody tr[data-id]")
        await expect(rows).to_have_count(50)
        await browser_page.shot("digests")
        await page.locator("#digest-next").click()
        await expect(rows).to_have_count(10)
        await expect(page.locator("#digest-page")).to_have_text("page 2")
        await page.locator("#digest-prev").click()
        await expect(rows).to_have_count(50)
        await page.locator("#digest-status").select_option("archived")
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text("n7")
        assert browser_page.console_errors() == []


class TestAddresses:
    async def test_a_bad_address_says_so_and_a_later_success_clears_the_banner(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A malformed %-escape, an empty session id or search says so (no uncaught error, no
        stale view, no "404", no raw INVALID_ARGUMENT in a banner); a session that failed to
        open leaves a banner that the next view opened clears."""
        root = await console.stack.root(label="Fine")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#session-label")).to_have_text("Fine")
        error = page.locator("#view-error")
        for fragment, said in [
            ("#/session/%E0%A4%A", "This address is not valid"),
            ("#/search/%", "This address is not valid"),
            ("#/session/", "This address names no session"),
            ("#/search/", "This address names no search (#/search/ needs words to look for)"),
            ("#/search/%20", "This address names no search"),
        ]:
            await page.goto(console.base + fragment)
            await expect(error).to_contain_text(said)
            await expect(page.locator("#session-label")).to_have_count(0)
            await expect(page.locator("#error")).to_be_hidden()  # not INVALID_ARGUMENT twice
        await page.goto(f"{console.base}#/session/{uuid.uuid4()}")
        await expect(page.locator("#error-text")).to_contain_text("NOT_FOUND")
        await page.goto(f"{console.base}#/session/{root.id}")
        await expect(page.locator("#session-label")).to_have_text("Fine")
        await expect(page.locator("#error")).to_be_hidden()
        assert browser_page.console_errors(r"Failed to load resource.*404") == []

    async def test_an_id_that_is_no_id_reaches_no_other_endpoint(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A session id with "../" or "?" in it (escaped in the address) is said to be no
        session id: no request leaves for it, no raw TypeError, and the banner of the view
        opened before goes."""
        root = await console.stack.root(label="Fine")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{root.id}")
        await expect(page.locator("#session-label")).to_have_text("Fine")
        urls: list[str] = []
        page.on("request", lambda request: urls.append(request.url))
        error = page.locator("#view-error")
        for fragment in (
            f"#/session/{root.id}/..%2F..%2Ftree",
            "#/session/x/..%2F..%2Ftree",
            f"#/session/{root.id}%3F",
        ):
            await page.goto(console.base + fragment)
            await expect(error).to_contain_text("This address names no")
        assert not [url for url in urls if "/api/" in url]
        await page.goto(f"{console.base}#/session/{uuid.uuid4()}")
        await expect(page.locator("#error-text")).to_contain_text("NOT_FOUND")
        await page.goto(f"{console.base}#/session/x%3F")
        await expect(error).to_contain_text("This address names no session")
        await expect(page.locator("#error")).to_be_hidden()  # the NOT_FOUND is another view's
        assert browser_page.console_errors(r"Failed to load resource.*404") == []

    async def test_a_label_with_a_bidi_override_does_not_turn_the_console_text(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A label with an unterminated U+202E: the status badge stays after the label (not
        moved into it, its text reversed), in the head and beside the lineage."""
        root = await console.stack.root(label="top \u202eoverride")
        child = await console.stack.fork(root.id, "kid \u202eunterminated RLO")
        page = browser_page.page
        await open_console(console, browser_page, f"#/session/{child.id}")
        await expect(page.locator("#session-status")).to_have_text("active")
        label = await page.locator("#session-label").bounding_box()
        status = await page.locator("#session-status").bounding_box()
        assert label is not None and status is not None
        assert status["x"] >= label["x"] + label["width"] - 1, (label, status)
        ancestor = await page.locator("#lineage li.ancestor a").bounding_box()
        turns = await page.locator("#lineage li.ancestor .turns").bounding_box()
        assert ancestor is not None and turns is not None
        assert turns["x"] >= ancestor["x"] + ancestor["width"] - 1, (ancestor, turns)


class TestRefusals:
    async def test_the_page_without_the_token_is_refused(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """Opening the address without the token shows the refusal, not the console."""
        reply = await browser_page.page.goto(console.base)
        assert reply is not None and reply.status == 403
        await expect(browser_page.page.locator("body")).to_contain_text("not signed in")
        assert await browser_page.page.locator("#forest").count() == 0

    async def test_a_foreign_page_cannot_read_the_api(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A page on another origin (localhost vs 127.0.0.1) gets no answer from the API."""
        await open_console(console, browser_page)
        other = f"http://localhost:{console.port}/"
        # The signed-in browser opens a page of another origin, which calls the console.
        await browser_page.page.goto(other)
        status = await browser_page.page.evaluate(
            "async (url) => (await fetch(url, {method: 'POST', body: '{}'}).catch(() => null))"
            "?.status ?? 'blocked'",
            f"http://127.0.0.1:{console.port}/api/roots",
        )
        assert status in (403, "blocked")
        tree = await console.stack.gw.GetTree(
            agent_pb2.GetTreeRequest(space_id=console.stack.space.sid)
        )
        assert list(tree.nodes) == []


class TestDeployed:
    async def test_sign_in_with_a_key_keeps_it_in_session_storage(
        self, key_console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """The deployed page asks for key and space, keeps them in sessionStorage, not the URL."""
        space = key_console.stack.space
        root = await key_console.stack.root(label="Deployed")
        page = browser_page.page
        await page.goto(key_console.base)
        await page.locator("#sign-in-key").fill(space.key)
        await page.locator("#sign-in-space").fill(space.sid)
        await page.locator("#sign-in").click()
        await expect(page.locator(f'#forest .node[data-id="{root.id}"]')).to_be_visible()
        assert space.key not in page.url
        stored = await page.evaluate("() => sessionStorage.getItem('stello_console.key')")
        assert stored == space.key
        assert await browser_page.context.cookies() == []
        assert browser_page.console_errors() == []

    async def test_a_wrong_key_asks_again_with_the_gateways_message(
        self, key_console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A key the gateway refuses brings the sign-in back, saying why; nothing is kept."""
        page = browser_page.page
        await page.goto(key_console.base)
        await page.locator("#sign-in-key").fill("not-a-key")
        await page.locator("#sign-in-space").fill(key_console.stack.space.sid)
        await page.locator("#sign-in").click()
        await expect(page.locator(".sign-in .error-text")).not_to_be_empty()
        await expect(page.locator("#sign-in-key")).to_be_visible()
        stored = await page.evaluate("() => sessionStorage.getItem('stello_console.key')")
        assert stored is None
        assert browser_page.console_errors(r"Failed to load resource.*401") == []

    async def test_a_space_the_key_does_not_reach_asks_again_naming_the_field(
        self, key_console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """A good key with a space id it does not reach (another tenant's, or none) brings
        the sign-in back, naming the Space id field; nothing is kept."""
        page = browser_page.page
        await page.goto(key_console.base)
        await page.locator("#sign-in-key").fill(key_console.stack.space.key)
        await page.locator("#sign-in-space").fill(str(uuid.uuid4()))
        await page.locator("#sign-in").click()
        await expect(page.locator(".sign-in .error-text")).to_contain_text(
            "this key reaches no space with id"
        )
        await expect(page.locator(".sign-in .error-text")).to_contain_text("Space id field")
        await expect(page.locator("#sign-in-space")).to_be_visible()
        stored = await page.evaluate("() => sessionStorage.getItem('stello_console.space')")
        assert stored is None
        assert browser_page.console_errors(r"Failed to load resource.*40[04]") == []


class TestNewRoot:
    async def test_new_root_appears_and_opens(
        self, console: ConsoleStack, browser_page: BrowserPage
    ) -> None:
        """ "New root" with a label and system prompt creates it and opens its view."""
        page = browser_page.page
        await open_console(console, browser_page)
        await expect(page.locator(".forest-count")).to_have_text("No sessions yet: create a root.")
        await page.locator("#new-root").click()
        await page.locator("#root-label").fill("Fresh")
        await page.locator("#root-system-prompt").fill("You are new.")
        await page.get_by_role("button", name="Create").click()
        await expect(page.locator("#session-label")).to_have_text("Fresh")
        await expect(page.locator("#system-prompt")).to_have_text("You are new.")
        await expect(page.locator(".forest-count")).to_have_text("1 session in 1 tree")
        assert browser_page.console_errors() == []
