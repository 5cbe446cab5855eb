"""Console fixtures: the gateway stack of tests/gateway, a console in front of it, Chromium.

The console runs in the test's event loop on a loopback port (the same
`running_console` `stello up` uses); the browser is Debian's Chromium driven
by Playwright (`executable_path`, never a downloaded browser), installed by
scripts/system_packages. Screenshots go to $STELLO_TEST_ARTEFACTS/console/ when
that is set, else artifacts/console/ (gitignored); never into the repository's
tracked files. axe-core (the accessibility checks) is installed by `npm ci` from
tests/console/axe/ and injected by the test: the console never ships it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import asyncpg
import pytest
from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    async_playwright,
    expect,
)

from agent_gateway.app import create_app
from agent_gateway.llm import Completion, Done, LLMMessage, StreamEvent, TextDelta, ToolSpec, Usage
from stello.auth import KeyStore
from stello.serving.server import create_server, shutdown
from stello.settings import StelloSettings
from stello_console import Caller, ConsoleOptions, RunningConsole, running_console
from tests.cli.conftest import _cluster_template, _home  # noqa: F401 (fixtures used by name)
from tests.gateway.conftest import (  # noqa: F401 (fixtures used by name)
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    _backends,
    _local_calls,
    _profiles_file,
    _provisioning_ttl_s,
    _start_gateway,
    _summarizer,
    close_stack,
    open_stack,
)
from tests.support.fixtures import RunningServer, TestSpace
from tests.support.npm import installed

REPO = Path(__file__).resolve().parents[2]
AXE_DIR = Path(__file__).resolve().parent / "axe"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPLY_HEAD = "Streaming "
TIMEOUT_MS = 20_000  # generous: a loaded 2-core machine
expect.set_options(timeout=TIMEOUT_MS)


class HeldProvider:
    """An LLM behind the provider interface that echoes, and can hold its reply mid-stream.

    The first delta is REPLY_HEAD; while `release` is clear, the rest waits,
    so a test can see the page show a reply before the turn is done. `cut` is
    set when a stream is closed before its end (the gateway cancelled the turn).
    """

    max_context_tokens = 1_000_000

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.cut = asyncio.Event()

    def _text(self, messages: Sequence[LLMMessage]) -> str:
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return f"{REPLY_HEAD}reply to: {last}"

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """The whole reply at once."""
        return Completion(self._text(messages), (), Usage(1, 1, 2))

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """REPLY_HEAD, then (once released) the rest, then Done; `cut` set if closed before."""
        text = self._text(messages)
        ended = False
        try:
            yield TextDelta(REPLY_HEAD)
            await self.release.wait()
            yield TextDelta(text[len(REPLY_HEAD) :])
            yield Done(Completion(text, (), Usage(1, 1, 2)))
            ended = True
        finally:
            if not ended:
                self.cut.set()


@dataclass
class ConsoleStack:
    """A gateway stack with a console in front of it, signed in as the stack's space."""

    stack: Stack
    console: RunningConsole
    provider: HeldProvider

    @property
    def port(self) -> int:
        """The console's port."""
        return self.console.port

    @property
    def base(self) -> str:
        """The page's address without the token."""
        return f"http://127.0.0.1:{self.console.port}/"


def artefacts() -> Path:
    """Where the browser tests leave their screenshots: $STELLO_TEST_ARTEFACTS/console when
    set (a CI run's artefacts folder), else artifacts/console in the checkout (gitignored)."""
    root = os.environ.get("STELLO_TEST_ARTEFACTS")
    return (Path(root) if root else REPO / "artifacts") / "console"


@dataclass
class GatewayStack:
    """A gateway stack and its held provider, with no console yet (a test runs its own)."""

    stack: Stack
    provider: HeldProvider

    def options(self, **changes: object) -> ConsoleOptions:
        """The local console's options for this stack's space (any field changed)."""
        space = self.stack.space
        base = ConsoleOptions(
            gateway=self.stack.gateway.address, port=0, caller=Caller(space.key, space.sid)
        )
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture(name="gateway_stack")
async def _gateway_stack(
    start_gateway: GatewayStarter, backends: Backends, space: TestSpace, summarizer: FakeSummarizer
) -> AsyncIterator[GatewayStack]:
    """A real gateway, storage and tree for the test's own consoles."""
    provider = HeldProvider()
    gateway = await start_gateway(provider=provider)
    stack = await open_stack(backends, gateway, space, summarizer)
    try:
        yield GatewayStack(stack, provider)
    finally:
        await close_stack(stack)


@pytest.fixture(name="console")
async def _console(gateway_stack: GatewayStack) -> AsyncIterator[ConsoleStack]:
    """The local console (as `stello up` runs it) over a real gateway, storage and tree."""
    async with running_console(gateway_stack.options()) as console:
        yield ConsoleStack(gateway_stack.stack, console, gateway_stack.provider)


@dataclass
class GatewayRestart:
    """Stops the console's gateway and starts a new one on its port: a gateway restart.

    The stopped server's app is shut down by `start_server` at teardown, the
    new ones by this fixture.
    """

    console: ConsoleStack
    backends: Backends
    profiles_file: Path
    summarizer: FakeSummarizer
    settings: StelloSettings
    pool: asyncpg.Pool
    keys: KeyStore
    started: list[RunningServer] = field(default_factory=list)

    async def stop(self) -> None:
        """Stop the running gateway at once: its streams end, its port is free."""
        running = self.started[-1] if self.started else self.console.stack.gateway
        await running.server.stop(0)

    async def start(self) -> None:
        """A new gateway on the old port, over the same storage, tree and provider."""
        factory = partial(
            create_app,
            config=self.backends.gateway_config(profiles_file=self.profiles_file),
            summarizer=self.summarizer,
            provider=self.console.provider,
        )
        app = factory(self.settings, self.pool, self.keys)
        server, port = await create_server(app, self.console.stack.gateway.address)
        await server.start()
        self.started.append(RunningServer(app, server, port))
        # The test's own stubs reconnect now rather than after their channel's backoff.
        await asyncio.wait_for(self.console.stack.channels[0].channel_ready(), 10)


@pytest.fixture(name="gateway_restart")
async def _gateway_restart(
    console: ConsoleStack,
    backends: Backends,
    profiles_file: Path,
    summarizer: FakeSummarizer,
    settings: StelloSettings,
    pool: asyncpg.Pool,
    keys: KeyStore,
) -> AsyncIterator[GatewayRestart]:
    """Restart the gateway behind `console` (stop, then start on the same port)."""
    restart = GatewayRestart(console, backends, profiles_file, summarizer, settings, pool, keys)
    yield restart
    for running in reversed(restart.started):
        await shutdown(running.app, running.server, 0)


@pytest.fixture(name="key_console")
async def _key_console(
    start_gateway: GatewayStarter, backends: Backends, space: TestSpace, summarizer: FakeSummarizer
) -> AsyncIterator[ConsoleStack]:
    """A deployed console (the page sends the key) over a real gateway."""
    provider = HeldProvider()
    gateway = await start_gateway(provider=provider)
    stack = await open_stack(backends, gateway, space, summarizer)
    try:
        async with running_console(ConsoleOptions(gateway=gateway.address, port=0)) as console:
            yield ConsoleStack(stack, console, provider)
    finally:
        await close_stack(stack)


@pytest.fixture(name="browser", scope="session")
async def _browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless; Playwright gives each launch a fresh profile directory."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system_packages (scripts/test does)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        yield browser
        await browser.close()


@dataclass
class BrowserPage:
    """A page in a fresh browser context, with everything its console and errors reported."""

    context: BrowserContext
    page: Page
    messages: list[ConsoleMessage] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def console_errors(self, *allowed: str) -> list[str]:
        """Console errors and uncaught page errors, but those matching an `allowed` pattern;
        when any is left, the requests answered with an error follow it (which ones failed)."""
        found = [m.text for m in self.messages if m.type == "error"] + self.errors
        left = [text for text in found if not any(re.search(p, text) for p in allowed)]
        return left + [f"(answered {refused})" for refused in self.refused] if left else []

    async def shot(self, name: str) -> Path:
        """A screenshot in the artefacts folder (`artefacts()`), NAME.png."""
        folder = artefacts()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        await self.page.screenshot(path=str(path))
        return path


@pytest.fixture(name="browser_page")
async def _browser_page(browser: Browser) -> AsyncIterator[BrowserPage]:
    """A new context (no cookies, no storage) and page, 1280x800."""
    async with open_page(browser, DESKTOP) as opened:
        yield opened


@pytest.fixture(name="phone_page")
async def _phone_page(browser: Browser) -> AsyncIterator[BrowserPage]:
    """A new context as a phone: 390x844, touch, no hover (a mobile viewport)."""
    async with open_page(browser, PHONE, mobile=True) as opened:
        yield opened


@contextlib.asynccontextmanager
async def open_page(
    browser: Browser, viewport: dict[str, int], *, mobile: bool = False
) -> AsyncIterator[BrowserPage]:
    """A fresh context (no cookies, no storage) of `viewport`, and a page in it that
    records its console messages, page errors and refused requests."""
    context = await browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        is_mobile=mobile,
        has_touch=mobile,
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    opened = BrowserPage(context, page)
    page.on("console", lambda message: opened.messages.append(message))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    page.on(
        "response",
        lambda reply: (
            opened.refused.append(f"{reply.status} {reply.request.method} {reply.url}")
            if reply.status >= 400
            else None
        ),
    )
    try:
        yield opened
    finally:
        await context.close()


@pytest.fixture(name="axe", scope="session")
async def _axe() -> str:
    """axe-core's source (npm ci from tests/console/axe/, pinned by its lock), to inject."""
    modules = await installed(AXE_DIR)
    return (modules / "axe-core" / "axe.min.js").read_text(encoding="utf-8")


def seeded_forest(roots: int, per_root: int) -> list[int | None]:
    """`roots` trees of `per_root` sessions each, every node with up to three children."""
    parents: list[int | None] = []
    for tree in range(roots):
        base = tree * per_root
        parents.append(None)
        parents += [base + (j - 1) // 3 for j in range(1, per_root)]
    return parents
