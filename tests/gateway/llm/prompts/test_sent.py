"""The texts the gateway adds to model calls, seen by a loopback OpenAI-compatible server.

DESIGN §5.16: English by default, the reference's Chinese under
``STELLO_GATEWAY_PROMPTS=zh``, any key replaced by a prompts file, and the
compressor/consolidator prompts of a profile kept in the sessions it makes.
Whatever the texts, the message structures are spec §4.9's. Every path that
adds text runs once per gateway: a Consolidate with a memory, a turn that
compresses (one fold, DESIGN §5.14), a COMPRESS fork (a fold of the source's
summary and its records after it), and a turn of the forked child.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_gateway.llm import KEYS, Prompts
from agent_gateway.llm.network.openai_provider import OpenAIProvider
from agent_gateway.llm.prompts.texts import (
    COMPRESSOR,
    CONSOLIDATOR,
    FORK_COMPRESSOR,
    PARENT_CONTEXT,
    SESSION_IDENTITY,
)
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from tests.gateway.conftest import PROFILES_TOML, Stack, StackMaker, record
from tests.gateway.llm.support import (
    CHINESE,
    ENGLISH,
    ZH_COMPRESS,
    ZH_CONSOLIDATE,
    ZH_FORK_COMPRESS,
    has_cjk,
)
from tests.gateway.turns_support import send
from tests.support.fake_openai import FakeAnswer, FakeOpenAI

pytestmark = pytest.mark.sql

WINDOW = 4_000
"""The provider's context window: SEEDED and EXTRA overflow it, and the records a
compression folds fit one call."""
ANSWER = "The model's answer."
"""What the fake model answers every call (so every summary is this)."""
SEEDED = [
    record("user" if i % 2 == 0 else "assistant", f"line {i:02d} " + "x" * 52) for i in range(24)
]
LINES = "\n".join(
    f"{'user' if i % 2 == 0 else 'assistant'}: line {i:02d} " + "x" * 52 for i in range(24)
)
"""The transcript of SEEDED, as the compressor and consolidator get it."""
EXTRA = [
    record("user" if i % 2 == 0 else "assistant", f"more {i:02d} " + "y" * 192) for i in range(37)
]
EXTRA_LINES = [
    f"{'user' if i % 2 == 0 else 'assistant'}: more {i:02d} " + "y" * 192 for i in range(37)
]
"""The transcript lines of EXTRA."""

Messages = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Calls:
    """The messages of each model call, in the order the scenario makes them."""

    consolidation: Messages
    compression: Messages
    turn: Messages
    fork_compression: Messages
    child_turn: Messages

    def all(self) -> list[Messages]:
        """Every call's messages."""
        return [
            self.consolidation,
            self.compression,
            self.turn,
            self.fork_compression,
            self.child_turn,
        ]

    @property
    def folded(self) -> int:
        """How many EXTRA records the compression folded (the rest stay in the window)."""
        return sum(1 for line in self.compression[1]["content"].splitlines() if "more " in line)


@pytest.fixture(name="fake")
async def _fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        fake.set_default(lambda body: FakeAnswer(ANSWER))
        yield fake


@pytest.fixture(name="provider")
async def _provider(fake: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(
        model="fake-chat",
        api_key="sk-test",
        base_url=fake.base_url,
        timeout_s=5.0,
        max_retries=0,
        max_context_tokens=WINDOW,
    ) as provider:
        yield provider


async def consolidate(stack: Stack, session_id: str) -> str:
    """Consolidate; answers the new memory."""
    reply = await stack.gw.Consolidate(
        agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return str(reply.memory)


async def put_memory(stack: Stack, session_id: str, content: str) -> None:
    """PutMemory through the gateway."""
    await stack.gw.PutMemory(
        agent_pb2.PutMemoryRequest(space_id=stack.space.sid, session_id=session_id, content=content)
    )


def messages(body: Any) -> Messages:
    """A request body's messages as role and content."""
    return [{"role": m["role"], "content": m["content"]} for m in body["messages"]]


async def run_paths(
    make_stack: StackMaker, provider: OpenAIProvider, fake: FakeOpenAI, **settings: Any
) -> Calls:
    """One gateway with `settings`; every path that adds text, once; the calls it made."""
    stack = await make_stack(provider, fake_summarizer=False, builtin_tools=False, **settings)
    before = len(fake.chat_bodies())
    root = await stack.root(label="Research", system_prompt="You are Stello.")
    await stack.append(root.id, *SEEDED)
    await put_memory(stack, root.id, "earlier memory")
    await consolidate(stack, root.id)
    await stack.append(root.id, *EXTRA)
    await send(stack, root.id, "question")
    child = await stack.fork(root.id, "Notes", context=common_pb2.FORK_CONTEXT_COMPRESS)
    await send(stack, child.id, "next")
    bodies = fake.chat_bodies()[before:]
    assert len(bodies) == 5
    return Calls(*(messages(body) for body in bodies))


def skeleton(calls: Calls, prompts: Prompts) -> list[Messages]:
    """The calls with every configured text replaced by its key: the structure alone."""
    texts = [(prompts.text(key), f"{{{key.name}}}") for key in KEYS if not key.variables]
    texts += [
        (prompts.identity(label), f"{{{SESSION_IDENTITY.name}:{label}}}")
        for label in ("Research", "Notes")
    ]
    texts.append((prompts.text(PARENT_CONTEXT, summary=ANSWER), f"{{{PARENT_CONTEXT.name}}}"))
    texts.sort(key=lambda pair: -len(pair[0]))  # longest first: headers are short

    def plain(content: str) -> str:
        for text, name in texts:
            content = content.replace(text, name)
        return content

    return [
        [{"role": m["role"], "content": plain(m["content"])} for m in call] for call in calls.all()
    ]


def spec_structure(folded: int) -> list[Messages]:
    """Spec §4.9's messages of the five calls (count, order, roles, where each text goes),
    DESIGN §5.14's for the folds, when the compression folded SEEDED and `folded` of EXTRA."""
    kept = EXTRA_LINES[folded:]
    return [
        [
            {"role": "system", "content": "{consolidator}"},
            {
                "role": "user",
                "content": "{memory_header}\nearlier memory\n\n{transcript_header}\n" + LINES,
            },
        ],
        [
            {"role": "system", "content": "{compressor}"},
            {
                "role": "user",
                "content": "{transcript_header}\n" + LINES + "\n" + "\n".join(EXTRA_LINES[:folded]),
            },
        ],
        [
            {"role": "system", "content": "You are Stello."},
            {"role": "system", "content": "{session_identity:Research}"},
            {"role": "system", "content": ANSWER},
            *({"role": line.split(": ", 1)[0], "content": line.split(": ", 1)[1]} for line in kept),
            {"role": "user", "content": "question"},
        ],
        [
            {"role": "system", "content": "{fork_compressor}"},
            {
                "role": "user",
                "content": f"<previous_summary>\n{ANSWER}\n</previous_summary>\n\n"
                "{transcript_header}\n"
                + "\n".join(kept)
                + f"\nuser: question\nassistant: {ANSWER}",
            },
        ],
        [
            {"role": "system", "content": "You are Stello.\n\n{parent_context}"},
            {"role": "system", "content": "{session_identity:Notes}"},
            {"role": "user", "content": "next"},
        ],
    ]


class TestDefaults:
    """No prompt setting: English."""

    async def test_no_cjk_anywhere(
        self, make_stack: StackMaker, provider: OpenAIProvider, fake: FakeOpenAI
    ) -> None:
        """No text of a turn, compression, COMPRESS fork or Consolidate holds a CJK character."""
        calls = await run_paths(make_stack, provider, fake)
        sent = json.dumps(calls.all(), ensure_ascii=False)
        assert not has_cjk(sent), sent
        assert calls.compression[0]["content"] == ENGLISH.text(COMPRESSOR)
        assert calls.fork_compression[0]["content"] == ENGLISH.text(FORK_COMPRESSOR)
        assert calls.consolidation[0]["content"] == ENGLISH.text(CONSOLIDATOR)
        assert calls.turn[1]["content"] == (
            '<session_identity>\nYou are in the "Research" sub-session.\n</session_identity>'
        )


class TestChinesePreset:
    """STELLO_GATEWAY_PROMPTS=zh: exactly the reference's texts."""

    async def test_reference_texts(
        self, make_stack: StackMaker, provider: OpenAIProvider, fake: FakeOpenAI
    ) -> None:
        """Each call carries the reference's exact text in the reference's place."""
        calls = await run_paths(make_stack, provider, fake, prompts="zh")
        assert calls.compression == [
            {"role": "system", "content": ZH_COMPRESS},
            {
                "role": "user",
                "content": "对话记录:\n" + LINES + "\n" + "\n".join(EXTRA_LINES[: calls.folded]),
            },
        ]
        assert calls.turn[1] == {
            "role": "system",
            "content": "<session_identity>\n你当前在「Research」子会话中。\n</session_identity>",
        }
        assert calls.fork_compression[0] == {"role": "system", "content": ZH_FORK_COMPRESS}
        assert calls.fork_compression[1]["content"].startswith(
            f"<previous_summary>\n{ANSWER}\n</previous_summary>\n\n对话记录:\n"
        )
        assert calls.consolidation[0] == {"role": "system", "content": ZH_CONSOLIDATE}
        assert calls.consolidation[1]["content"].startswith(
            "当前摘要:\nearlier memory\n\n对话记录:\nuser: line 00"
        )
        assert calls.child_turn[:2] == [
            {
                "role": "system",
                "content": f"You are Stello.\n\n<parent_context>\n{ANSWER}\n</parent_context>",
            },
            {
                "role": "system",
                "content": "<session_identity>\n你当前在「Notes」子会话中。\n</session_identity>",
            },
        ]


class TestStructures:
    """Spec §4.9's structures under en, zh and a prompts file."""

    async def test_same_for_every_set(
        self,
        make_stack: StackMaker,
        provider: OpenAIProvider,
        fake: FakeOpenAI,
        tmp_path: Path,
    ) -> None:
        """Count, order and roles of the messages, and where each text goes, never change."""
        path = tmp_path / "prompts.toml"
        path.write_text(
            'compressor = "Squeeze."\nmemory_header = "Known so far:"\n'
            'parent_context = "[parent] {summary} [/parent]"\n',
            encoding="utf-8",
        )
        custom = Prompts.preset(
            "zh",
            {
                "compressor": "Squeeze.",
                "memory_header": "Known so far:",
                "parent_context": "[parent] {summary} [/parent]",
            },
        )
        english = await run_paths(make_stack, provider, fake)
        chinese = await run_paths(make_stack, provider, fake, prompts="zh")
        from_file = await run_paths(make_stack, provider, fake, prompts="zh", prompts_file=path)
        for calls, prompts in ((english, ENGLISH), (chinese, CHINESE), (from_file, custom)):
            assert 0 < calls.folded < len(EXTRA)
            assert skeleton(calls, prompts) == spec_structure(calls.folded)
        assert from_file.compression[0]["content"] == "Squeeze."


class TestFileOverride:
    """A prompts file replaces exactly the keys it names."""

    @pytest.mark.parametrize(
        ("key", "text"),
        [
            pytest.param("session_identity", "[in {label}]", id="session_identity"),
            pytest.param("consolidator", "Write the memory.", id="consolidator"),
            pytest.param("transcript_header", "Log:", id="transcript_header"),
        ],
    )
    async def test_only_that_key_changes(
        self,
        make_stack: StackMaker,
        provider: OpenAIProvider,
        fake: FakeOpenAI,
        tmp_path: Path,
        key: str,
        text: str,
    ) -> None:
        """Every call equals the default's with that one text swapped, and the text appears."""
        path = tmp_path / "prompts.toml"
        path.write_text(f"{key} = {json.dumps(text)}\n", encoding="utf-8")
        default = await run_paths(make_stack, provider, fake)
        changed = await run_paths(make_stack, provider, fake, prompts_file=path)
        assert changed != default
        custom = Prompts.preset("en", {key: text})
        assert skeleton(changed, custom) == skeleton(default, ENGLISH)
        plain = text.replace("{label}", "Research")
        assert plain in json.dumps(changed.all())


PROFILE_PROMPTS_TOML = (
    PROFILES_TOML
    + """
[[profiles]]
name = "terse"
compressor_prompt = "Compress tersely."
consolidator_prompt = "Remember tersely."
"""
)


class TestProfileOverrides:
    """A profile's compressor/consolidator prompts, kept in the sessions it makes (DESIGN §5.16)."""

    async def test_reach_later_calls_and_forks(
        self,
        make_stack: StackMaker,
        provider: OpenAIProvider,
        fake: FakeOpenAI,
        tmp_path: Path,
    ) -> None:
        """The root's compressions and consolidations use them; a fork inherits them."""
        path = tmp_path / "profiles.toml"
        path.write_text(PROFILE_PROMPTS_TOML, encoding="utf-8")
        stack = await make_stack(provider, profiles_file=path)
        root = await stack.root(profile="terse")
        view = await stack.view(root.id)
        assert view.config.compressor_prompt == "Compress tersely."
        await stack.append(root.id, *SEEDED, *EXTRA)
        await send(stack, root.id, "question")
        await consolidate(stack, root.id)
        child = await stack.fork(root.id, "kid", context=common_pb2.FORK_CONTEXT_INHERIT)
        await consolidate(stack, child.id)
        plain = await stack.root()
        await stack.append(plain.id, *SEEDED)  # with nothing to fold no model is called
        await consolidate(stack, plain.id)
        helpers = [body for body in fake.chat_bodies() if "tools" not in body]
        prompts = [messages(body)[0]["content"] for body in helpers]
        # The root's compression; the root's consolidation, then the child's (inherited
        # through its frozen config), each folding its records in chunks; a session made
        # without the profile.
        assert [text for text, _ in itertools.groupby(prompts)] == [
            "Compress tersely.",
            "Remember tersely.",
            ENGLISH.text(CONSOLIDATOR),
        ]
        assert prompts.count("Remember tersely.") >= 2

    async def test_listed_with_the_profile(
        self, make_stack: StackMaker, provider: OpenAIProvider, tmp_path: Path
    ) -> None:
        """ListProfiles shows a profile's prompt overrides."""
        path = tmp_path / "profiles.toml"
        path.write_text(PROFILE_PROMPTS_TOML, encoding="utf-8")
        stack = await make_stack(provider, profiles_file=path)
        reply = await stack.gw.ListProfiles(agent_pb2.ListProfilesRequest(space_id=stack.space.sid))
        terse = next(p for p in reply.profiles if p.name == "terse")
        assert (terse.compressor_prompt, terse.consolidator_prompt) == (
            "Compress tersely.",
            "Remember tersely.",
        )
        research = next(p for p in reply.profiles if p.name == "research")
        assert not research.HasField("compressor_prompt")
