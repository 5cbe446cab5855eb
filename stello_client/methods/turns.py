"""Turns: send (the stored turn), stream (text as it arrives, tool calls, then the turn),
submit_tool_results and its streamed form, submit_tool_results_stream.

Every turn carries a `request_id` (the caller's, else a new one), so a turn
whose reply was lost (the gateway restarted mid-call) is retried safely: the
gateway answers the stored turn without calling the model again, or runs it
once if it never committed. A stream is retried only until its first event;
after text was shown, a failure raises (its `request_id` finds the turn: a
`send` with it answers the turn if it was stored).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, TypeVar, overload

import grpc

from stello.agent.v1 import agent_pb2
from stello_client.base import DEFAULT, ClientBase, Timeout
from stello_client.calls import before_retry, failure
from stello_client.requests import request_id_or_new, request_of, set_optional
from stello_client.types import (
    BusyName,
    BusyPolicy,
    SendResponse,
    StreamEvent,
    SubmitToolResultsResponse,
    ToolDefinition,
    ToolResult,
    ToolResultsStreamEvent,
    busy_policy,
    several,
)

SubmitRequest = TypeVar(
    "SubmitRequest", agent_pb2.SubmitToolResultsRequest, agent_pb2.SubmitToolResultsStreamRequest
)


class TurnCalls(ClientBase):
    """Send, SendStream, SubmitToolResults, SubmitToolResultsStream."""

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        tools: Sequence[ToolDefinition] = (),
        memory_tools: bool | None = None,
        busy: BusyName | BusyPolicy | None = None,
        request_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> SendResponse:
        """Run one turn and answer it once stored (Send): `assistant` (the reply), `records`
        (everything the turn stored), `pending_tool_calls` (client tools to answer with
        `submit_tool_results`), `usage`.

        Args:
            session_id: the session.
            content: the user message.
            tools: client tools the model may call (`stello_client.types.tool`).
            memory_tools: offer the shared memory tools (None: as the gateway says).
            busy: what to do while another turn holds the session: "reject" (the
                default: TurnInProgress, retried), "enqueue" (wait in line, within
                `timeout`), "interrupt" or "rollback" (stop the running turn, which
                raises TurnInterrupted to its caller, and run this one at once). A
                session whose last turn stopped on client tool calls
                (`pending_tool_calls`) waits for `submit_tool_results`: an "enqueue"
                send waits for it, but a "reject", "interrupt" or "rollback" send runs
                at once and drops those calls (the model never sees them answered; a
                later `submit_tool_results` raises NoPendingToolCalls).
            request_id: the idempotency key (default: a new one, so retries are safe).
            timeout: seconds, retries included (default: the client's turn timeout).

        Raises:
            NotFound: the session is not in the space.
            SessionArchived: the session is archived.
            TurnInProgress: another turn holds the session (after the retries).
            TurnInterrupted: an "interrupt" turn took the session over; nothing stored.
            TurnQueueFull: "enqueue", and the session's line is full.
            DeadlineExceeded: `timeout` passed: in line ("enqueue"), nothing stored; the
                message says whether the gateway said so or the client's deadline ended
                the call (then a retry with the same request_id is safe: it answers the
                stored turn, else runs it once).
            InvalidArgument: empty or oversized content, bad tool definitions.
            ToolRoundsExceeded, ContextTooLarge, LlmRateLimited, LlmUnavailable,
                LlmTimeout, LlmAnswerTooLarge: the model's side; nothing was stored.
            OutcomeUnknown: the commit's answer was lost and the turn may have been
                stored, once (retried with its request_id first): send again with the
                error's `request_id`, which answers the stored turn.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.SendRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            content=content,
            tools=several("tools", tools),
            request_id=rid,
            busy=busy_policy(busy),
        )
        set_optional(request, memory_tools=memory_tools)
        reply: SendResponse = await self._unary(
            "Send", request, safe=True, timeout=timeout, request_id=rid, turn=True
        )
        return reply

    async def stream(
        self,
        session_id: str,
        content: str,
        *,
        tools: Sequence[ToolDefinition] = (),
        memory_tools: bool | None = None,
        busy: BusyName | BusyPolicy | None = None,
        request_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Run one turn, yielding as it goes (SendStream): `TextDelta`s of the reply,
        each complete `ToolCall`, and last the stored turn (`SendResponse`, as `send`
        answers it). Closing the iterator early cancels the call: nothing is stored,
        unless the turn's commit was already under way (the `done` event not yet read);
        `send` with the same request_id then answers the stored turn. A `break` closes it
        only once nothing refers to it: ``async with contextlib.aclosing(...)`` (a sync
        `Client`'s: ``with`` or `close()`) ends it at once.

        Arguments and errors as `send` (a "reject" or "interrupt" stream drops pending
        client tool calls as a send does). Retried (same request_id) only before the
        first event.
        """
        rid = request_id_or_new(request_id)
        request = request_of(
            agent_pb2.SendStreamRequest,
            space_id=await self.space_id(),
            session_id=session_id,
            content=content,
            tools=several("tools", tools),
            request_id=rid,
            busy=busy_policy(busy),
        )
        set_optional(request, memory_tools=memory_tools)
        async for event in self._events("SendStream", request, rid, timeout):
            yield _event(event)

    async def submit_tool_results(
        self,
        session_id: str,
        results: Sequence[ToolResult],
        *,
        tools: Sequence[ToolDefinition] = (),
        memory_tools: bool | None = None,
        busy: BusyName | BusyPolicy | None = None,
        request_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> SubmitToolResultsResponse:
        """Continue a turn that stopped on client tool calls (SubmitToolResults): one result
        per pending call (`stello_client.types.tool_result`); answers as `send` does.

        Raises:
            ValueError: `results` empty (before any call).
            InvalidArgument: a result answering no pending call, or a pending call left out.
            NoPendingToolCalls: the session waits for no tool result.
            SessionArchived, TurnInProgress, TurnInterrupted, TurnQueueFull, OutcomeUnknown
                and the model's errors: as `send` (`busy` too: a queued submit goes ahead
                of the queued sends, which wait for it).
        """
        rid = request_id_or_new(request_id)
        request = await self._submit_request(
            agent_pb2.SubmitToolResultsRequest,
            session_id,
            results,
            tools=tools,
            memory_tools=memory_tools,
            busy=busy,
            rid=rid,
        )
        reply: SubmitToolResultsResponse = await self._unary(
            "SubmitToolResults", request, safe=True, timeout=timeout, request_id=rid, turn=True
        )
        return reply

    async def submit_tool_results_stream(
        self,
        session_id: str,
        results: Sequence[ToolResult],
        *,
        tools: Sequence[ToolDefinition] = (),
        memory_tools: bool | None = None,
        busy: BusyName | BusyPolicy | None = None,
        request_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> AsyncGenerator[ToolResultsStreamEvent, None]:
        """Continue a turn that stopped on client tool calls, yielding as it goes
        (SubmitToolResultsStream): `TextDelta`s of the reply, each complete `ToolCall`, and
        last the stored continuation (`SubmitToolResultsResponse`, as `submit_tool_results`
        answers it). What `stream` is to `send`: closing the iterator early cancels the call
        (nothing stored, the results included, unless the commit was under way), and
        `submit_tool_results` with the same request_id then answers the stored continuation.

        Arguments and errors as `submit_tool_results` (InvalidArgument, NoPendingToolCalls,
        TurnInProgress, ... raised before any event). Retried (same request_id) only before
        the first event.
        """
        rid = request_id_or_new(request_id)
        request = await self._submit_request(
            agent_pb2.SubmitToolResultsStreamRequest,
            session_id,
            results,
            tools=tools,
            memory_tools=memory_tools,
            busy=busy,
            rid=rid,
        )
        async for event in self._events("SubmitToolResultsStream", request, rid, timeout):
            yield _event(event)

    async def _submit_request(
        self,
        kind: type[SubmitRequest],
        session_id: str,
        results: Sequence[ToolResult],
        *,
        tools: Sequence[ToolDefinition],
        memory_tools: bool | None,
        busy: BusyName | BusyPolicy | None,
        rid: str,
    ) -> SubmitRequest:
        """A SubmitToolResults or SubmitToolResultsStream request (the same fields).

        Raises:
            ValueError: no results (before any call, WhoAmI's included).
        """
        answers = several("results", results)
        if not answers:
            raise ValueError(
                "results: is empty: give one tool_result(tool_call_id, content) per tool call "
                "the turn is waiting for (its pending_tool_calls)"
            )
        request = request_of(
            kind,
            space_id=await self.space_id(),
            session_id=session_id,
            results=answers,
            tools=several("tools", tools),
            request_id=rid,
            busy=busy_policy(busy),
        )
        set_optional(request, memory_tools=memory_tools)
        return request

    async def _events(
        self, method: str, request: Any, rid: str, timeout: Timeout
    ) -> AsyncGenerator[Any, None]:
        """The events of a streamed turn (`method`), retried with its request_id only until
        the first event: once text was shown, a failure raises."""
        opts = self._options(method, timeout, safe=True, request_id=rid, turn=True)
        attempt, closes = 1, self._channel.closes
        while True:
            with self._channel.ended_by_close(closes, method, rid):
                call = self._stream_call(method, request, opts)
                shown = False
                try:
                    async for event in call:
                        shown = True
                        yield event
                    return
                except grpc.aio.AioRpcError as exc:
                    error = self._said(failure(exc, opts))
                    if shown:
                        raise error from None
                finally:
                    call.cancel()
            await before_retry(error, attempt, opts)
            attempt += 1


@overload
def _event(event: agent_pb2.SendStreamResponse) -> StreamEvent: ...
@overload
def _event(event: agent_pb2.SubmitToolResultsStreamResponse) -> ToolResultsStreamEvent: ...
def _event(
    event: agent_pb2.SendStreamResponse | agent_pb2.SubmitToolResultsStreamResponse,
) -> StreamEvent | ToolResultsStreamEvent:
    """The one event a SendStreamResponse or SubmitToolResultsStreamResponse carries."""
    kind = event.WhichOneof("event")
    if kind == "text_delta":
        return event.text_delta
    if kind == "tool_call":
        return event.tool_call
    return event.done
