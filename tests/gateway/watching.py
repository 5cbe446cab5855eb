"""A WatchSpace stream in a test: read events with a timeout, resume by cursor, close."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.common.v1 import common_pb2

Kind = common_pb2.EventKind


class Watch:
    """One open WatchSpace call."""

    def __init__(
        self,
        gw: agent_pb2_grpc.AgentGatewayStub,
        space_id: str,
        after: str | None = None,
        kinds: tuple[int, ...] = (),
    ) -> None:
        request = agent_pb2.WatchSpaceRequest(space_id=space_id, kinds=list(kinds))  # type: ignore[arg-type]
        if after is not None:
            request.after_cursor = after
        self.call: Any = gw.WatchSpace(request)
        self.cursor = after

    async def next(self, within_s: float = 10.0) -> common_pb2.SpaceEvent:
        """The next event (fails the test when none comes within `within_s`)."""
        message = await asyncio.wait_for(self.call.read(), within_s)
        assert message is not grpc.aio.EOF, "the stream ended"
        event: common_pb2.SpaceEvent = message.event
        self.cursor = event.cursor
        return event

    async def take(self, count: int, within_s: float = 10.0) -> list[common_pb2.SpaceEvent]:
        """The next `count` events."""
        return [await self.next(within_s) for _ in range(count)]

    async def error(self, within_s: float = 10.0) -> grpc.aio.AioRpcError:
        """The status the stream ends with (fails the test when it sends an event instead)."""
        try:
            message = await asyncio.wait_for(self.call.read(), within_s)
        except grpc.aio.AioRpcError as exc:
            return exc
        raise AssertionError(f"expected the stream to fail, got {message}")

    def close(self) -> None:
        """Cancel the call (a client disconnecting)."""
        self.call.cancel()


def kinds_of(events: list[common_pb2.SpaceEvent]) -> list[tuple[str, str]]:
    """(kind name, session id) of each event."""
    return [(Kind.Name(e.kind), e.session_id) for e in events]
