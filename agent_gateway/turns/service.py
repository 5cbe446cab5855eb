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
4. The LLM, outside any transaction (`rounds.ToolRounds`), each call counted against the window
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

import logging
from collections.abc import AsyncIterator

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.history.background_fold import BackgroundFolds
from agent_gateway.history.budget import Counter, Window
from agent_gateway.history.compression import CALLS_PER_TURN, TurnCompression
from agent_gateway.history.consolidation import Consolidator
from agent_gateway.history.context import Summary, TurnContext, context_prefix
from agent_gateway.history.folding import CallBudget
from agent_gateway.history.records import context_record, tool_call_proto
from agent_gateway.llm import LLMProvider
from agent_gateway.llm.prompts.config import SessionPrompts
from agent_gateway.memory.index import IndexCaps, render_index
from agent_gateway.tools.builtins import BuiltinTools
from agent_gateway.turns.commit import Lease, TurnCommitter
from agent_gateway.turns.lease_keeper import KeptLease, LeaseKeeper
from agent_gateway.turns.queue import TurnLine
from agent_gateway.turns.rounds import RoundsEnd, ToolRounds, in_time
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
from stello.db.tasks import settled
from stello.errors import Aborted, session_archived
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
        self._leases = leases
        self._line = line
        self._record_bytes = record_bytes
        self._memory_index = memory_index or IndexCaps()
        self._committer = TurnCommitter(storage)
        self._rounds = ToolRounds(
            provider,
            counter,
            compression,
            self._oversized,
            max_tool_rounds=max_tool_rounds,
            record_bytes=record_bytes,
        )

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
        in_time(caller, "the turn began")
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
            raise session_archived(plan.session_id, "is archived; unarchive it to continue it")
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
                await settled(given)

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
        in_time(caller, "the model was called")
        if unread is not None or self._compression.over(ctx, window):
            stored = await self._compression.compress(caller, space, session, ctx, calls, unread)
        end = RoundsEnd(stored)
        rounds = self._rounds.run(
            caller, plan, lease, kept, builtins, turn, ctx, window, calls, end, stream=stream
        )
        async for event in rounds:
            yield event
        pending, stored = end.pending, end.stored
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
