"""The turn RPCs (DESIGN §4.2): Send, SendStream, SubmitToolResults, SubmitToolResultsStream.

Mixed into `gateway.AgentGatewayServicer`, like its other RPCs thin: requests are
validated and replies built by `turns.requests`, the turn is `turns.service.TurnService`'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agent_gateway.servicer.callers import caller_of as _caller
from agent_gateway.turns.requests import (
    ContentLimits,
    send_input,
    stream_event,
    submit_input,
    submit_response,
    submit_stream_event,
)
from agent_gateway.turns.service import TurnService
from stello.agent.v1 import agent_pb2

if TYPE_CHECKING:
    from agent_gateway.servicer.callers import Context


class TurnRpcs:
    """Send, SendStream, SubmitToolResults, SubmitToolResultsStream."""

    _turns: TurnService
    _limits: ContentLimits

    async def Send(
        self, request: agent_pb2.SendRequest, context: Context
    ) -> agent_pb2.SendResponse:
        """Run one conversation turn and answer it once committed."""
        turn = send_input(request, limits=self._limits)
        return await self._turns.send(_caller(context), turn)

    async def SendStream(
        self, request: agent_pb2.SendStreamRequest, context: Context
    ) -> AsyncIterator[agent_pb2.SendStreamResponse]:
        """Run one turn, streaming text deltas and tool calls, then `done`."""
        turn = send_input(request, limits=self._limits)
        async for event in self._turns.send_events(_caller(context), turn, stream=True):
            yield stream_event(event)

    async def SubmitToolResults(
        self, request: agent_pb2.SubmitToolResultsRequest, context: Context
    ) -> agent_pb2.SubmitToolResultsResponse:
        """Answer the pending client tool calls and continue the turn."""
        turn = submit_input(request, limits=self._limits)
        return submit_response(await self._turns.submit(_caller(context), turn))

    async def SubmitToolResultsStream(
        self, request: agent_pb2.SubmitToolResultsStreamRequest, context: Context
    ) -> AsyncIterator[agent_pb2.SubmitToolResultsStreamResponse]:
        """Answer the pending client tool calls and continue the turn, streaming text deltas
        and tool calls, then `done`."""
        turn = submit_input(request, limits=self._limits)
        async for event in self._turns.submit_events(_caller(context), turn, stream=True):
            yield submit_stream_event(event)
