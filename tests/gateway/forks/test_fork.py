"""CreateRoot and Fork over gRPC: STELLO-SPEC §6.5 restated, with DESIGN §5's overrides.

Spec §6.5 items 16, 17, 19, 21, 22 and 24 (SplitGuard, runtime sessions, tool
registries) are not in v1 (DESIGN §5.13); items 27-32 (the built-in tool)
belong to the turn loop, not to this part.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import grpc
import pytest

from agent_gateway.forks.compose import ConfigLayer, ContextMode
from agent_gateway.forks.creator import SessionCreator
from agent_gateway.forks.inputs import ForkInput
from agent_gateway.forks.profiles import ProfileRegistry
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import (
    FailedPrecondition,
    FieldViolation,
    Unavailable,
    error_info_reason,
    field_violations,
)
from stello.reasons import LLM_UNAVAILABLE
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    StackMaker,
    close_stack,
    open_stack,
    record,
    row_counts,
    rpc_error,
)
from tests.gateway.llm.support import ENGLISH
from tests.gateway.turns_support import EMPTY_ANSWERS, SpyProvider, answer
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql

INHERIT = common_pb2.FORK_CONTEXT_INHERIT
COMPRESS = common_pb2.FORK_CONTEXT_COMPRESS
NONE = common_pb2.FORK_CONTEXT_NONE


async def config_of(stack: Stack, session_id: str) -> tree_pb2.GetConfigResponse:
    """The tree's stored config answer."""
    reply: tree_pb2.GetConfigResponse = await stack.tree.GetConfig(
        tree_pb2.GetConfigRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return reply


class TestCreateRoot:
    """CreateRoot: defaults apply to roots (DESIGN §5.8), label default 'Root' (§5.10)."""

    async def test_plain_root(self, stack: Stack) -> None:
        """A root with no options is 'Root', active, parentless, with no config and no prompt."""
        root = await stack.root()
        assert (root.label, root.status, root.turn_count) == ("Root", 1, 0)
        assert not root.HasField("parent_id")
        assert root.created_at.seconds > 0
        view = await stack.view(root.id)
        assert view.node.id == root.id
        assert not view.HasField("config")
        assert not view.HasField("system_prompt")
        assert await stack.records(root.id) == []

    async def test_defaults_apply_to_roots(
        self,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
    ) -> None:
        """The gateway's default prompt and skills are the lowest layer of a root too."""
        gateway = await start_gateway(default_system_prompt="D", default_skills=["x"])
        stack = await open_stack(backends, gateway, space, summarizer)
        try:
            root = await stack.root(label="r")
            view = await stack.view(root.id)
            assert view.config.system_prompt == "D"
            assert list(view.config.skills.names) == ["x"]
            assert view.system_prompt == "D"
            mine = await stack.root(system_prompt="mine", skills=common_pb2.SkillList())
            view = await stack.view(mine.id)
            assert view.config.system_prompt == "mine"
            assert view.config.HasField("skills")
            assert list(view.config.skills.names) == []
        finally:
            await close_stack(stack)

    async def test_root_with_profile(self, stack: Stack) -> None:
        """A profile's rendered prompt is prepended, its skills used, its prompt opens the root."""
        root = await stack.root(
            profile="research",
            profile_vars={"topic": "soil", "region": "Gobi"},
            system_prompt="mine",
        )
        view = await stack.view(root.id)
        assert view.system_prompt == "You research soil in Gobi.\n\nmine"
        assert view.config.system_prompt == view.system_prompt
        assert list(view.config.skills.names) == ["search"]
        records = await stack.records(root.id)
        assert [(r.role, r.content) for r in records] == [
            (common_pb2.RECORD_ROLE_ASSISTANT, "Research started.")
        ]


class TestForkPlacementAndConfig:
    """Where a fork goes and what config and prompt it gets (spec §6.5 items 18-25, 34, 35)."""

    async def test_default_parent_is_source(self, stack: Stack) -> None:
        """Item 23: without topology_parent_id the child goes under the source."""
        source = await stack.root()
        child = await stack.fork(source.id, "UI")
        assert child.parent_id == source.id
        assert child.label == "UI"
        view = await stack.view(child.id)
        assert view.node.source_session_id == source.id
        assert list((await stack.view(source.id)).node.children) == [child.id]

    async def test_explicit_topology_parent(self, stack: Stack) -> None:
        """Item 25: topology_parent_id places the child elsewhere; its source stays the source."""
        source = await stack.root()
        other = await stack.root(label="other")
        child = await stack.fork(source.id, topology_parent_id=other.id)
        assert child.parent_id == other.id
        assert (await stack.view(child.id)).node.source_session_id == source.id

    async def test_source_config_prompt_inherited(self, stack: Stack) -> None:
        """Item 20: the source's config prompt (roots too) is the child's unless overridden."""
        root = await stack.root(system_prompt="root sys")
        child = await stack.fork(root.id)
        view = await stack.view(child.id)
        assert view.config.system_prompt == "root sys"
        assert view.system_prompt == "root sys"

    async def test_prompt_and_opening_verbatim(self, stack: Stack) -> None:
        """Item 18: system_prompt and prompt reach the child verbatim (prompt as assistant)."""
        source = await stack.root()
        child = await stack.fork(source.id, system_prompt="you are UI expert", prompt="hello")
        view = await stack.view(child.id)
        assert view.system_prompt == "you are UI expert"
        records = await stack.records(child.id)
        assert [(r.seq, r.role, r.content) for r in records] == [
            (1, common_pb2.RECORD_ROLE_ASSISTANT, "hello")
        ]

    async def test_nothing_composed_stores_no_config(self, stack: Stack) -> None:
        """Item 34: with neither a prompt nor skills anywhere, no config is written."""
        source = await stack.root()
        child = await stack.fork(source.id)
        assert not (await config_of(stack, child.id)).HasField("config")

    async def test_source_slot_inherited_without_config_prompt(self, stack: Stack) -> None:
        """Item 35: no composed prompt: the child gets the source's slot, its config none."""
        source = await stack.root()
        await stack.storage.PutSystemPrompt(
            storage_pb2.PutSystemPromptRequest(
                space_id=stack.space.sid, session_id=source.id, content="slot only"
            )
        )
        child = await stack.fork(source.id, skills=common_pb2.SkillList())
        view = await stack.view(child.id)
        assert view.system_prompt == "slot only"
        assert not view.config.HasField("system_prompt")
        assert view.config.HasField("skills") and list(view.config.skills.names) == []

    async def test_profile_modes_and_skills(self, make_stack: StackMaker, tmp_path: Path) -> None:
        """Preset ignores the caller's prompt; append puts the profile last; [] means no skills."""
        skills_file = tmp_path / "skills.toml"
        skills_file.write_text('[[skills]]\nname = "a"\ndescription = "d"\ncontent = "c"\n')
        stack = await make_stack(SpyProvider(), skills_file=skills_file)
        source = await stack.root(system_prompt="src", skills=common_pb2.SkillList(names=["a"]))
        preset = await stack.fork(source.id, profile="preset", system_prompt="F")
        appended = await stack.fork(source.id, profile="append", system_prompt="F")
        view = await stack.view(preset.id)
        assert view.system_prompt == "Preset role."
        assert list(view.config.skills.names) == ["a"]
        view = await stack.view(appended.id)
        assert view.system_prompt == "F\n\nConstraints."
        assert view.config.HasField("skills")
        assert list(view.config.skills.names) == []

    async def test_memory_and_insight_not_copied(self, stack: Stack) -> None:
        """Spec §4.4.4 step 6: memory and insight stay with the source, which is unchanged."""
        source = await stack.root(system_prompt="s")
        await stack.append(source.id, record("user", "u"))
        for rpc, cls in (
            ("PutMemory", agent_pb2.PutMemoryRequest),
            ("PutInsight", agent_pb2.PutInsightRequest),
        ):
            await getattr(stack.gw, rpc)(
                cls(space_id=stack.space.sid, session_id=source.id, content="x")
            )
        child = await stack.fork(source.id, context=INHERIT)
        view = await stack.view(child.id)
        assert not view.HasField("memory")
        assert not view.HasField("insight")
        source_view = await stack.view(source.id)
        assert (source_view.memory, source_view.insight, source_view.system_prompt) == (
            "x",
            "x",
            "s",
        )
        assert len(await stack.records(source.id)) == 1

    async def test_archived_source_and_parent_allowed(self, stack: Stack) -> None:
        """DESIGN §5.4: forking from an archived source, or under an archived parent, is allowed."""
        source = await stack.root()
        parent = await stack.root(label="p")
        for session in (source, parent):
            await stack.gw.Archive(
                agent_pb2.ArchiveRequest(space_id=stack.space.sid, session_id=session.id)
            )
        child = await stack.fork(source.id, topology_parent_id=parent.id)
        assert child.status == common_pb2.SESSION_STATUS_ACTIVE
        assert child.parent_id == parent.id

    async def test_concurrent_forks_get_distinct_indexes(self, stack: Stack) -> None:
        """Item 26: forks run in parallel; ten at once under one source get indexes 0..9."""
        source = await stack.root()
        other = await stack.root()
        children = await asyncio.gather(
            *(stack.fork(source.id, f"c{i}") for i in range(10)), stack.fork(other.id)
        )
        nodes = [(await stack.view(c.id)).node for c in children[:10]]
        assert sorted(n.index for n in nodes) == list(range(10))


async def put_cache(stack: Stack, session_id: str, cache: storage_pb2.CompressionCache) -> None:
    """Store a summary through storage (puts of rising seqs keep the older ones)."""
    await stack.storage.PutCompressionCache(
        storage_pb2.PutCompressionCacheRequest(
            space_id=stack.space.sid, session_id=session_id, cache=cache
        )
    )


class TestForkContext:
    """NONE, INHERIT (all or up to a seq) and COMPRESS (spec §6.5 items 1-15, DESIGN §5.9)."""

    async def test_inherit_copies_sanitised_records_with_timestamps(self, stack: Stack) -> None:
        """Item 1: INHERIT copies records (timestamps kept, incomplete tool groups dropped)."""
        source = await stack.root(system_prompt="role")
        dangling = record("assistant", "", tool_calls=[common_pb2.ToolCall(id="t1", name="x")])
        stored = await stack.append(
            source.id,
            record("user", "q1"),
            record("assistant", "a1"),
            record("user", "q2"),
            dangling,
        )
        child = await stack.fork(source.id, context=INHERIT, prompt="opening")
        records = await stack.records(child.id)
        assert [(r.seq, r.content) for r in records] == [
            (1, "q1"),
            (2, "a1"),
            (3, "q2"),
            (4, "opening"),
        ]
        assert [r.created_at for r in records[:3]] == [r.created_at for r in stored[:3]]
        assert (await stack.view(child.id)).system_prompt == "role"
        assert stack.summarizer.calls == []

    async def test_inherit_until_seq(self, stack: Stack) -> None:
        """DESIGN §5.9: inherit_until_seq copies only records with seq <= it."""
        source = await stack.root()
        await stack.append(source.id, *(record("user", f"m{i}") for i in range(1, 6)))
        child = await stack.fork(source.id, context=INHERIT, inherit_until_seq=3)
        assert [r.content for r in await stack.records(child.id)] == ["m1", "m2", "m3"]

    async def test_none_context_copies_nothing(self, stack: Stack) -> None:
        """NONE (and the default) starts the child with no records."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"))
        explicit = await stack.fork(source.id, context=NONE)
        default = await stack.fork(source.id)
        assert await stack.records(explicit.id) == []
        assert await stack.records(default.id) == []

    async def test_compress(self, stack: Stack) -> None:
        """Items 2, 10, 15: one summary call; config and slot get the <parent_context> prompt."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"), record("assistant", "a"))
        child = await stack.fork(source.id, context=COMPRESS, system_prompt="role")
        expected = "role\n\n<parent_context>\nsummary of 2 records: q..a\n</parent_context>"
        view = await stack.view(child.id)
        assert view.config.system_prompt == expected
        assert view.system_prompt == expected
        assert stack.summarizer.calls == [["q", "a"]]
        assert await stack.records(child.id) == []

    async def test_compress_starts_from_the_source_summary(self, stack: Stack) -> None:
        """DESIGN §4.3: COMPRESS folds the source's newest summary and only the records after
        it; a summary with nothing after it is the parent context as it is (no call)."""
        source = await stack.root()
        await stack.append(source.id, *(record("user", f"m{i}") for i in range(1, 6)))
        cache = storage_pb2.CompressionCache(summary="the story so far", covered_until_seq=3)
        await put_cache(stack, source.id, cache)
        child = await stack.fork(source.id, context=COMPRESS, system_prompt="role")
        assert stack.summarizer.calls == [["m4", "m5"]]
        assert stack.summarizer.given == [("the story so far", 0)]
        assert "summary of 2 records: m4..m5" in (await stack.view(child.id)).system_prompt
        await put_cache(
            stack, source.id, storage_pb2.CompressionCache(summary="all", covered_until_seq=5)
        )
        later = await stack.fork(source.id, context=COMPRESS)
        assert len(stack.summarizer.calls) == 1
        assert (await stack.view(later.id)).system_prompt == (
            "<parent_context>\nall\n</parent_context>"
        )

    async def test_inherit_starts_from_the_source_summary(self, stack: Stack) -> None:
        """DESIGN §4.3: an INHERIT child starts from the source's newest summary at or below
        its cut, in the child's own numbering."""
        source = await stack.root()
        await stack.append(source.id, *(record("user", f"m{i}") for i in range(1, 9)))
        for summary, seq in (("to 2", 2), ("to 4", 4), ("to 7", 7)):
            cache = storage_pb2.CompressionCache(summary=summary, covered_until_seq=seq)
            await put_cache(stack, source.id, cache)
        child = await stack.fork(source.id, context=INHERIT, inherit_until_seq=5)
        reply = await stack.storage.GetCompressionCache(
            storage_pb2.GetCompressionCacheRequest(space_id=stack.space.sid, session_id=child.id)
        )
        assert (reply.cache.summary, reply.cache.covered_until_seq) == ("to 4", 4)
        whole = await stack.fork(source.id, context=INHERIT)
        reply = await stack.storage.GetCompressionCache(
            storage_pb2.GetCompressionCacheRequest(space_id=stack.space.sid, session_id=whole.id)
        )
        assert (reply.cache.summary, reply.cache.covered_until_seq) == ("to 7", 7)

    async def test_compress_empty_source(self, stack: Stack) -> None:
        """Items 3, 12: an empty source makes no summary call and leaves the prompt as is."""
        source = await stack.root()
        child = await stack.fork(source.id, context=COMPRESS, system_prompt="role")
        assert (await stack.view(child.id)).system_prompt == "role"
        assert stack.summarizer.calls == []

    async def test_compress_without_prompt(self, stack: Stack) -> None:
        """Item 4: with no prompt at all the block alone (no blank lines first: issue 36)."""
        source = await stack.root()
        await stack.append(source.id, record("user", "X"))
        child = await stack.fork(source.id, context=COMPRESS)
        assert (await stack.view(child.id)).system_prompt == (
            "<parent_context>\nsummary of 1 records: X..X\n</parent_context>"
        )

    async def test_inherit_past_the_end_is_out_of_range(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """inherit_until_seq beyond the source's last seq: OUT_OF_RANGE naming it,
        before anything is written (no session row, provisional or not); the end itself and
        a fork's own inherited end are fine."""
        source = await stack.root()
        await stack.append(source.id, *(record("user", f"m{n}") for n in range(1, 5)))
        before = await row_counts(pool, stack.space)
        error = await rpc_error(stack.fork(source.id, context=INHERIT, inherit_until_seq=99))
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE
        assert error.details() == ("inherit_until_seq: 99 is beyond the source's last seq (4)")
        assert field_violations(error) == [
            FieldViolation("inherit_until_seq", "99 is beyond the source's last seq (4)")
        ]
        assert await row_counts(pool, stack.space) == before
        child = await stack.fork(source.id, context=INHERIT, inherit_until_seq=4)
        assert [r.seq for r in await stack.records(child.id)] == [1, 2, 3, 4]
        grandchild = await stack.fork(child.id, context=INHERIT, inherit_until_seq=4)
        assert len(await stack.records(grandchild.id)) == 4
        error = await rpc_error(stack.fork(child.id, context=INHERIT, inherit_until_seq=5))
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE

    async def test_summary_error_propagates_and_creates_nothing(self, stack: Stack) -> None:
        """Item 5: the summariser's error is the fork's status; nothing is created."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"))
        stack.summarizer.error = Unavailable("provider down")
        error = await rpc_error(stack.fork(source.id, context=COMPRESS))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        assert "provider down" in (error.details() or "")
        assert list((await stack.view(source.id)).node.children) == []

    @pytest.mark.parametrize("text", EMPTY_ANSWERS)
    async def test_an_empty_summary_creates_nothing(
        self, text: str, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """The gateway's own summariser answered with no text (empty, or reasoning alone,
        closed or cut off): the fork fails UNAVAILABLE LLM_UNAVAILABLE as on a provider
        failure and creates no session (explore10 F1: the child got an empty
        <parent_context>); answered, the same fork is made."""
        spy = SpyProvider()
        stack = await make_stack(spy, fake_summarizer=False)
        source = await stack.root(system_prompt="ROOT PROMPT")
        await stack.append(source.id, record("user", "q"), record("assistant", "a"))
        before = await row_counts(pool, stack.space)
        spy.then(answer(text))
        error = await rpc_error(stack.fork(source.id, context=COMPRESS))
        assert (error.code(), error_info_reason(error)) == (
            grpc.StatusCode.UNAVAILABLE,
            LLM_UNAVAILABLE,
        )
        assert "the model answered nothing to a compress fork's summary of its source" in (
            error.details() or ""
        )
        assert await row_counts(pool, stack.space) == before
        assert list((await stack.view(source.id)).node.children) == []
        spy.then(answer("<think>so</think>the parent's story"))
        child = await stack.fork(source.id, context=COMPRESS)
        assert (await stack.view(child.id)).system_prompt == (
            "ROOT PROMPT\n\n<parent_context>\nthe parent's story\n</parent_context>"
        )

    async def test_profile_context_and_override(self, stack: Stack) -> None:
        """Items 13, 14: a profile's compress context applies; a requested one beats it."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"))
        await stack.fork(source.id, profile="compressor")
        await stack.fork(
            source.id,
            profile="research",
            profile_vars={"topic": "t", "region": "r"},
            context=COMPRESS,
        )
        assert stack.summarizer.calls == [["q"], ["q"]]
        inherited = await stack.fork(
            source.id, profile="research", profile_vars={"topic": "t", "region": "r"}
        )
        assert [r.content for r in await stack.records(inherited.id)] == ["q", "Research started."]


class TestProfileVars:
    """profile_vars must be read by the request's profile (README "Profiles"): else refused."""

    async def test_vars_without_profile_refused(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """profile_vars without a profile is INVALID_ARGUMENT naming each key, before anything
        is written or the summariser (a COMPRESS fork's model call) is called."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"))
        before = await row_counts(pool, stack.space)
        error = await rpc_error(
            stack.fork(source.id, context=COMPRESS, profile_vars={"topic": "t", "b": "2"})
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [
            "profile_vars['b']",
            "profile_vars['topic']",
        ]
        assert "without a profile" in field_violations(error)[1].description
        error = await rpc_error(stack.root(profile_vars={"topic": "t"}))
        assert [v.field for v in field_violations(error)] == ["profile_vars['topic']"]
        assert await row_counts(pool, stack.space) == before
        assert stack.summarizer.calls == []

    async def test_unknown_variable_refused(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """A value for a variable the profile does not have is INVALID_ARGUMENT naming it, with
        the profile's variables, before anything is written or any model call."""
        source = await stack.root()
        await stack.append(source.id, record("user", "q"))
        before = await row_counts(pool, stack.space)
        error = await rpc_error(
            stack.fork(
                source.id,
                profile="research",
                profile_vars={"topic": "t", "region": "r", "regoin": "typo"},
                context=COMPRESS,
            )
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field_violations(error) == [
            FieldViolation(
                "profile_vars['regoin']",
                "profile 'research' has no template variable of this name "
                "(its variables: topic, region)",
            )
        ]
        error = await rpc_error(stack.fork(source.id, profile="compressor", profile_vars={"x": ""}))
        assert [v.field for v in field_violations(error)] == ["profile_vars['x']"]
        assert "(its variables: none)" in (error.details() or "")
        error = await rpc_error(
            stack.root(profile="research", profile_vars={"topic": "t", "z": ""})
        )
        assert [v.field for v in field_violations(error)] == ["profile_vars", "profile_vars['z']"]
        assert await row_counts(pool, stack.space) == before
        assert stack.summarizer.calls == []


class TestCompressWithoutSummarizer:
    async def test_the_refusal_names_the_context_as_clients_write_it(self) -> None:
        """A creator without a summariser refuses a compress fork in the words clients write
        (context="compress", `--context compress`): it said "COMPRESS forks need ...".
        The served gateway always has one (create_app builds it over the provider)."""
        creator = SessionCreator(
            None,  # type: ignore[arg-type]  # refused before the tree is called
            None,  # type: ignore[arg-type]  # nor storage
            None,  # type: ignore[arg-type]  # nor the saga
            ProfileRegistry(),
            ConfigLayer(),
            budget_s=1.0,
            summarizer=None,
            prompts=ENGLISH,
        )
        fork = ForkInput(uuid.uuid4(), uuid.uuid4(), "child", context=ContextMode.COMPRESS)
        with pytest.raises(FailedPrecondition) as refused:
            await creator.fork(None, fork)  # type: ignore[arg-type]  # no call is made
        assert str(refused.value) == (
            "a fork with context compress needs an LLM provider, and none is configured"
        )
        assert refused.value.reason == "PROVIDER_NOT_CONFIGURED"
