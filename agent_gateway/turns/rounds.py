"""The tool rounds of a turn (`ToolRounds`, DESIGN §4.2): once its context is ready, the
model is called, each call counted against the window first (`ToolRounds._fitted`) and
capped by max_tokens so its answer fits the window and a record; built-in tool calls run at
once (`ToolRounds._run_tools`: a result too large for the window is replaced by an error
result) and the model is called again, compressing first if need be, at most
`max_tool_rounds` times per request (then RESOURCE_EXHAUSTED TOOL_ROUNDS_EXCEEDED, nothing
written); a client tool call stops the turn with `pending_tool_calls`. A stream forwards
every round's text deltas and tool calls as they arrive. Each model call is cut short once
the turn's lease is lost, and is made knowing the caller's deadline (`llm.deadlines`): a
provider's Retry-After past it fails the call at once, saying when to retry.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from agent_gateway.clients import Caller
from agent_gateway.history.budget import Counter, Window
from agent_gateway.history.compression import TurnCompression
from agent_gateway.history.context import Summary, TurnContext
from agent_gateway.history.folding import CallBudget
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
from agent_gateway.llm.deadlines import bounded, bounded_steps
from agent_gateway.tools.builtins import TurnTools
from agent_gateway.turns.answer_size import check_answer
from agent_gateway.turns.commit import Lease
from agent_gateway.turns.empty_answer import check_not_empty
from agent_gateway.turns.lease_keeper import KeptLease
from agent_gateway.turns.state import Plan, Turn, TurnEvent
from stello.errors import DeadlineExceeded, ResourceExhausted
from stello.reasons import CONTEXT_TOO_LARGE, TOOL_ROUNDS_EXCEEDED


@dataclass(slots=True)
class RoundsEnd:
    """What the rounds leave the turn's commit: the newest summary a compression stored
    (`stored`, given the one stored before the rounds) and the client tool calls the turn
    stops on (`pending`)."""

    stored: Summary | None
    pending: tuple[ToolCallSpec, ...] = ()


class ToolRounds:
    """The model calls of a turn, and the gateway's own tool calls run between them."""

    def __init__(
        self,
        provider: LLMProvider,
        counter: Counter,
        compression: TurnCompression,
        oversized: Callable[[str], str | None],
        *,
        max_tool_rounds: int,
        record_bytes: int,
    ) -> None:
        self._provider = provider
        self._counter = counter
        self._compression = compression
        self._oversized = oversized
        self._max_tool_rounds = max_tool_rounds
        self._record_bytes = record_bytes

    async def run(
        self,
        caller: Caller,
        plan: Plan,
        lease: Lease,
        kept: KeptLease,
        builtins: TurnTools,
        turn: Turn,
        ctx: TurnContext,
        window: Window,
        calls: CallBudget,
        end: RoundsEnd,
        *,
        stream: bool,
    ) -> AsyncIterator[TurnEvent]:
        """Call the model, run the gateway's calls it asks for and call it again, until it
        answers with no call of the gateway's tools; the answers and results are added to
        `turn` and `ctx`, and `end` says what the commit needs."""
        space, session = plan.space_id, plan.session_id
        stored = end.stored
        client_names = {tool.name for tool in plan.tools}
        pending: tuple[ToolCallSpec, ...] = ()
        rounds = 0
        while True:
            if rounds and self._compression.over(ctx, window):
                stored = (
                    await self._compression.compress(caller, space, session, ctx, calls) or stored
                )
            in_time(caller, "the model was called")
            messages, max_tokens = self._fitted(ctx, window)
            completion: Completion | None = None
            # A model call is cut short once the lease is lost (it could not commit), and
            # its provider's retries (`retries.Retries`) sleep no Retry-After or backoff past
            # the caller's deadline.
            if stream:
                model = _streamed(self._provider, messages, ctx.tools, max_tokens)
                async for event in bounded_steps(kept.guarded(model), caller.deadline):
                    if isinstance(event, Done):
                        completion = event.completion
                    else:
                        yield event
                if completion is None:
                    raise RuntimeError("the LLM stream ended without a Done event")
            else:
                with bounded(caller.deadline):
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

        end.stored, end.pending = stored, pending

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


def in_time(caller: Caller, before: str) -> None:
    """Raise DEADLINE_EXCEEDED once the caller's deadline has passed (`before` says what
    it passed before: nothing of the turn is written)."""
    remaining = caller.remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded(f"the call's deadline passed before {before}")


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
