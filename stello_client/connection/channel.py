"""The SDK's channel to the gateway: one per client (shared by the clients made `using`
another caller), opened at the first call on the event loop that makes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import grpc

from stello.agent.v1 import agent_pb2_grpc
from stello.channels import open_channel
from stello_client.connection.target import Target
from stello_client.exceptions.base import ConfigurationError
from stello_client.exceptions.transport import Cancelled

# Reconnect 0.1 s after a lost connection (gRPC waits 1 s), so a retry finds a restarted gateway.
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100),)


class Channel:
    """A channel and the stub over it, shared by every client made `using` another caller.

    Opened at the first call, so on the event loop that makes it (a grpc.aio
    channel belongs to one loop), wherever the client was built. A call on
    another loop once that one is closed (a second ``asyncio.run``, a test
    framework's loop per test) opens a new channel on it: the old one's calls
    ended with their loop, and it is dropped unclosed (closing it needs that
    loop). A call on another loop while the first is still open raises
    ConfigurationError: the channel may still carry that loop's calls.
    """

    def __init__(self, target: Target) -> None:
        self.address = target.gateway
        self.max_message_bytes = target.max_message_bytes
        """The most bytes a message over it may hold (STELLO_MAX_MESSAGE_BYTES)."""
        self._target = target
        self.source = target.source
        self.secure = target.tls is not None
        """Whether it speaks TLS."""
        self._channel: grpc.aio.Channel | None = None
        self._stub: agent_pb2_grpc.AgentGatewayStub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closes = 0
        """How many times it was closed: a call begun before a close was ended by it."""

    @property
    def stub(self) -> agent_pb2_grpc.AgentGatewayStub:
        """The gateway's stub (the channel opens now if it is not open yet, or was opened
        on a loop closed since).

        Raises:
            ConfigurationError: the channel is open on another event loop, still open.
        """
        loop = asyncio.get_running_loop()
        if self._stub is not None and self._loop is not loop:
            self._leave_loop()
        if self._stub is None:
            self._channel = open_channel(
                self._target.gateway,
                tls=self._target.tls,
                max_message_bytes=self._target.max_message_bytes,
                options=CHANNEL_OPTIONS,
            )
            self._stub = agent_pb2_grpc.AgentGatewayStub(self._channel)
            self._loop = loop
        return self._stub

    def _leave_loop(self) -> None:
        """Drop the channel of a closed loop (used from another loop now).

        Raises:
            ConfigurationError: its loop is still open.
        """
        if self._loop is not None and not self._loop.is_closed():
            raise ConfigurationError(
                "this client was first used on another event loop, which is still open: a "
                "gRPC channel belongs to the loop it was opened on, so make one client per "
                "loop (or close() this one on its loop first; once that loop is closed, the "
                "client opens a new channel on the loop that calls it)",
                setting="loop",
            )
        self._channel = self._stub = self._loop = None

    async def close(self) -> None:
        """Close the channel (its calls end CANCELLED); it reopens at the next call.

        Raises:
            ConfigurationError: the channel is open on another event loop, still open.
        """
        if self._channel is not None:
            self.closes += 1
            if self._loop is not asyncio.get_running_loop():
                self._leave_loop()  # a closed loop's channel: nothing left to close
                return
            channel, self._channel, self._stub, self._loop = self._channel, None, None, None
            await channel.close()

    @contextlib.contextmanager
    def ended_by_close(self, closes: int, method: str, request_id: str) -> Iterator[None]:
        """Raise `Cancelled` for a call (begun when `closes` closes had happened) that the
        client's close() ended: one closed before this attempt (between retries), and one
        whose call the close cancelled, which gRPC ends with a bare CancelledError in a task
        nobody cancelled (a cancel of the task itself is raised as it is)."""
        if self.closes != closes:
            raise Cancelled(CLOSED, method=method, request_id=request_id)
        try:
            yield
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.closes == closes or (task is not None and task.cancelling()):
                raise
            raise Cancelled(CLOSED, method=method, request_id=request_id) from None


CLOSED = (
    "the client was closed during the call: close() ends the calls in flight (a later call "
    "opens the channel again)"
)
"""What a call the client's close() ended says (`Cancelled`)."""
