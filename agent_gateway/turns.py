"""Turns: Send, SendStream and SubmitToolResults (DESIGN §4.2, STELLO-SPEC §4.5).

One turn, in order:

1. With a request_id, the stored reply of an earlier identical request is
   answered again (no LLM call); a different request under the same id is
   ALREADY_EXISTS REQUEST_ID_REUSED. Read at once with the session's meta.
2. An archived session is FAILED_PRECONDITION SESSION_ARCHIVED, whatever the
   lease says.
3. The turn lease (BeginTurn) before any LLM call: ABORTED TURN_IN_PROGRESS
   while another turn holds it — including the first call of the same
   request_id still running. It is asked for together with steps 1 and 2 (a
   round trip less) and given back at once when they refuse the turn.
4. Under the lease, at once: slots (system prompt, insight), every record
   and, with a request_id, the stored reply again (a duplicate that committed
   between step 1 and the lease is answered, not re-run). The compression
   cache is read only when the context reaches the compression threshold,
   and the session's compressor prompt (its frozen config's override, else
   the configured text) only when the compressor runs.
5. The context (`context.assemble_context`), then the LLM, outside any
   transaction: built-in tool calls run here and the model is called again,
   at most `max_tool_rounds` times per request (then RESOURCE_EXHAUSTED
   TOOL_ROUNDS_EXCEEDED, nothing written); a client tool call stops the turn
   with `pending_tool_calls`. A stream forwards every round's text deltas and
   tool calls as they arrive.
6. One Transact (`turn_commit`): the new records, the turn count (a
   continuation only touches last_active_at), the insight cleared if it was
   used and is unchanged (one put meanwhile survives), the new compression
   cache, the lease release and the reply for the request_id, under the
   turn_lease precondition (lost: ABORTED CONCURRENT_MODIFICATION). Then,
   every N counted turns, a background consolidation (`consolidation`).

The lease lives on a short TTL, renewed while the turn runs, and a failed
turn's release is retried while storage is unreachable (`lease_keeper`).
Anything that fails or is cancelled before the commit writes nothing and
keeps the insight; the lease is then released (shielded from cancellation).
A cancellation racing the commit itself may still commit; a retry with the
same request_id then answers that turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from functools import partial

from agent_gateway.builtins import BuiltinTools, TurnTools
from agent_gateway.clients import Caller, RequestKey, StorageClient
from agent_gateway.consolidation import Consolidator
from agent_gateway.context import CompressionCache, Record, assemble_context
from agent_gateway.lease_keeper import LeaseKeeper
from agent_gateway.llm import (
    Completion,
    Done,
    LLMMessage,
    LLMProvider,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
    compress_records,
)
from agent_gateway.prompt_config import SessionPrompts
from agent_gateway.records import context_record, last_prompt_tokens, tool_call_proto
from agent_gateway.service import SESSION_ARCHIVED
from agent_gateway.turn_commit import Lease, TurnCommitter
from agent_gateway.turn_state import (
    ASSISTANT,
    TOOL,
    Plan,
    SendInput,
    SendPlan,
    SubmitInput,
    SubmitPlan,
    Turn,
    TurnDone,
    TurnEvent,
)
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    NotFound,
    ResourceExhausted,
)
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)

# Memory is never part of a turn's context (STELLO-SPEC §4.5): not read either.
TURN_SLOTS = (storage_pb2.SLOT_KIND_SYSTEM_PROMPT, storage_pb2.SLOT_KIND_INSIGHT)

TOOL_ROUNDS_EXCEEDED = "TOOL_ROUNDS_EXCEEDED"


async def _last(events: AsyncIterator[TurnEvent]) -> agent_pb2.SendResponse:
    """The TurnDone of a turn's events, read to their end (so the lease is settled)."""
    response: agent_pb2.SendResponse | None = None
    async for event in events:
        if isinstance(event, TurnDone):
            response = event.response
    if response is None:
        raise RuntimeError("a turn ended without TurnDone")
    return response


class TurnService:
    """Runs turns over storage, the LLM provider and the built-in tools."""

    def __init__(
        self,
        storage: StorageClient,
        provider: LLMProvider,
        builtins: BuiltinTools,
        consolidator: Consolidator,
        prompts: SessionPrompts,
        *,
        max_tool_rounds: int,
        leases: LeaseKeeper,
    ) -> None:
        self._storage = storage
        self._provider = provider
        self._prompts = prompts
        self._builtins = builtins
        self._consolidator = consolidator
        self._max_tool_rounds = max_tool_rounds
        self._leases = leases
        self._committer = TurnCommitter(storage)

    async def send(self, caller: Caller, request: SendInput) -> agent_pb2.SendResponse:
        """Run one user turn and answer it once committed."""
        return await _last(self.send_events(caller, request, stream=False))

    def send_events(
        self, caller: Caller, request: SendInput, *, stream: bool
    ) -> AsyncIterator[TurnEvent]:
        """Run one user turn as events; `stream` uses the provider's stream for every round."""
        plan = SendPlan(
            request.space_id,
            request.session_id,
            request.tools,
            request.key,
            request.content,
            memory_tools=request.memory_tools,
        )
        return self._run(caller, plan, stream=stream)

    async def submit(self, caller: Caller, request: SubmitInput) -> agent_pb2.SendResponse:
        """Store the results of the pending client tool calls and continue the turn."""
        plan = SubmitPlan(
            request.space_id,
            request.session_id,
            request.tools,
            request.key,
            request.results,
            memory_tools=request.memory_tools,
        )
        return await _last(self._run(caller, plan, stream=False))

    async def _run(self, caller: Caller, plan: Plan, *, stream: bool) -> AsyncIterator[TurnEvent]:
        # The lease is asked for at once with the session's meta (one round trip
        # less per turn); the refusals keep their order all the same: a stored
        # reply, then NOT_FOUND, then SESSION_ARCHIVED, and only then
        # TURN_IN_PROGRESS. A lease taken for a refused turn is given back.
        remaining = caller.remaining()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceeded("the call's deadline passed before the turn began")
        # BeginTurn is not bound by the caller's deadline: a reply lost to it
        # would leave a lease nobody knows the token of (locked until its TTL).
        begin = asyncio.ensure_future(
            self._leases.begin(_unbounded(caller), plan.space_id, plan.session_id)
        )
        try:
            meta, stored = await self._meta_and_stored(caller, plan)
            if stored is None and meta.status == common_pb2.SESSION_STATUS_ARCHIVED:
                raise FailedPrecondition(
                    f"session {plan.session_id} is archived; unarchive it to continue it",
                    reason=SESSION_ARCHIVED,
                    metadata={"subject": f"session/{plan.session_id}"},
                )
            # Shielded: cancelling this call must not cancel a BeginTurn that
            # storage may already have granted (its token would be lost).
            token = None if stored is not None else await asyncio.shield(begin)
        except BaseException:
            await self._abandon(begin, caller, plan)
            raise
        if token is None:
            await self._abandon(begin, caller, plan)
            assert stored is not None
            yield TurnDone(stored)
            return
        lease = Lease(token)
        kept = self._leases.keep(caller, plan.space_id, plan.session_id, token)
        try:
            async for event in self._leased(caller, plan, meta, lease, stream=stream):
                yield event
        finally:
            kept.stop()
            if not lease.released:
                given = self._leases.give_back(
                    caller, plan.space_id, plan.session_id, token, kept.expires_by
                )
                await _settled(given)

    async def _abandon(self, begin: asyncio.Future[str], caller: Caller, plan: Plan) -> None:
        """Give back the lease a refused turn may have taken, even if cancelled meanwhile."""
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def give_back(task: asyncio.Future[str]) -> None:
            if task.cancelled() or task.exception() is not None:
                settled.set_result(None)  # no lease was taken
                return
            release = self._leases.give_back(caller, plan.space_id, plan.session_id, task.result())
            release.add_done_callback(lambda _: settled.set_result(None))

        begin.add_done_callback(give_back)
        await _settled(settled)

    async def _meta_and_stored(
        self, caller: Caller, plan: Plan
    ) -> tuple[common_pb2.SessionMeta, agent_pb2.SendResponse | None]:
        """The session's meta and, with a request_id, the stored reply (it wins over NOT_FOUND)."""
        meta_call = self._storage.get_session(caller, plan.space_id, plan.session_id)
        if plan.key is None:
            return await meta_call, None
        meta, stored = await asyncio.gather(
            meta_call, self._stored(caller, plan.space_id, plan.key), return_exceptions=True
        )
        if isinstance(stored, BaseException):
            raise stored
        if stored is not None:
            return common_pb2.SessionMeta(), stored
        if isinstance(meta, BaseException):
            raise meta
        return meta, None

    async def _stored(
        self, caller: Caller, space_id: uuid.UUID, key: RequestKey
    ) -> agent_pb2.SendResponse | None:
        response = await self._storage.remembered(caller, space_id, key)
        return None if response is None else agent_pb2.SendResponse.FromString(response)

    async def _leased(
        self,
        caller: Caller,
        plan: Plan,
        meta: common_pb2.SessionMeta,
        lease: Lease,
        *,
        stream: bool,
    ) -> AsyncIterator[TurnEvent]:
        space, session = plan.space_id, plan.session_id
        slots, history, stored = await asyncio.gather(
            self._storage.batch_get_slots(caller, space, [str(session)], TURN_SLOTS),
            self._storage.all_records(caller, space, session),
            self._stored(caller, space, plan.key) if plan.key else _none(),
        )
        if stored is not None:
            yield TurnDone(stored)
            return
        if not slots:
            raise NotFound(f"session {session} not found")
        slot = slots[0]
        insight = slot.insight if slot.HasField("insight") else None
        turn = Turn(base_seq=history[-1].seq if history else 0)
        user_message = plan.opening(turn, history)
        provider = self._provider
        assembled = await assemble_context(
            system_prompt=slot.system_prompt if slot.HasField("system_prompt") else None,
            label=meta.label,
            insight=insight,
            history=[context_record(r) for r in history],
            user_message=user_message,
            provider_max_tokens=provider.max_context_tokens,
            cache=None,
            last_prompt_tokens=last_prompt_tokens(history),
            compress=partial(self._compress, caller, space, session),
            prompts=self._prompts.prompts,
            pending=[context_record(r) for r in turn.records if r.role == TOOL],
            load_cache=partial(self._cache, caller, space, session),
        )
        messages = list(assembled.messages)
        builtins = await self._builtins.for_turn(
            caller, space, session, memory_tools=plan.memory_tools
        )
        tools = (*builtins.specs, *plan.tools)
        client_names = {tool.name for tool in plan.tools}
        pending: tuple[ToolCallSpec, ...] = ()
        rounds = 0
        while True:
            completion: Completion | None = None
            if stream:
                async for event in _streamed(provider, messages, tools):
                    if isinstance(event, Done):
                        completion = event.completion
                    else:
                        yield event
                if completion is None:
                    raise RuntimeError("the LLM stream ended without a Done event")
            else:
                completion = await provider.complete(messages, tools=tools or None)
            turn.usage += completion.usage
            calls = completion.tool_calls
            turn.add(
                "assistant",
                completion.content,
                tool_calls=calls,
                usage=completion.usage,
                compressed=assembled.compressed,
            )
            messages.append(LLMMessage("assistant", completion.content, calls))
            if not calls:
                break
            pending = tuple(call for call in calls if call.name in client_names)
            mine = [call for call in calls if call.name not in client_names]
            if mine:
                if rounds >= self._max_tool_rounds:
                    raise ResourceExhausted(
                        f"the model kept calling tools after {rounds} round(s); the limit is "
                        f"{self._max_tool_rounds} (STELLO_GATEWAY_MAX_TOOL_ROUNDS); nothing "
                        "of the turn was written",
                        reason=TOOL_ROUNDS_EXCEEDED,
                    )
                rounds += 1
                await self._run_tools(caller, plan, lease, rounds, builtins, mine, turn, messages)
            if pending:
                break
        response = agent_pb2.SendResponse(
            assistant=next(r for r in reversed(turn.records) if r.role == ASSISTANT),
            records=turn.records,
            pending_tool_calls=[tool_call_proto(call) for call in pending],
            usage=agent_pb2.Usage(
                prompt_tokens=turn.usage.prompt_tokens,
                completion_tokens=turn.usage.completion_tokens,
                total_tokens=turn.usage.total_tokens,
            ),
        )
        committed = await self._committer.commit(
            caller, plan, lease, turn, insight, assembled.cache_to_store, response
        )
        if not plan.touch_only:
            self._consolidator.after_turn(caller, space, session, committed.turn_count)
        yield TurnDone(committed.response)

    async def _run_tools(
        self,
        caller: Caller,
        plan: Plan,
        lease: Lease,
        round_: int,
        builtins: TurnTools,
        calls: Sequence[ToolCallSpec],
        turn: Turn,
        messages: list[LLMMessage],
    ) -> None:
        """Run the gateway's calls at once; add their results to the turn, in call order."""
        outcomes = await asyncio.gather(
            *(
                builtins.run(
                    caller,
                    plan.space_id,
                    plan.session_id,
                    call,
                    builtin_request_id(plan, lease.token, round_, index, call.id),
                )
                for index, call in enumerate(calls)
            )
        )
        for call, outcome in zip(calls, outcomes, strict=True):
            turn.add("tool", outcome.content, tool_call_id=call.id, is_error=outcome.is_error)
            messages.append(
                LLMMessage("tool", outcome.content, tool_call_id=call.id, is_error=outcome.is_error)
            )

    async def _compress(
        self,
        caller: Caller,
        space_id: uuid.UUID,
        session_id: uuid.UUID,
        records: Sequence[Record],
    ) -> str:
        """Summarise the oldest records with the session's compressor prompt."""
        prompt = await self._prompts.compressor(caller, space_id, session_id)
        return await compress_records(self._provider, records, self._prompts.prompts, prompt=prompt)

    async def _cache(
        self, caller: Caller, space_id: uuid.UUID, session_id: uuid.UUID
    ) -> CompressionCache | None:
        stored = await self._storage.get_compression_cache(caller, space_id, session_id)
        return CompressionCache(stored.summary, stored.covered_until_seq) if stored else None


def builtin_request_id(plan: Plan, token: str, round_: int, index: int, call_id: str) -> str:
    """The request id of a built-in tool call (its fork), so that no turn forks twice.

    With the client's request_id it follows the request and the call's place in
    the turn (round, index), not the lease: a retry that takes over the expired
    lease of its own first attempt repeats that attempt's fork instead of making
    a second one. Without one, each turn is new: the lease and the call id.
    """
    if plan.key is None:
        return f"{token}/{call_id}"
    request = f"{plan.key.scope}\0{plan.key.request_id}".encode()
    return f"turn-{hashlib.sha256(request).hexdigest()[:32]}/{round_}.{index}"


def _unbounded(caller: Caller) -> Caller:
    """The caller without their deadline (each call keeps the policy's own timeout)."""
    return replace(caller, deadline=None)


async def _settled(future: asyncio.Future[None]) -> None:
    """Wait for `future`; a cancellation meanwhile does not stop it (it is raised after)."""
    await asyncio.shield(future)


async def _none() -> None:
    return None


async def _streamed(
    provider: LLMProvider, messages: Sequence[LLMMessage], tools: Sequence[ToolSpec]
) -> AsyncIterator[TextDelta | ToolCallEvent | Done]:
    """The provider's stream, closed as soon as the turn stops reading it."""
    events = provider.stream(messages, tools=tools or None)
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
