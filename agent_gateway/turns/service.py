"""Turns: Send, SendStream, SubmitToolResults and SubmitToolResultsStream (DESIGN §4.2,
§4.3, STELLO-SPEC §4.5).

One turn, in order:

1. Before anything is read: a user message too large for the model's window
   (over half of it) is INVALID_ARGUMENT on ``content``.
2. One BeginTurn (storage, DESIGN §4.3), which answers in this order: with a
   request_id, the stored reply of an earlier request under it (answered
   again, no LLM call; a different request under the same id is
   ALREADY_EXISTS REQUEST_ID_REUSED); NOT_FOUND; an archived session
   (FAILED_PRECONDITION SESSION_ARCHIVED, no lease taken); the turn lease
   as the request's busy policy decides (`queue`: ABORTED TURN_IN_PROGRESS
   while another turn holds it — including the first call of the same
   request_id still running — or a wait in the session's line for ENQUEUE,
   several BeginTurns, or the lease taken over for INTERRUPT); then, under the lease,
   the meta and last seq (the turn's records are numbered after it), the
   system prompt and insight, the newest summary, the skill allow-list,
   with the memory tools offered the shared memory index (DESIGN §4.5), and
   the newest records after it that fit the window's budget with the tail's
   estimate.
3. The context (`context.TurnContext`) from that alone, never the whole
   history. When it would reach 80% of the window, or the window did not
   reach back to the summary, the turn compresses first (`compression`,
   at most three compressor calls per turn, the session's compressor
   prompt read then).
4. The LLM, outside any transaction, each call counted against the window
   before it is sent (`budget`) and capped by max_tokens so its answer fits
   the window and a record: built-in tool calls run here (a result too
   large for the window is replaced by an error result) and the model is
   called again — the budget rechecked, compressing again if need be — at
   most `max_tool_rounds` times per request (then RESOURCE_EXHAUSTED
   TOOL_ROUNDS_EXCEEDED, nothing written); a client tool call stops the
   turn with `pending_tool_calls`. A stream forwards every round's text
   deltas and tool calls as they arrive.
5. One Transact (`turn_commit`): the new records, the turn count (a
   continuation only touches last_active_at), the insight cleared if it was
   used and is unchanged (one put meanwhile survives), the new summary, the
   lease release and the reply for the request_id, under the turn_lease
   precondition (lost: ABORTED CONCURRENT_MODIFICATION, or TURN_INTERRUPTED
   when an INTERRUPT took it: then nothing of the turn is stored and the
   insight stays). Then, every N
   counted turns, a background consolidation (`consolidation`), and, when
   the summary is lossy, a background fold (`background_fold`).

A turn without compression is BeginTurn and the commit: two storage calls.
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
from collections.abc import AsyncIterator, Sequence

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.background_fold import BackgroundFolds
from agent_gateway.history.budget import Counter, Window
from agent_gateway.history.compression import CALLS_PER_TURN, TurnCompression
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.history.context import Summary, TurnContext, context_prefix
from agent_gateway.history.folding import CallBudget
from agent_gateway.history.records import context_record, tool_call_proto
from agent_gateway.llm import (
    Completion,
    Done,
    LLMMessage,
    LLMProvider,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSpec,
)
from agent_gateway.llm.prompt_config import SessionPrompts
from agent_gateway.memory.index import IndexCaps, render_index
from agent_gateway.tools.builtins import BuiltinTools, TurnTools
from agent_gateway.turns.answer_size import check_answer
from agent_gateway.turns.commit import Lease, TurnCommitter
from agent_gateway.turns.empty_answer import check_not_empty
from agent_gateway.turns.lease_keeper import KeptLease, LeaseKeeper
from agent_gateway.turns.queue import TurnLine
from agent_gateway.turns.start import begin_request, remembered, summary
from agent_gateway.turns.start import unread as unread_range
from agent_gateway.turns.state import (
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
from stello.errors import (
    Aborted,
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
)
from stello.reasons import CONTEXT_TOO_LARGE, SESSION_ARCHIVED, TOOL_ROUNDS_EXCEEDED
from stello.storage.v1 import storage_pb2

log = logging.getLogger(__name__)


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
        compression: TurnCompression,
        folds: BackgroundFolds,
        counter: Counter,
        *,
        max_tool_rounds: int,
        leases: LeaseKeeper,
        line: TurnLine,
        record_bytes: int,
        memory_index: IndexCaps | None = None,
    ) -> None:
        self._storage = storage
        self._provider = provider
        self._prompts = prompts
        self._builtins = builtins
        self._consolidator = consolidator
        self._compression = compression
        self._folds = folds
        self._counter = counter
        self._max_tool_rounds = max_tool_rounds
        self._leases = leases
        self._line = line
        self._record_bytes = record_bytes
        self._memory_index = memory_index or IndexCaps()
        self._committer = TurnCommitter(storage)

    @property
    def window(self) -> Window:
        """The provider's window now."""
        return Window(self._provider.max_context_tokens, self._record_bytes)

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
            busy=request.busy,
        )
        return self._run(caller, plan, stream=stream)

    async def submit(self, caller: Caller, request: SubmitInput) -> agent_pb2.SendResponse:
        """Store the results of the pending client tool calls and continue the turn."""
        return await _last(self.submit_events(caller, request, stream=False))

    def submit_events(
        self, caller: Caller, request: SubmitInput, *, stream: bool
    ) -> AsyncIterator[TurnEvent]:
        """Continue the turn as events; `stream` uses the provider's stream for every round."""
        plan = SubmitPlan(
            request.space_id,
            request.session_id,
            request.tools,
            request.key,
            request.results,
            memory_tools=request.memory_tools,
            busy=request.busy,
        )
        return self._run(caller, plan, stream=stream)

    async def _run(self, caller: Caller, plan: Plan, *, stream: bool) -> AsyncIterator[TurnEvent]:
        _in_time(caller, "the turn began")
        window = self.window
        if isinstance(plan, SendPlan):
            window.check_message(self._counter, plan.content, "content")
        hinted = self._builtins.memory_offered(plan.memory_tools)
        index = self._memory_index.window(self._prompts.prompts, hinted=hinted)
        reply = await self._line.begin(
            caller, plan, begin_request(plan, window, self._counter, index)
        )
        if reply.HasField("remembered"):
            yield TurnDone(remembered(plan, reply.remembered))
            return
        if not reply.token:
            raise FailedPrecondition(
                f"session {plan.session_id} is archived; unarchive it to continue it",
                reason=SESSION_ARCHIVED,
                metadata={"subject": f"session/{plan.session_id}"},
            )
        lease = Lease(reply.token)
        kept = self._leases.keep(caller, plan.space_id, plan.session_id, lease.token)
        try:
            leased = self._leased(caller, plan, reply.turn, lease, kept, stream=stream)
            async for event in leased:
                yield event
        finally:
            kept.stop()
            if not lease.released:
                given = self._leases.give_back(
                    caller, plan.space_id, plan.session_id, lease.token, kept.expires_by
                )
                await _settled(given)

    async def _leased(
        self,
        caller: Caller,
        plan: Plan,
        state: storage_pb2.TurnState,
        lease: Lease,
        kept: KeptLease,
        *,
        stream: bool,
    ) -> AsyncIterator[TurnEvent]:
        space, session = plan.space_id, plan.session_id
        window = self.window
        insight = state.insight if state.HasField("insight") else None
        turn = Turn(base_seq=state.last_seq)
        user_message = plan.opening(turn, state.records, self._oversized)
        builtins = self._builtins.for_turn(
            memory_tools=plan.memory_tools,
            allowed=state.skills.names if state.HasField("skills") else None,
        )
        ctx = TurnContext(
            context_prefix(
                state.system_prompt if state.HasField("system_prompt") else None,
                state.session.label,
                insight,
                self._prompts.prompts,
                render_index(
                    state.memory_index,
                    state.memory_total,
                    self._prompts.prompts,
                    hinted=self._builtins.memory_offered(plan.memory_tools),
                ),
            ),
            summary(state),
            [context_record(r) for r in state.records],
            [context_record(r) for r in turn.records if r.role == TOOL],
            user_message,
            (*builtins.specs, *plan.tools),
        )
        calls = CallBudget(CALLS_PER_TURN)
        stored: Summary | None = None
        unread = unread_range(state)
        # BeginTurn is not bound by the deadline: a call with little time left may pass the
        # check in `_run` and find it gone once begun; no model is called for it then.
        _in_time(caller, "the model was called")
        if unread is not None or self._compression.over(ctx, window):
            stored = await self._compression.compress(caller, space, session, ctx, calls, unread)
        client_names = {tool.name for tool in plan.tools}
        pending: tuple[ToolCallSpec, ...] = ()
        rounds = 0
        while True:
            if rounds and self._compression.over(ctx, window):
                stored = (
                    await self._compression.compress(caller, space, session, ctx, calls) or stored
                )
            _in_time(caller, "the model was called")
            messages, max_tokens = self._fitted(ctx, window)
            completion: Completion | None = None
            # A model call is cut short once the lease is lost (it could not commit).
            if stream:
                model = _streamed(self._provider, messages, ctx.tools, max_tokens)
                async for event in kept.guarded(model):
                    if isinstance(event, Done):
                        completion = event.completion
                    else:
                        yield event
                if completion is None:
                    raise RuntimeError("the LLM stream ended without a Done event")
            else:
                completion = await kept.guard(
                    self._provider.complete(
                        messages, tools=ctx.tools or None, max_tokens=max_tokens
                    )
                )
            self._counter.calibration.observe(
                completion.usage.prompt_tokens, self._counter.raw(messages, ctx.tools)
            )
            turn.usage += completion.usage
            calls_made = completion.tool_calls
            answered = turn.add(
                "assistant",
                completion.content,
                tool_calls=calls_made,
                usage=completion.usage,
                compressed=ctx.summary is not None,
            )
            check_answer(plan, answered, self._record_bytes)
            check_not_empty(plan, completion)
            ctx.loop.append(LLMMessage("assistant", completion.content, calls_made))
            if not calls_made:
                break
            pending = tuple(call for call in calls_made if call.name in client_names)
            mine = [call for call in calls_made if call.name not in client_names]
            if mine:
                if rounds >= self._max_tool_rounds:
                    raise ResourceExhausted(
                        f"the model kept calling tools after {rounds} round(s); the limit is "
                        f"{self._max_tool_rounds} (STELLO_GATEWAY_MAX_TOOL_ROUNDS); nothing "
                        "of the turn was written",
                        reason=TOOL_ROUNDS_EXCEEDED,
                    )
                rounds += 1
                await self._run_tools(caller, plan, lease, rounds, builtins, mine, turn, ctx)
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
        kept.check()
        kept.committing = True
        try:
            committed = await self._committer.commit(
                caller, plan, lease, turn, insight, stored, response
            )
        except Aborted:
            await self._leases.explain(caller, space, session, kept)  # TURN_INTERRUPTED?
            raise
        if not plan.touch_only and committed.turn_count is not None:
            self._consolidator.after_turn(caller, space, session, committed.turn_count)
        newest = stored or summary(state)
        if newest is not None and newest.lossy:
            self._folds.schedule(caller, space, session)
        yield TurnDone(committed.response)

    def _fitted(self, ctx: TurnContext, window: Window) -> tuple[list[LLMMessage], int]:
        """The messages of the next call and its max_tokens, once they fit the window.

        Raises:
            ResourceExhausted: reason CONTEXT_TOO_LARGE; what the turn must send (its
                system prompt, insight, own records) leaves no room for an answer.
        """
        messages = ctx.messages()
        prompt = self._counter.messages(messages, ctx.tools)
        max_tokens = window.reply_tokens(prompt)
        if max_tokens < window.min_reply_tokens:
            raise ResourceExhausted(
                f"the context of this turn takes about {prompt} of the model's "
                f"{window.tokens} tokens even with the history summarised (the system prompt, "
                "the insight, tool schemas and this turn's own messages); nothing was written",
                reason=CONTEXT_TOO_LARGE,
            )
        return messages, max_tokens

    def _oversized(self, content: str) -> str | None:
        """The error result that replaces a tool result too large for the window; None
        when it fits."""
        window = self.window
        tokens = self._counter.text(content)
        if tokens <= window.record_tokens:
            return None
        return (
            f"the tool result was about {tokens} tokens, more than half the model's window "
            f"of {window.tokens}; it was not kept: return less"
        )

    async def _run_tools(
        self,
        caller: Caller,
        plan: Plan,
        lease: Lease,
        round_: int,
        builtins: TurnTools,
        calls: Sequence[ToolCallSpec],
        turn: Turn,
        ctx: TurnContext,
    ) -> None:
        """Run the gateway's calls at once; add their results to the turn, in call order."""
        outcomes = await asyncio.gather(
            *(
                builtins.run(
                    caller,
                    plan.space_id,
                    plan.session_id,
                    call,
                    builtin_request_id(plan, lease.token, round_, index, call),
                )
                for index, call in enumerate(calls)
            )
        )
        for call, outcome in zip(calls, outcomes, strict=True):
            content, is_error = outcome.content, outcome.is_error
            refused = self._oversized(content)
            if refused is not None:
                content, is_error = refused, True
            turn.add("tool", content, tool_call_id=call.id, is_error=is_error)
            ctx.loop.append(LLMMessage("tool", content, tool_call_id=call.id, is_error=is_error))


def builtin_request_id(plan: Plan, token: str, round_: int, index: int, call: ToolCallSpec) -> str:
    """The request id of a built-in tool call (its fork, its memory write), so that no turn
    does one twice.

    With the client's request_id it follows the request, the call's place in the turn
    (round, index) and what the call asks (tool and arguments), not the lease: a retry
    that takes over the expired lease of its own first attempt, and whose model asks the
    same, repeats that attempt's fork instead of making a second one; a model that asks
    something else there (models are not deterministic) has it done, as asked (it was
    told the key was used for another request: explore10 F5). Without a request_id each
    turn is new: the lease and the call id.
    """
    if plan.key is None:
        return f"{token}/{call.id}"
    request = f"{plan.key.scope}\0{plan.key.request_id}".encode()
    asked = hashlib.sha256(f"{call.name}\0{call.arguments_json()}".encode()).hexdigest()[:16]
    return f"turn-{hashlib.sha256(request).hexdigest()[:32]}/{round_}.{index}/{asked}"


def _in_time(caller: Caller, before: str) -> None:
    """Raise DEADLINE_EXCEEDED once the caller's deadline has passed (`before` says what
    it passed before: nothing of the turn is written)."""
    remaining = caller.remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded(f"the call's deadline passed before {before}")


async def _settled(future: asyncio.Future[None]) -> None:
    """Wait for `future`; a cancellation meanwhile does not stop it (it is raised after)."""
    await asyncio.shield(future)


async def _streamed(
    provider: LLMProvider,
    messages: Sequence[LLMMessage],
    tools: Sequence[ToolSpec],
    max_tokens: int,
) -> AsyncIterator[TextDelta | ToolCallEvent | Done]:
    """The provider's stream, closed as soon as the turn stops reading it."""
    events = provider.stream(messages, tools=tools or None, max_tokens=max_tokens)
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
