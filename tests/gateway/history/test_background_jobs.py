"""Background work once per session, bounded and visible (DESIGN §4.8, issue #33 item 3).

Consolidations, the background fold and lease releases run through the
gateway's one runner: one job per (session, kind) across every gateway
replica, decided in the database; a model-call budget per run, progress saved
chunk by chunk (memory compare-and-set: a PutMemory made meanwhile wins);
claims taken over when their gateway dies; clean stops; metrics by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.app import GatewayClients
from agent_gateway.clients import Caller
from agent_gateway.llm import Completion, LLMMessage, LLMProvider, ToolSpec
from agent_gateway.llm.prompts.texts import CONSOLIDATOR
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import Unavailable
from stello.serving.server import shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.gateway.conftest import Backends, Stack, StackMaker, gateway_clients, rpc_error
from tests.gateway.history.test_consolidate import SUCCEEDED, counted
from tests.gateway.llm.support import ENGLISH
from tests.gateway.processes import gateway_process
from tests.gateway.turns_support import Call, SpyProvider, answer, send, wait_for
from tests.support.fixtures import TestSpace
from tests.support.history import seed_history
from tests.support.metrics import sample

pytestmark = pytest.mark.sql

CONSOLIDATOR_PROMPT = ENGLISH.text(CONSOLIDATOR)
DONE = common_pb2.JOB_STATUS_DONE
BUDGET_SPENT = common_pb2.JOB_STATUS_BUDGET_SPENT


@dataclass(slots=True)
class GatedConsolidations:
    """An echo model (SpyProvider) whose consolidation calls wait for `gate`; it records
    them and the most that were ever in flight at once."""

    spy: SpyProvider = field(default_factory=SpyProvider)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    consolidations: list[list[LLMMessage]] = field(default_factory=list)
    in_flight: int = 0
    most: int = 0

    @property
    def max_context_tokens(self) -> int:
        """The spy's window."""
        return self.spy.max_context_tokens

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """A consolidation waits for the gate; every call answers as the spy does."""
        if messages and messages[0].content == CONSOLIDATOR_PROMPT:
            self.consolidations.append(list(messages))
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            try:
                await self.gate.wait()
            finally:
                self.in_flight -= 1
        return await self.spy.complete(messages, tools=tools, max_tokens=max_tokens)

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Any:
        """The spy's stream."""
        return self.spy.stream(messages, tools=tools, max_tokens=max_tokens)


async def consolidate(stack: Stack, session_id: str, **call: Any) -> agent_pb2.ConsolidateResponse:
    """Consolidate through the gateway."""
    reply: agent_pb2.ConsolidateResponse = await stack.gw.Consolidate(
        agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=session_id), **call
    )
    return reply


async def stored_memory(stack: Stack, session_id: str) -> storage_pb2.GetMemoryResponse:
    """The memory as storage has it (content, covered seq, version)."""
    reply: storage_pb2.GetMemoryResponse = await stack.storage.GetMemory(
        storage_pb2.GetMemoryRequest(space_id=stack.space.sid, session_id=session_id)
    )
    return reply


async def job(stack: Stack, session_id: str, kind: int) -> common_pb2.BackgroundJob | None:
    """The session's job of `kind` as GetSession's progress shows it."""
    for found in (await stack.view(session_id)).progress.jobs:
        if found.kind == kind:
            return found
    return None


@contextlib.asynccontextmanager
async def watching_covered(stack: Stack, session_id: str) -> AsyncIterator[list[int]]:
    """Every covered seq the stored memory shows, polled while the block runs."""
    seen: list[int] = []

    async def poll() -> None:
        while True:
            seen.append((await stored_memory(stack, session_id)).covered_until_seq)
            await asyncio.sleep(0.005)

    task = asyncio.create_task(poll())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass(slots=True)
class ClaimsAsked:
    """The ClaimJob calls of one gateway's runner, by the request id of the call its job came
    from (a turn's, a Consolidate's): whether storage granted each, in order."""

    granted: dict[str, list[bool]] = field(default_factory=dict)

    def watch(self, clients: GatewayClients) -> None:
        """Record the ClaimJob answers `clients` get."""
        claim_job = clients.storage.claim_job

        async def recorded(
            caller: Caller,
            space_id: uuid.UUID,
            session_id: uuid.UUID,
            kind: common_pb2.JobKind,
            ttl_s: int,
        ) -> storage_pb2.ClaimJobResponse:
            reply = await claim_job(caller, space_id, session_id, kind, ttl_s)
            self.granted.setdefault(caller.request_id, []).append(reply.granted)
            return reply

        clients.storage.claim_job = recorded  # type: ignore[method-assign]

    def refused(self, jobs: int, times: int) -> bool:
        """Whether `jobs` jobs each met another run's claim `times` times in a row from their
        first ask (asking again proves a job waited: one that ran instead does not ask)."""
        met = [asked for asked in self.granted.values() if asked[:times] == [False] * times]
        return len(met) >= jobs


ClaimsStackMaker = Callable[..., Awaitable[tuple[Stack, ClaimsAsked]]]


@pytest.fixture(name="make_claims_stack")
def _make_claims_stack(
    make_stack: StackMaker, backends: Backends, settings: StelloSettings, local_calls: bool
) -> ClaimsStackMaker:
    """`make_stack`, with the ClaimJob answers its gateway's runner gets recorded."""

    async def make(provider: LLMProvider, **overrides: Any) -> tuple[Stack, ClaimsAsked]:
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        claims = ClaimsAsked()
        claims.watch(clients)
        return await make_stack(provider, clients=clients, **overrides), claims

    return make


@dataclass(slots=True)
class EmptyBackgroundFolds(SpyProvider):
    """A spy whose compression calls made after the first turn call (the background fold's)
    answer only reasoning, cut off by max_tokens."""

    def _answer(self, call: Call) -> Completion:
        if call.compression and self.turns:
            return answer("<think>the backlog: first")
        return SpyProvider._answer(self, call)


def numbered(index: int) -> tuple[str, str]:
    """Records of about 200 characters that name their seq (record i has seq i + 1)."""
    role = "user" if index % 2 == 0 else "assistant"
    text = f"{index + 1:06d} words of a long conversation "
    return role, (text * 6)[:200]


def first_seq(messages: list[LLMMessage]) -> int:
    """The seq of the first transcript line of a consolidation call."""
    transcript = messages[1].content.rsplit("Conversation:\n", 1)[1]
    return int(transcript.splitlines()[0].split(": ", 1)[1][:6])


async def seeded(stack: Stack, pool: asyncpg.Pool, count: int) -> str:
    """A root with `count` numbered records seeded by COPY."""
    root = await stack.root()
    async with pool.acquire() as con:
        await seed_history(con, stack.space.id, uuid.UUID(root.id), count, numbered)
    return root.id


class TestOncePerSession:
    async def test_two_replicas_and_a_manual_call_run_one_consolidation(
        self, make_stack: StackMaker, make_claims_stack: ClaimsStackMaker
    ) -> None:
        """With two gateway replicas consolidating every turn and a manual Consolidate racing
        the automatic one, one consolidation runs at a time (the other replica's automatic
        one and the manual call wait and find nothing left), the memory's covered
        seq only grows, and a PutMemory made while it runs survives: the consolidation
        starts over from it (on main: two consolidations at once, the put overwritten)."""
        model = GatedConsolidations()
        settings = {"consolidate_every_n_turns": 1, "job_claim_ttl_s": 3}
        a = await make_stack(model, **settings)
        b, b_claims = await make_claims_stack(model, **settings)
        root = (await a.root()).id
        async with watching_covered(a, root) as covered:
            await send(a, root, "one")
            await wait_for(lambda: model.in_flight == 1)
            await send(b, root, "two")
            manual = asyncio.create_task(consolidate(b, root))
            await a.gw.PutMemory(
                agent_pb2.PutMemoryRequest(
                    space_id=a.space.sid, session_id=root, content="the user's memory"
                )
            )
            # B's automatic run and its manual call each met A's claim and asked again (or,
            # broken, one of them consolidates meanwhile)
            await wait_for(lambda: b_claims.refused(2, times=2) or len(model.consolidations) > 1)
            assert model.most == 1 and len(model.consolidations) == 1
            model.gate.set()
            reply = await manual
        assert model.most == 1
        assert len(model.consolidations) == 2  # A's first, then A's again from the put
        assert model.consolidations[1][1].content.startswith(
            "Current summary:\nthe user's memory\n\nConversation:\nuser: one\n"
        )
        memory = await stored_memory(a, root)
        assert "the user's memory" in memory.content
        assert memory.covered_until_seq == 4
        assert covered == sorted(covered) and covered[-1] == 4
        assert (reply.status, reply.covered_until_seq, reply.last_seq) == (DONE, 4, 4)
        assert reply.model_calls == 0 and reply.memory == memory.content
        state = await job(a, root, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None and not state.claimed
        await wait_for(lambda: runs_of(a, root, 3))  # A's, then B's and the manual one

    @pytest.mark.parametrize("replicas", [1, 2])
    async def test_a_turn_committed_during_a_run_is_consolidated_after_it(
        self, make_stack: StackMaker, make_claims_stack: ClaimsStackMaker, replicas: int
    ) -> None:
        """Consolidating every turn, the second turn commits while the first turn's
        consolidation, which read the records before it, is running: its own trigger is
        not lost (in the same gateway one more run follows; in another, that one waits for
        the run and then folds what it left), so once the turns stop the memory covers the
        last one. On main the trigger was dropped and the memory stayed at seq 2 of 4
        (explore4 F8). Each run is counted in the automatic consolidations' metric (the
        run that followed in the same gateway was not)."""
        model = GatedConsolidations()
        settings = {"consolidate_every_n_turns": 1, "job_claim_ttl_s": 3}
        a = await make_stack(model, **settings)
        b, b_claims = (a, None) if replicas == 1 else await make_claims_stack(model, **settings)
        root = (await a.root()).id
        await send(a, root, "one")
        await wait_for(lambda: model.in_flight == 1)
        await send(b, root, "two")
        # The second trigger meets the run under way: in the same gateway before Send
        # answers (the turn's commit asks for the run); in another, once its claim is refused.
        if b_claims is not None:
            await wait_for(lambda: b_claims.refused(1, times=1))
        model.gate.set()

        async def covers_all() -> bool:
            return (await stored_memory(a, root)).covered_until_seq == 4

        await wait_for(covers_all, within_s=10)
        assert model.most == 1
        assert [m[1].content.rsplit("\n", 1)[-1] for m in model.consolidations][-1] == (
            "assistant: echo: two"
        )
        gateways = {id(stack): stack for stack in (a, b)}.values()
        await wait_for(lambda: sum(counted(stack, SUCCEEDED) for stack in gateways) == 2)


async def runs_of(stack: Stack, session_id: str, runs: int) -> bool:
    """Whether the session's consolidate job has been run `runs` times."""
    state = await job(stack, session_id, common_pb2.JOB_KIND_CONSOLIDATE)
    return state is not None and state.runs == runs


class TestBudget:
    @pytest.mark.slow
    async def test_a_100000_record_consolidation_saves_and_stops_at_its_budget(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A manual Consolidate of a 100,000-record session makes at most its budget of
        model calls, saves the memory after each chunk, and answers BUDGET_SPENT with how
        far it got; the next call continues right after (on main: every record folded in
        one call, with no cap)."""
        spy = SpyProvider(max_context_tokens=4_000)
        stack = await make_stack(spy, consolidate_max_calls=3)
        session = await seeded(stack, pool, 100_000)
        first = await consolidate(stack, session)
        assert (first.status, first.model_calls, first.last_seq) == (BUDGET_SPENT, 3, 100_000)
        assert 0 < first.covered_until_seq < 1_000
        memory = await stored_memory(stack, session)
        assert (memory.content, memory.covered_until_seq) == (first.memory, first.covered_until_seq)
        assert memory.version == 3  # one save per chunk
        calls = [c.messages for c in spy.calls if c.helper]
        assert first_seq(calls[0]) == 1
        second = await consolidate(stack, session)
        assert second.status == BUDGET_SPENT and second.covered_until_seq > first.covered_until_seq
        later = [c.messages for c in spy.calls if c.helper][3]
        assert first_seq(later) == first.covered_until_seq + 1
        assert later[1].content.startswith(f"Current summary:\n{first.memory[:20]}")
        state = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None
        assert (state.status, state.covered_until_seq, state.model_calls, state.runs) == (
            BUDGET_SPENT,
            second.covered_until_seq,
            3,
            2,
        )

    async def test_progress_is_saved_before_a_failure(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A model failure on the third chunk leaves the memory of the first two saved, with
        the seq they cover, and the job FAILED (on main: the memory was left unchanged)."""
        spy = SpyProvider(max_context_tokens=2_000)
        spy.then_helper(answer("after one"), answer("after two"), Unavailable("model down"))
        stack = await make_stack(spy)
        session = await seeded(stack, pool, 200)
        error = await rpc_error(consolidate(stack, session))
        assert error.code() is grpc.StatusCode.UNAVAILABLE
        calls = [c.messages for c in spy.calls if c.helper]
        assert len(calls) == 3
        memory = await stored_memory(stack, session)
        assert (memory.content, memory.covered_until_seq) == ("after two", first_seq(calls[2]) - 1)
        state = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None and state.status == common_pb2.JOB_STATUS_FAILED
        assert not state.claimed and state.covered_until_seq == memory.covered_until_seq


class TestDeadline:
    async def test_the_run_outlives_its_callers_deadline(self, make_stack: StackMaker) -> None:
        """A manual Consolidate whose deadline passes while the model works answers
        DEADLINE_EXCEEDED; the consolidation goes on and saves the memory."""
        model = GatedConsolidations()
        stack = await make_stack(model)
        session = (await stack.root()).id
        await send(stack, session, "one")
        error = await rpc_error(consolidate(stack, session, timeout=0.5))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        model.gate.set()

        async def saved() -> bool:
            return (await stored_memory(stack, session)).covered_until_seq == 2

        async def ended() -> bool:  # the job's end is written after the memory (ci1 of stop 48)
            state = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
            return state is not None and state.status != common_pb2.JOB_STATUS_RUNNING

        await wait_for(saved, within_s=10)
        await wait_for(ended, within_s=10)
        state = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None and (state.status, state.claimed) == (DONE, False)


class TestTakeover:
    async def test_a_killed_gateways_consolidation_is_taken_over(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        backends: Backends,
        database_env: dict[str, str],
        space: TestSpace,
    ) -> None:
        """A gateway killed (SIGKILL) in the middle of a consolidation keeps its job's claim
        until it expires; then another gateway's Consolidate takes the job over and
        continues from the memory the dead one saved, to the end."""
        spy = SpyProvider(max_context_tokens=2_000)
        stack = await make_stack(spy, job_claim_ttl_s=2, consolidate_max_calls=100)
        session = await seeded(stack, pool, 600)
        slow = {
            "STELLO_GATEWAY_ECHO_MAX_CONTEXT_TOKENS": "2000",
            "STELLO_GATEWAY_ECHO_DELAY_S": "0.3",
            "STELLO_GATEWAY_JOB_CLAIM_TTL_S": "2",
        }
        async with gateway_process(backends, database_env, "", **slow) as (process, address):
            channel = grpc.aio.insecure_channel(address)
            dead = agent_pb2_grpc.AgentGatewayStub(channel)
            call = dead.Consolidate(
                agent_pb2.ConsolidateRequest(space_id=space.sid, session_id=session),
                metadata=(("authorization", f"Bearer {space.key}"),),
            )
            running = asyncio.ensure_future(call)

            async def saved() -> bool:
                return (await stored_memory(stack, session)).covered_until_seq > 0

            await wait_for(saved, within_s=30)
            process.send_signal(signal.SIGKILL)
            await process.wait()
            with contextlib.suppress(grpc.aio.AioRpcError):
                await running
            await channel.close()
        left = await stored_memory(stack, session)
        held = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert held is not None and held.status == common_pb2.JOB_STATUS_RUNNING
        assert 0 < left.covered_until_seq < 600
        reply = await consolidate(stack, session)
        assert (reply.status, reply.covered_until_seq) == (DONE, 600)
        calls = [c.messages for c in spy.calls if c.helper]
        assert first_seq(calls[0]) == left.covered_until_seq + 1
        assert calls[0][1].content.startswith(f"Current summary:\n{left.content[:30]}")
        state = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None and (state.runs, state.status) == (2, DONE)

    async def test_a_killed_gateways_job_is_taken_over_with_no_trigger(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        backends: Backends,
        database_env: dict[str, str],
        space: TestSpace,
    ) -> None:
        """A gateway killed (SIGKILL) in the middle of a consolidation leaves its job; two
        gateways started afterwards with a jobs key take it over by themselves (no call
        names the session): one of them finishes it from the memory the dead one saved,
        each chunk folded once (on main: the job stayed RUNNING with its claim expired until
        the session's next Consolidate)."""
        spy = SpyProvider(max_context_tokens=2_000)
        reader = await make_stack(SpyProvider())
        session = await seeded(reader, pool, 600)
        left = await killed_mid_consolidation(reader, session, backends, database_env, space)
        takeover = {
            "job_claim_ttl_s": 2,
            "consolidate_max_calls": 100,
            "jobs_key": space.key,
            "job_takeover_interval_s": 0.5,
        }
        await make_stack(spy, **takeover)
        await make_stack(spy, **takeover)

        async def done() -> bool:
            state = await job(reader, session, common_pb2.JOB_KIND_CONSOLIDATE)
            return state is not None and state.status == DONE

        await wait_for(done, within_s=60)
        memory = await stored_memory(reader, session)
        assert memory.covered_until_seq == 600
        starts = [first_seq(c.messages) for c in spy.calls if c.helper]
        assert starts[0] == left.covered_until_seq + 1
        assert starts == sorted(set(starts))  # each chunk once, in order
        assert spy.calls[0].messages[1].content.startswith(f"Current summary:\n{left.content[:30]}")
        state = await job(reader, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None and (state.runs, state.claimed) == (2, False)

    async def test_a_stopped_job_is_taken_over_at_start(
        self, make_stack: StackMaker, space: TestSpace
    ) -> None:
        """A job its gateway stopped on shutdown (status STOPPED) is continued by a gateway
        that starts with a jobs key, without any call naming the session."""
        model = GatedConsolidations()
        a = await make_stack(model, job_claim_ttl_s=600, background_stop_grace_s=0.1)
        session = (await a.root()).id
        await send(a, session, "one")
        running = asyncio.create_task(consolidate(a, session))
        await wait_for(lambda: model.in_flight == 1)
        await shutdown(a.gateway.app, a.gateway.server, 0)
        with contextlib.suppress(grpc.aio.AioRpcError):
            await running
        b = await make_stack(SpyProvider(), jobs_key=space.key, job_takeover_interval_s=0.5)

        async def done() -> bool:
            state = await job(b, session, common_pb2.JOB_KIND_CONSOLIDATE)
            return state is not None and state.status == DONE

        await wait_for(done, within_s=20)
        assert (await stored_memory(b, session)).covered_until_seq == 2


async def killed_mid_consolidation(
    stack: Stack,
    session: str,
    backends: Backends,
    database_env: dict[str, str],
    space: TestSpace,
) -> storage_pb2.GetMemoryResponse:
    """Consolidate `session` in a gateway process (claim TTL 2 s, slow echo model) and kill
    it once a chunk is saved; the memory it left."""
    slow = {
        "STELLO_GATEWAY_ECHO_MAX_CONTEXT_TOKENS": "2000",
        "STELLO_GATEWAY_ECHO_DELAY_S": "0.3",
        "STELLO_GATEWAY_JOB_CLAIM_TTL_S": "2",
    }
    async with gateway_process(backends, database_env, "", **slow) as (process, address):
        channel = grpc.aio.insecure_channel(address)
        call = agent_pb2_grpc.AgentGatewayStub(channel).Consolidate(
            agent_pb2.ConsolidateRequest(space_id=space.sid, session_id=session),
            metadata=(("authorization", f"Bearer {space.key}"),),
        )
        running = asyncio.ensure_future(call)

        async def saved() -> bool:
            return (await stored_memory(stack, session)).covered_until_seq > 0

        await wait_for(saved, within_s=30)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        with contextlib.suppress(grpc.aio.AioRpcError):
            await running
        await channel.close()
    left = await stored_memory(stack, session)
    held = await job(stack, session, common_pb2.JOB_KIND_CONSOLIDATE)
    assert held is not None and held.status == common_pb2.JOB_STATUS_RUNNING
    assert 0 < left.covered_until_seq < 600
    return left


class TestRefusedKey:
    async def test_a_refused_key_is_one_warning_naming_the_setting(
        self, make_stack: StackMaker, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A jobs key storage refuses is said in one WARNING line naming
        STELLO_GATEWAY_JOBS_KEY, with no traceback, however many rounds fail; the takeover
        keeps trying every interval (its failed rounds counted)."""
        caplog.set_level(logging.INFO)
        stack = await make_stack(jobs_key="stello_garbage_key", job_takeover_interval_s=0.1)
        metrics = stack.gateway.app.metrics
        assert metrics is not None

        def failed() -> float:
            labels = {"task": "stello-job-takeover", "outcome": "failed"}
            return metrics.registry.get_sample_value("stello_background_rounds_total", labels) or 0

        await wait_for(lambda: failed() >= 5, within_s=10)
        said = [r for r in caplog.records if "STELLO_GATEWAY_JOBS_KEY" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.WARNING], [r.getMessage() for r in said]
        assert "stello keys create" in said[0].getMessage()
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]

    async def test_a_revoked_key_made_live_again_works(
        self,
        make_stack: StackMaker,
        space: TestSpace,
        keys: KeyStore,
        pool: asyncpg.Pool,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A jobs key revoked (a rotation) is said once; once a live key is back (here the
        same one, made live again) the next round works and says so."""
        caplog.set_level(logging.INFO)
        stack = await make_stack(jobs_key=space.key, job_takeover_interval_s=0.1)
        metrics = stack.gateway.app.metrics
        assert metrics is not None

        def rounds(outcome: str) -> float:
            labels = {"task": "stello-job-takeover", "outcome": outcome}
            return metrics.registry.get_sample_value("stello_background_rounds_total", labels) or 0

        await wait_for(lambda: rounds("ok") >= 1)
        assert await keys.revoke(space.key_id)
        await wait_for(lambda: rounds("failed") >= 3)
        await pool.execute("UPDATE api_keys SET revoked_at = NULL WHERE id = $1", space.key_id)
        worked = rounds("ok")
        await wait_for(lambda: rounds("ok") > worked)
        said = [r for r in caplog.records if "STELLO_GATEWAY_JOBS_KEY" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.WARNING, logging.INFO]
        assert "accepted again" in said[1].getMessage()


class TestStop:
    async def test_a_stopping_gateway_gives_its_jobs_back(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A gateway that shuts down mid-consolidation stops it with its progress saved and
        its claim given back (status STOPPED): another gateway continues at once, without
        waiting for the claim to expire."""
        model = GatedConsolidations()
        a = await make_stack(model, job_claim_ttl_s=600, background_stop_grace_s=0.1)
        b = await make_stack(SpyProvider(), job_claim_ttl_s=600)
        session = (await a.root()).id
        await send(a, session, "one")
        running = asyncio.create_task(consolidate(a, session))
        await wait_for(lambda: model.in_flight == 1)
        await shutdown(a.gateway.app, a.gateway.server, 0)
        with contextlib.suppress(grpc.aio.AioRpcError):
            await running
        state = await job(b, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None
        assert (state.status, state.claimed) == (common_pb2.JOB_STATUS_STOPPED, False)
        async with asyncio.timeout(10):
            reply = await consolidate(b, session)
        assert (reply.status, reply.covered_until_seq) == (DONE, 2)

    async def test_a_claim_answered_as_the_gateway_stops_is_given_back(
        self,
        make_stack: StackMaker,
        backends: Backends,
        settings: StelloSettings,
        local_calls: bool,
    ) -> None:
        """A run stopped while its ClaimJob is under way (storage granted it, the answer not
        yet in) gives the claim back once the answer comes (status STOPPED): another gateway
        continues at once, without waiting for the claim to expire."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, local_calls)
        granted, hold = asyncio.Event(), asyncio.Event()
        claim_job = clients.storage.claim_job

        async def held_claim(*args: Any, **kwargs: Any) -> Any:
            reply = await claim_job(*args, **kwargs)
            if reply.granted and not hold.is_set():
                granted.set()
                await hold.wait()  # the answer still on its way
            return reply

        clients.storage.claim_job = held_claim  # type: ignore[method-assign]
        a = await make_stack(
            SpyProvider(), clients=clients, job_claim_ttl_s=600, background_stop_grace_s=0.1
        )
        b = await make_stack(SpyProvider(), job_claim_ttl_s=600)
        session = (await a.root()).id
        await send(a, session, "one")
        running = asyncio.create_task(consolidate(a, session))
        await asyncio.wait_for(granted.wait(), 10)
        stopping = asyncio.create_task(shutdown(a.gateway.app, a.gateway.server, 0))
        try:
            await wait_for(lambda: _job_task_cancelled("consolidate"))
        finally:
            hold.set()
        await asyncio.wait_for(stopping, 30)
        with contextlib.suppress(grpc.aio.AioRpcError):
            await running
        state = await job(b, session, common_pb2.JOB_KIND_CONSOLIDATE)
        assert state is not None
        assert (state.status, state.claimed) == (common_pb2.JOB_STATUS_STOPPED, False)


def _job_task_cancelled(kind: str) -> bool:
    """Whether the runner's task of a `kind` job was asked to cancel (the stop's grace over)."""
    name = f"stello-{kind}-job"
    return any(t.get_name() == name and t.cancelling() for t in asyncio.all_tasks())


class TestDeleted:
    @pytest.mark.parametrize("manual", [True, False], ids=["manual", "automatic"])
    async def test_a_delete_during_a_consolidation_is_no_warning(
        self, manual: bool, make_stack: StackMaker, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A session deleted while its consolidation runs ends the job NOT_FOUND (a manual
        Consolidate answers it); the gateway logs that at INFO, the run and its claim gone with
        the session, and no WARNING (explore4 F6d: "consolidate job of session X failed:
        session X not found", "could not end the consolidate job of X")."""
        model = GatedConsolidations()
        stack = await make_stack(model, consolidate_every_n_turns=0 if manual else 1)
        session = (await stack.root()).id
        await send(stack, session, "one")
        running = asyncio.create_task(consolidate(stack, session)) if manual else None
        await wait_for(lambda: model.in_flight == 1)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="agent_gateway"):
            await stack.gw.DeleteSession(
                agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=session)
            )
            model.gate.set()
            if running is not None:
                error = await rpc_error(running)
                assert error.code() is grpc.StatusCode.NOT_FOUND
            await wait_for(lambda: "to end" in caplog.text)
            if not manual:
                await wait_for(lambda: "automatic consolidation" in caplog.text)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warnings == []
        ended = [r for r in caplog.records if "consolidate job of" in r.getMessage()]
        assert ended and all(r.levelno == logging.INFO for r in ended)


class TestVisible:
    async def test_metrics_by_kind(self, make_stack: StackMaker) -> None:
        """The runner counts runs by kind and outcome, the model calls and tokens they spent,
        and shows nothing queued or running once they end."""
        stack = await make_stack(SpyProvider())
        session = (await stack.root()).id
        await send(stack, session, "one")
        await consolidate(stack, session)
        metrics = stack.gateway.app.metrics
        assert metrics is not None
        value = metrics.registry.get_sample_value
        labels = {"kind": "consolidate"}
        assert value("stello_gateway_jobs_total", {**labels, "outcome": "done"}) == 1
        assert value("stello_gateway_job_model_calls_total", labels) == 1
        assert (value("stello_gateway_job_tokens_total", labels) or 0) > 0
        assert value("stello_gateway_jobs_running", labels) == 0
        assert value("stello_gateway_jobs_queued", labels) == 0

    async def test_the_takeover_rounds_are_on_metrics(
        self, make_stack: StackMaker, space: TestSpace
    ) -> None:
        """With a jobs key, /metrics counts the job takeover's rounds and its last success,
        as every background task's (an operator alerts on a last success that is old)."""
        stack = await make_stack(jobs_key=space.key, job_takeover_interval_s=0.2, metrics_port=0)
        port = stack.gateway.app.metrics_port
        assert port is not None
        task = {"task": "stello-job-takeover"}

        async def counted() -> bool:
            rounds = await asyncio.to_thread(
                sample, port, "stello_background_rounds_total", **task, outcome="ok"
            )
            return (rounds or 0) >= 2

        await wait_for(counted, within_s=10)
        success = await asyncio.to_thread(
            sample, port, "stello_background_last_success_timestamp_seconds", **task
        )
        assert success is not None and success > 0

    async def test_an_empty_background_fold_keeps_the_lossy_summary(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """A background fold the model answers with no text ends FAILED with nothing saved:
        the lossy summary stays the newest, no complete one is stored (explore10 F1)."""
        spy = EmptyBackgroundFolds(max_context_tokens=4_000)
        stack = await make_stack(spy)
        session = await seeded(stack, pool, 2_000)
        await send(stack, session, "after the import")
        lossy = await stack.storage.GetCompressionCache(
            storage_pb2.GetCompressionCacheRequest(space_id=stack.space.sid, session_id=session)
        )
        assert lossy.cache.lossy and lossy.cache.summary

        async def failed() -> bool:
            fold = await job(stack, session, common_pb2.JOB_KIND_FOLD)
            return fold is not None and not fold.claimed and fold.runs == 1

        await wait_for(failed, within_s=30)
        fold = await job(stack, session, common_pb2.JOB_KIND_FOLD)
        assert fold is not None and fold.status == common_pb2.JOB_STATUS_FAILED
        assert fold.model_calls == 1
        progress = (await stack.view(session)).progress
        assert progress.complete_summary_covered_until_seq == 0
        after = await stack.storage.GetCompressionCache(
            storage_pb2.GetCompressionCacheRequest(space_id=stack.space.sid, session_id=session)
        )
        assert after == lossy

    async def test_get_session_shows_how_far_summaries_cover(
        self, make_stack: StackMaker, pool: asyncpg.Pool
    ) -> None:
        """After a bulk append, a turn stores a lossy catch-up and the background fold, run
        by the runner within its budget, saves complete summaries one chunk at a time:
        GetSession shows the last seq, the newest summary, how far the complete ones reach
        (only growing, run after run) and the fold job."""
        spy = SpyProvider(max_context_tokens=4_000)
        stack = await make_stack(spy, fold_max_calls=2)
        session = await seeded(stack, pool, 2_000)
        await send(stack, session, "after the import")
        progress = (await stack.view(session)).progress
        assert progress.summary_lossy and progress.last_seq == 2_002
        reached: list[int] = []
        for n in range(3):

            async def settled(runs: int = n + 1) -> bool:
                fold = await job(stack, session, common_pb2.JOB_KIND_FOLD)
                return fold is not None and not fold.claimed and fold.runs == runs

            await wait_for(settled, within_s=30)
            view = (await stack.view(session)).progress
            fold = await job(stack, session, common_pb2.JOB_KIND_FOLD)
            assert fold is not None and fold.model_calls <= 2
            assert fold.status == BUDGET_SPENT
            reached.append(view.complete_summary_covered_until_seq)
            await send(stack, session, f"turn {n}")
        assert 0 < reached[0] < reached[1] < reached[2] < progress.summary_covered_until_seq
