"""Turns at any history length against a model that counts strictly (DESIGN §4.3, issue #15).

The model is a loopback OpenAI-compatible server with a window of `WINDOW`
tokens that counts one token per CJK character and one per three others (the
gateway's storage estimate, ceil(length / 4), under-counts Chinese about four
times) and refuses any request over its window with
``context_length_exceeded``, as OpenAI does. Histories are seeded with COPY.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from agent_gateway.llm.network.openai_provider import OpenAIProvider
from agent_gateway.llm.prompts.texts import COMPRESSOR
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Stack, StackMaker
from tests.gateway.llm.support import ENGLISH, identity
from tests.gateway.turns_support import (
    SpyProvider,
    compression_cache,
    put_insight,
    send,
    submit,
    tool_definition,
    wait_for,
)
from tests.support.fake_http import FakeAnswer, FakeToolCall
from tests.support.fake_openai import FakeOpenAI
from tests.support.history import RowReads, seed_history
from tests.support.strict_openai import StrictModel, strict_tokens

pytestmark = pytest.mark.sql

WINDOW = 2_000
"""The model's window, in its own tokens."""
ENGLISH_RECORD = 600
"""Characters of an English record: 200 of the model's tokens (150 of the estimate)."""
CHINESE_RECORD = 200
"""Characters of a Chinese record: 200 of the model's tokens (50 of the estimate)."""


def english(index: int) -> tuple[str, str]:
    """An English record of 200 tokens, numbered."""
    role = "user" if index % 2 == 0 else "assistant"
    text = f"{index:06d} the quick brown fox jumps over the lazy dog "
    return role, (text * (ENGLISH_RECORD // len(text) + 1))[:ENGLISH_RECORD]


def chinese(index: int) -> tuple[str, str]:
    """A Chinese record of 200 tokens, numbered."""
    role = "user" if index % 2 == 0 else "assistant"
    text = f"{index:06d}敏捷的棕色狐狸跳过了懒狗"
    cjk = (text * (CHINESE_RECORD // len(text) + 1))[:CHINESE_RECORD]
    return role, cjk


@pytest.fixture(name="model")
async def _model() -> AsyncIterator[tuple[FakeOpenAI, StrictModel]]:
    async with FakeOpenAI() as fake:
        model = StrictModel(WINDOW, frozenset({ENGLISH.text(COMPRESSOR)}))
        model.attach(fake)
        yield fake, model


@pytest.fixture(name="strict")
async def _strict(
    make_stack: StackMaker, model: tuple[FakeOpenAI, StrictModel]
) -> AsyncIterator[tuple[Stack, StrictModel]]:
    fake, strict = model
    async with OpenAIProvider(
        model="strict",
        api_key="sk-test",
        base_url=fake.base_url,
        timeout_s=10.0,
        max_retries=0,
        max_context_tokens=WINDOW,
    ) as provider:
        # A fold budget that completes any backlog here in one run (runs within a budget:
        # test_background_jobs.py).
        yield await make_stack(provider, fake_summarizer=False, fold_max_calls=100_000), strict


async def seeded_root(
    stack: Stack,
    pool: asyncpg.Pool,
    count: int,
    record: Callable[[int], tuple[str, str]],
    **fields: object,
) -> str:
    """A root session with `count` records seeded by SQL."""
    root = await stack.root(**fields)
    async with pool.acquire() as con:
        await seed_history(con, stack.space.id, uuid.UUID(root.id), count, record)
    return root.id


def compressions_per_turn(model: StrictModel) -> list[int]:
    """The compressor calls made before each conversation call, in order."""
    runs, pending = [], 0
    for body in model.bodies:
        if model.is_summary(body):
            pending += 1
        else:
            runs.append(pending)
            pending = 0
    return runs


class TestAnyLength:
    @pytest.mark.parametrize(
        ("times", "record"),
        [
            pytest.param(10, english, id="10x-english"),
            pytest.param(10, chinese, id="10x-chinese"),
            pytest.param(100, english, id="100x-english"),
            pytest.param(100, chinese, id="100x-chinese"),
        ],
    )
    async def test_no_request_is_refused(
        self,
        strict: tuple[Stack, StrictModel],
        pool: asyncpg.Pool,
        times: int,
        record: Callable[[int], tuple[str, str]],
    ) -> None:
        """With 10 and 100 windows of history, in English and in Chinese, every request fits
        the window (none is refused), the first turn makes at most three compressor calls,
        and the next turns none."""
        stack, model = strict
        session = await seeded_root(stack, pool, times * WINDOW // 200, record)
        reply = await send(stack, session, "question 0")
        assert reply.assistant.content == "Reply to: question 0"
        assert compressions_per_turn(model) == [3]  # a catch-up: lossy, folded later

        async def complete() -> bool:
            cache = await compression_cache(stack, session)
            return cache is not None and not cache.lossy

        await wait_for(complete, within_s=60)
        folded = len(model.summaries)
        for n in (1, 2):
            reply = await send(stack, session, f"question {n}")
            assert reply.assistant.content == f"Reply to: question {n}"
        assert len(model.summaries) == folded  # the next turns need none
        assert model.refused == []

    @pytest.mark.slow
    async def test_a_thousand_windows_of_english(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """The first turn after a bulk append of 1,000 windows of English makes three
        compressor calls, none refused, and stores a lossy summary (its background fold is
        the Chinese test's, below)."""
        stack, model = strict
        session = await seeded_root(stack, pool, 1_000 * WINDOW // 200, english)
        reply = await send(stack, session, "after the import")
        assert reply.assistant.content == "Reply to: after the import"
        assert compressions_per_turn(model) == [3]
        lossy = await compression_cache(stack, session)
        assert lossy is not None and lossy.lossy
        assert model.refused == []

    @pytest.mark.slow
    async def test_a_thousand_windows_of_chinese_then_the_background_fold(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """The first turn after a bulk append of 1,000 windows of Chinese (storage's estimate
        counts it a quarter of what the model does) makes three compressor calls, none
        refused; the summary is lossy until the background fold completes it, at the same
        seq, having folded every record, no call over the window either."""
        stack, model = strict
        session = await seeded_root(stack, pool, 1_000 * WINDOW // 200, chinese)
        reply = await send(stack, session, "导入之后")
        assert reply.assistant.content == "Reply to: 导入之后"
        assert compressions_per_turn(model) == [3]
        lossy = await compression_cache(stack, session)
        assert lossy is not None and lossy.lossy

        async def complete() -> bool:
            cache = await compression_cache(stack, session)
            return cache is not None and not cache.lossy

        await wait_for(complete, within_s=120)
        folded = await compression_cache(stack, session)
        assert folded.covered_until_seq == lossy.covered_until_seq
        assert model.refused == []
        background = model.summaries[3:]
        numbers = {
            int(line.split(": ", 1)[1][:6])
            for body in background
            for line in body["messages"][1]["content"].splitlines()
            if line.startswith(("user: ", "assistant: "))
        }
        assert numbers == set(range(folded.covered_until_seq))  # record n has seq n + 1


class TestRowsRead:
    @pytest.mark.slow
    @pytest.mark.plain_postgres(
        "counts the rows read in the statistics of the database it connects to; on Citus "
        "the coordinator reads none, the workers' shards do"
    )
    async def test_a_turn_on_10000_records_reads_its_window(
        self, make_stack: StackMaker, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """A whole turn (BeginTurn, the model, the commit) on a 10,000-record session whose
        summary leaves 20 records reads about those, counted in tuples PostgreSQL read. A
        read that grows with the history shows at this size as it did at 100,000 (which
        took 20 to 36 s of COPY in CI): one tuple per record is 10,000 against 120."""
        spy = SpyProvider(max_context_tokens=8_000)
        stack = await make_stack(spy)
        session = await seeded_root(stack, pool, 10_000, english)
        cache = storage_pb2.CompressionCache(summary="so far", covered_until_seq=9_980)
        await stack.storage.PutCompressionCache(
            storage_pb2.PutCompressionCacheRequest(
                space_id=stack.space.sid, session_id=session, cache=cache
            )
        )
        counter = await asyncpg.connect(direct_database_url)
        try:
            reads = RowReads(counter, "records")
            before = await reads.count()
            await send(stack, session, "one more")
            read = await reads.count() - before
        finally:
            await counter.close()
        assert spy.compressions == []
        assert len(spy.turns[0].messages) == 2 + 20 + 1  # identity, summary, the 20, the user
        assert read <= 4 * 20 + 40, f"read {read} tuples for a 20-record window"


class TestGrowth:
    async def test_fifty_turns(self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool) -> None:
        """Over 50 turns of a growing session compression happens, each time within three
        calls, on at most one turn in four (the hysteresis: ~400 tokens of room, ~100 a
        turn), and no request is refused."""
        stack, model = strict
        session = (await stack.root()).id
        for n in range(50):
            await send(stack, session, f"turn {n} " + "some words " * 20)
        runs = compressions_per_turn(model)
        compressing = [n for n in runs if n]
        assert model.refused == []
        assert compressing
        assert max(compressing) <= 3
        assert len(compressing) <= 50 // 4 + 1

    async def test_exact_context_after_compression(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """A compressed turn sends exactly: system prompt, identity, insight, summary, the
        window's records, the user message.

        The turn's catch-up summary is lossy, and its background fold replaces it with a
        complete one once done, which on a busy machine came before the read below (ci1:
        the fold's summary compared with the turn's). A fold run of another gateway holds
        the session's claim here, so this turn's fold ends at once and the stored summary
        read is the one the turn sent."""
        stack, model = strict
        session = await seeded_root(
            stack, pool, 30, english, label="Ops", system_prompt="Be brief."
        )
        await put_insight(stack, session, "Mind the deadline.")
        elsewhere = await stack.storage.ClaimJob(
            storage_pb2.ClaimJobRequest(
                space_id=stack.space.sid,
                session_id=session,
                kind=common_pb2.JOB_KIND_FOLD,
                ttl_s=3_600,
            )
        )
        assert elsewhere.granted
        await send(stack, session, "what now?")
        cache = await compression_cache(stack, session)
        assert cache.lossy  # the turn's own: a catch-up, not folded
        messages = model.turns[-1]["messages"]
        assert [m["role"] for m in messages[:4]] == ["system"] * 4
        assert [m["content"] for m in messages[:4]] == [
            "Be brief.",
            identity("Ops"),
            "Mind the deadline.",
            cache.summary,
        ]
        window = messages[4:-1]
        numbers = [int(m["content"][:6]) for m in window]
        assert numbers == list(range(cache.covered_until_seq, 30))  # record n has seq n + 1
        assert messages[-1] == {"role": "user", "content": "what now?"}
        assert sum(3 + strict_tokens(m["content"]) for m in messages) <= WINDOW


class TestCalibration:
    async def test_a_tokenizer_stricter_than_the_bound(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A model counting English at two characters a token (the gateway's bound assumes
        three) reports it; the gateway's count follows, so a growing session compresses in
        time and no request is refused."""
        async with FakeOpenAI() as fake:
            model = StrictModel(WINDOW, frozenset({ENGLISH.text(COMPRESSOR)}), per_token=2)
            model.attach(fake)
            async with OpenAIProvider(
                model="strict",
                api_key="sk-test",
                base_url=fake.base_url,
                timeout_s=10.0,
                max_retries=0,
                max_context_tokens=WINDOW,
            ) as provider:
                stack = await make_stack(provider, fake_summarizer=False)
                session = (await stack.root()).id
                for n in range(30):
                    await send(stack, session, f"turn {n} " + "plain english words " * 10)
        assert model.refused == []
        assert model.summaries


class TestTurnsAsBefore:
    """DESIGN §4.2's guarantees hold on a long history."""

    async def test_submit_after_the_window_moved(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """A tool result that pushes the context over 80% compresses the older records; the
        call and its result stay together at the end of what the model gets."""
        stack, model = strict
        session = await seeded_root(stack, pool, 4, english)
        model.replies.append(FakeAnswer("", (FakeToolCall("fetch", {"q": 1}, id="c1"),)))
        sent = await send(stack, session, "fetch it", tools=[tool_definition("fetch")])
        assert [c.id for c in sent.pending_tool_calls] == ["c1"]
        before = len(model.summaries)
        assert before == 0  # the send fit
        reply = await submit(stack, session, ("c1", "result " * 230))  # ~540 tokens
        assert reply.assistant.content.startswith("Reply to:")
        assert len(model.summaries) > before
        last = model.turns[-1]["messages"]
        assert last[-2]["role"] == "assistant" and last[-2]["tool_calls"][0]["id"] == "c1"
        assert last[-1]["role"] == "tool" and last[-1]["tool_call_id"] == "c1"
        assert model.refused == []

    async def test_send_while_a_tool_group_is_pending(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """A Send while tool calls are pending drops the unanswered group from the context."""
        stack, model = strict
        session = await seeded_root(stack, pool, 30, english)
        model.replies.append(FakeAnswer("", (FakeToolCall("fetch", {"q": 1}, id="c9"),)))
        await send(stack, session, "fetch it", tools=[tool_definition("fetch")])
        await send(stack, session, "never mind")
        last = model.turns[-1]["messages"]
        assert not any(m.get("tool_calls") for m in last)
        assert last[-1] == {"role": "user", "content": "never mind"}
        stored = (await stack.records(session))[-3:]
        assert [r.role for r in stored] == [
            common_pb2.RECORD_ROLE_ASSISTANT,
            common_pb2.RECORD_ROLE_USER,
            common_pb2.RECORD_ROLE_ASSISTANT,
        ]
        assert [c.id for c in stored[0].tool_calls] == ["c9"]  # kept, never answered
        assert model.refused == []

    async def test_request_id_replay(
        self, strict: tuple[Stack, StrictModel], pool: asyncpg.Pool
    ) -> None:
        """A retried Send with its request_id answers the stored turn without a model call."""
        stack, model = strict
        session = await seeded_root(stack, pool, 300, english)
        first = await send(stack, session, "once", request_id="replay-1")
        calls = len(model.turns)  # (the background fold of the catch-up may go on meanwhile)
        again = await send(stack, session, "once", request_id="replay-1")
        assert again == first and len(model.turns) == calls

    async def test_insight_put_during_the_call_survives(
        self,
        strict: tuple[Stack, StrictModel],
        pool: asyncpg.Pool,
        model: tuple[FakeOpenAI, StrictModel],
    ) -> None:
        """An insight put while the model answers is kept for the next turn; the one the turn
        used is cleared."""
        stack, _ = strict
        fake, _ = model
        session = await seeded_root(stack, pool, 3, english)
        await put_insight(stack, session, "old insight")
        fake.stall(1.0, text="late reply")
        turn = asyncio.ensure_future(send(stack, session, "go"))
        await wait_for(lambda: any(r.path.endswith("/chat/completions") for r in fake.requests))
        await stack.gw.PutInsight(
            agent_pb2.PutInsightRequest(
                space_id=stack.space.sid, session_id=session, content="new insight"
            )
        )
        await turn
        view = await stack.view(session)
        assert view.insight == "new insight"
        assert any(m["content"] == "old insight" for m in fake.chat_bodies()[-1]["messages"])
