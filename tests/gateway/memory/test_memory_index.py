"""The shared memory index in a turn's context (STELLO-SPEC §4.9 item 7, §6.9 items 5-6).

The model is the OpenAI-compatible provider against a loopback fake server: the
context is read off the wire, in the request bodies the fake received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_gateway.app import GatewayClients
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.settings import StelloSettings
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    StackMaker,
    close_stack,
    open_stack,
)
from tests.gateway.llm.support import identity
from tests.gateway.turns_support import send
from tests.support.fake_openai import FakeAnswer, FakeOpenAI
from tests.support.fixtures import TestSpace, new_space

pytestmark = pytest.mark.sql

HINT = (
    "To read an entry, call stello_memory_recall with its slug.\n"
    "To keep the shared memory current, call stello_memory_remember (add or replace an "
    "entry) and stello_memory_forget (remove one)."
)
OpenAIStack = Callable[..., Awaitable[Stack]]


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        fake.set_default(lambda body: FakeAnswer("ok"))
        yield fake


@pytest.fixture(name="openai_stack")
async def _openai_stack(make_stack: StackMaker, fake: FakeOpenAI) -> AsyncIterator[OpenAIStack]:
    """Make a stack whose gateway talks to the fake server (settings overrides given)."""
    providers: list[OpenAIProvider] = []

    async def make(**overrides: Any) -> Stack:
        provider = OpenAIProvider(
            model="fake", api_key="sk-test", base_url=fake.base_url, timeout_s=5.0, max_retries=0
        )
        providers.append(provider)
        overrides.setdefault("builtin_tools", False)
        return await make_stack(provider, **overrides)

    yield make
    for provider in providers:
        await provider.aclose()


async def remember(stack: Stack, slug: str, summary: str) -> None:
    """Write an entry through the gateway."""
    await stack.gw.UpsertSharedMemoryEntry(
        agent_pb2.UpsertSharedMemoryEntryRequest(
            space_id=stack.space.sid, slug=slug, summary=summary, body="b"
        )
    )


def system_messages(fake: FakeOpenAI, call: int = -1) -> list[str]:
    """The system messages of a call the fake received, but the session identity."""
    return [
        m["content"]
        for m in fake.chat_bodies()[call]["messages"]
        if m["role"] == "system" and not m["content"].startswith("<session_identity>")
    ]


def index(*lines: str) -> str:
    """The index text of spec §4.9 item 7 with these lines, and the hint."""
    return "\n".join(["<shared_memory_index>", *lines, "</shared_memory_index>"]) + "\n\n" + HINT


class TestIndex:
    async def test_exactly_after_the_system_prompt(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """With entries, the index is the message right after the system prompt, in order."""
        stack = await openai_stack()
        root = await stack.root(label="Research", system_prompt="You are Stello.")
        await remember(stack, "tides", "when the tides turn")
        await remember(stack, "knots", "which knot for which job")
        await remember(stack, "tides", "tide times, replaced")  # keeps its place
        await send(stack, root.id, "hi", memory_tools=True)
        assert fake.chat_bodies()[0]["messages"] == [
            {"role": "system", "content": "You are Stello."},
            {
                "role": "system",
                "content": index(
                    "- tides: tide times, replaced", "- knots: which knot for which job"
                ),
            },
            {"role": "system", "content": identity("Research")},
            {"role": "user", "content": "hi"},
        ]

    async def test_present_only_while_entries_exist(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """Empty, one entry, empty again: no index, '- a: sa', no index (spec §6.9 item 6)."""
        stack = await openai_stack()
        root = await stack.root()
        await send(stack, root.id, "one", memory_tools=True)
        await remember(stack, "a", "sa")
        await send(stack, root.id, "two", memory_tools=True)
        await stack.gw.RemoveSharedMemoryEntry(
            agent_pb2.RemoveSharedMemoryEntryRequest(space_id=stack.space.sid, slug="a")
        )
        await send(stack, root.id, "three", memory_tools=True)
        assert [system_messages(fake, i) for i in range(3)] == [[], [index("- a: sa")], []]

    async def test_in_every_turn_with_the_hint_only_where_the_tools_are(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """Every turn of a space with entries shows the index (DESIGN §4.5, the spec's
        adapter: explore16 D1, a turn without the memory tools showed none); the hint, which
        names the memory tools, only in a turn that offers them."""
        stack = await openai_stack()
        root = await stack.root()
        await remember(stack, "a", "sa")
        await send(stack, root.id, "hi")
        await send(stack, root.id, "hi", memory_tools=False)
        await send(stack, root.id, "hi", memory_tools=True)
        bare = "<shared_memory_index>\n- a: sa\n</shared_memory_index>"
        assert [system_messages(fake, i) for i in range(3)] == [
            [bare],
            [bare],
            [index("- a: sa")],
        ]

    async def test_capped_in_entries_with_the_more_line(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI
    ) -> None:
        """Over STELLO_GATEWAY_MEMORY_INDEX_MAX_ENTRIES a line says how many more there are."""
        stack = await openai_stack(memory_tools=True, memory_index_max_entries=2)
        root = await stack.root()
        for slug in ("a", "b", "c", "d"):
            await remember(stack, slug, f"s{slug}")
        await send(stack, root.id, "hi")
        assert system_messages(fake) == [index("- a: sa", "- b: sb", "2 more: recall by slug")]

    async def test_capped_in_tokens(self, openai_stack: OpenAIStack, fake: FakeOpenAI) -> None:
        """Entries whose lines pass STELLO_GATEWAY_MEMORY_INDEX_MAX_TOKENS are left out."""
        stack = await openai_stack(memory_tools=True, memory_index_max_tokens=25)
        root = await stack.root()
        for slug in ("a", "b", "c"):
            await remember(stack, slug, "x" * 33)  # "- a: " + 33 + "\n": 10 tokens
        await send(stack, root.id, "hi")
        line = "x" * 33
        assert system_messages(fake) == [
            index(f"- a: {line}", f"- b: {line}", "1 more: recall by slug")
        ]

    async def test_two_sessions_share_it_and_another_space_sees_none(
        self, openai_stack: OpenAIStack, fake: FakeOpenAI, keys: Any
    ) -> None:
        """Every session of the space shows the same index; a session of another space none."""
        stack = await openai_stack(memory_tools=True)
        await remember(stack, "shared", "for everyone")
        for _ in range(2):
            root = await stack.root()
            await send(stack, root.id, "hi")
        other = await new_space(keys)
        async with stack.gateway.channel(other.key) as channel:
            gw = agent_pb2_grpc.AgentGatewayStub(channel)
            elsewhere = await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=other.sid))
            await gw.Send(
                agent_pb2.SendRequest(
                    space_id=other.sid, session_id=elsewhere.session.id, content="hi"
                )
            )
        assert [system_messages(fake, i) for i in range(3)] == [
            [index("- shared: for everyone")],
            [index("- shared: for everyone")],
            [],
        ]

    async def test_the_zh_preset(self, openai_stack: OpenAIStack, fake: FakeOpenAI) -> None:
        """Under the zh preset the hint and the more line are the Chinese texts."""
        stack = await openai_stack(memory_tools=True, prompts="zh", memory_index_max_entries=1)
        root = await stack.root()
        await remember(stack, "a", "sa")
        await remember(stack, "b", "sb")
        await send(stack, root.id, "hi")
        (text,) = system_messages(fake)
        assert text.startswith("<shared_memory_index>\n- a: sa\n另有 1 条：按 slug 读取\n")
        assert "stello_memory_recall" in text.split("\n\n", 1)[1]


@pytest.mark.parametrize("with_skills", [False, True], ids=["plain", "skills"])
async def test_a_turn_stays_two_storage_calls_and_no_tree_call(
    start_gateway: GatewayStarter,
    backends: Backends,
    space: TestSpace,
    summarizer: FakeSummarizer,
    settings: StelloSettings,
    tmp_path: Path,
    with_skills: bool,
) -> None:
    """With the memory tools, an index and skills, a turn is BeginTurn and the commit only."""
    clients = GatewayClients.connect(backends.gateway_config(), settings)
    overrides: dict[str, Any] = {"memory_tools": True}
    if with_skills:
        path = tmp_path / "skills.toml"
        path.write_text('[[skills]]\nname = "a"\ndescription = "d"\ncontent = "c"\n')
        overrides["skills_file"] = path
    gateway = await start_gateway(clients=clients, **overrides)
    stack = await open_stack(backends, gateway, space, summarizer)
    try:
        root = await stack.root()
        await remember(stack, "a", "sa")
        clients.storage.calls.clear()
        clients.tree.calls.clear()
        await send(stack, root.id, "hi")
        assert dict(clients.storage.calls) == {"BeginTurn": 1, "Transact": 1}
        assert not clients.tree.calls
    finally:
        await close_stack(stack)
