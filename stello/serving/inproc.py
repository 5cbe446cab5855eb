"""Calls between services of one process without the network (`stello up`).

When the gateway runs in the process that serves storage and tree, a call to
them need not go through HTTP/2, the loopback socket and grpc's C core twice.
`LocalServer` holds what a server serves (its generic handlers and its
interceptors, `create_server` records them) and `LocalChannel` is a
``grpc.aio.Channel`` for the generated stubs that calls those handlers
directly. A call keeps everything a networked one has:

- the same call chain: the server's interceptors run (request check, auth and
  tenancy from the forwarded key, metrics, the access line);
- the wire's isolation: the request and the response are serialized and parsed
  (each side has its own message, as over the network; the size limits hold),
  and the handler runs in a task of its own, in an empty `contextvars`
  context (a server's context variables never leak into the caller's);
- the same failures: a status the handler set or aborted with (rich details in
  the trailing metadata included) is raised as ``grpc.aio.AioRpcError``; the
  deadline cancels the handler and raises DEADLINE_EXCEEDED; a cancelled caller
  cancels the handler (the server counts the call CANCELLED); a server that
  is stopping answers UNAVAILABLE.

Only unary calls are local; streaming calls, and everything else the channel
does, go through the real channel it wraps (the server still listens for other
clients).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import grpc

from stello.db.tasks import cancelled_since

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Metadata: TypeAlias = tuple[tuple[str, str | bytes], ...]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable["Handler | None"]]


@dataclass(slots=True)
class CallDetails:
    """What a server's interceptors and generic handlers are told of an arriving call."""

    method: str
    invocation_metadata: Metadata


class LocalServer:
    """A server's handlers and interceptors, callable in-process (see the module doc)."""

    def __init__(self, max_message_bytes: int) -> None:
        self.max_message_bytes = max_message_bytes
        self._handlers: list[grpc.GenericRpcHandler] = []
        self._chain: Continuation = self._find
        self.stopping = False
        """Set when the server shuts down: local calls then answer UNAVAILABLE."""

    def add_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        """What the server registered (in order: the first that knows a method serves it)."""
        self._handlers.extend(handlers)

    def set_interceptors(self, interceptors: Sequence[grpc.aio.ServerInterceptor]) -> None:
        """The server's interceptors, outermost first (as grpc.aio.server takes them)."""
        chain: Continuation = self._find
        for interceptor in reversed(interceptors):
            chain = _through(interceptor, chain)
        self._chain = chain

    async def resolve(self, details: CallDetails) -> Handler | None:
        """The handler a call to `details.method` reaches, through the interceptors."""
        return await self._chain(details)

    async def _find(self, details: grpc.HandlerCallDetails) -> Handler | None:
        for generic in self._handlers:
            handler = generic.service(details)
            if handler is not None:
                return handler
        return None


def _through(interceptor: grpc.aio.ServerInterceptor, inner: Continuation) -> Continuation:
    async def continuation(details: grpc.HandlerCallDetails) -> Handler | None:
        return await interceptor.intercept_service(inner, details)

    return continuation


class LocalContext:
    """The servicer context of a local call: what our handlers and interceptors use of
    ``grpc.aio.ServicerContext``, with the same meaning."""

    def __init__(self, metadata: Metadata, deadline: float | None) -> None:
        self._metadata = metadata
        self._deadline = deadline
        self._code: grpc.StatusCode | None = None
        self._details: str | None = None
        self._trailing: Metadata = ()
        self._cancelled = False

    def invocation_metadata(self) -> Metadata:
        """The metadata the caller sent."""
        return self._metadata

    def time_remaining(self) -> float | None:
        """Seconds before the caller's deadline (None: no deadline)."""
        return None if self._deadline is None else max(self._deadline - time.monotonic(), 0.0)

    def cancelled(self) -> bool:
        """True once the caller left or its deadline passed."""
        return self._cancelled

    def done(self) -> bool:
        """True once the call ended the way `cancelled` says."""
        return self._cancelled

    def peer(self) -> str:
        """Who calls: this process."""
        return "inproc:local"

    def set_code(self, code: grpc.StatusCode) -> None:
        """The status the call ends with."""
        self._code = code

    def code(self) -> grpc.StatusCode | None:
        """The status set so far (None: none)."""
        return self._code

    def set_details(self, details: str) -> None:
        """The status message."""
        self._details = details

    def details(self) -> str | None:
        """The status message set so far."""
        return self._details

    def set_trailing_metadata(self, trailing_metadata: Metadata) -> None:
        """Metadata sent with the status."""
        self._trailing = tuple(trailing_metadata)

    def trailing_metadata(self) -> Metadata:
        """The trailing metadata set so far."""
        return self._trailing

    async def send_initial_metadata(self, initial_metadata: Metadata) -> None:
        """Nothing to send ahead in-process (no unary caller reads it)."""

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()
    ) -> None:
        """End the call with `code`, as grpc.aio does: raises ``grpc.aio.AbortError``."""
        if code is grpc.StatusCode.OK:
            code = grpc.StatusCode.UNKNOWN  # grpc refuses to abort with OK the same way
        self._code = code
        self._details = details
        self._trailing = tuple(trailing_metadata)
        raise grpc.aio.AbortError(f"aborted with {code.name}")

    async def abort_with_status(self, status: grpc.Status) -> None:
        """`abort` with a `grpc_status` status (rich details in its trailing metadata)."""
        await self.abort(status.code, status.details, status.trailing_metadata)

    def error(self) -> grpc.aio.AioRpcError | None:
        """The failure a caller sees, when the call did not end OK."""
        if self._code is None or self._code is grpc.StatusCode.OK:
            return None
        return rpc_error(self._code, self._details or "", self._trailing)

    def expire(self) -> None:
        """The caller left or its deadline passed."""
        self._cancelled = True


def rpc_error(code: grpc.StatusCode, details: str, trailing: Metadata = ()) -> grpc.aio.AioRpcError:
    """The error a networked call with this status raises."""
    return grpc.aio.AioRpcError(
        code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*trailing),
        details=details,
        debug_error_string=f"in-process call ended {code.name}",
    )


class LocalUnaryUnary:
    """One unary method of a `LocalServer`, as a stub's multicallable."""

    def __init__(
        self,
        server: LocalServer,
        method: str,
        serialize: Callable[[Any], bytes],
        deserialize: Callable[[bytes], Any],
    ) -> None:
        self._server = server
        self._method = method
        self._serialize = serialize
        self._deserialize = deserialize

    async def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (grpc's multicallable signature)
        metadata: Sequence[tuple[str, str | bytes]] | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        """Call the method in-process; fails as the networked call would."""
        data = self._checked(self._serialize(request), "Sent")
        pairs = tuple((key, value) for key, value in metadata or ())
        deadline = None if timeout is None else time.monotonic() + timeout
        context = LocalContext(pairs, deadline)
        loop = asyncio.get_running_loop()
        cancelled = cancelled_since()
        task = loop.create_task(self._run(data, context), context=contextvars.Context())
        timer = None if timeout is None else loop.call_later(timeout, _expire, task, context)
        try:
            reply = await task
        except asyncio.CancelledError:
            # The caller was cancelled during the call (one cancelled before, calling in
            # its cleanup, is told how the call ended, as over the network).
            if cancelled():
                context.expire()
                raise
            if context.cancelled():
                raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            raise rpc_error(grpc.StatusCode.CANCELLED, "Cancelled") from None
        finally:
            if timer is not None:
                timer.cancel()
        return self._deserialize(self._checked(reply, "Received"))

    async def _run(self, data: bytes, context: LocalContext) -> bytes:
        if self._server.stopping:
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        handler = await self._server.resolve(
            CallDetails(self._method, context.invocation_metadata())
        )
        if handler is None or handler.unary_unary is None:
            raise rpc_error(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        request = handler.request_deserializer(data) if handler.request_deserializer else data
        behavior = cast(Callable[[Any, LocalContext], Awaitable[Any]], handler.unary_unary)
        try:
            response = await behavior(request, context)
        except grpc.aio.AbortError:
            response = None
        except Exception as exc:  # what grpc answers a handler that raised
            raise rpc_error(grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}") from exc
        error = context.error()
        if error is not None:
            raise error
        serialize = handler.response_serializer
        return serialize(response) if serialize is not None else cast(bytes, response)

    def _checked(self, data: bytes, direction: str) -> bytes:
        limit = self._server.max_message_bytes
        if len(data) > limit:
            raise rpc_error(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{direction} message larger than max ({len(data)} vs. {limit})",
            )
        return data


def _expire(task: asyncio.Task[Any], context: LocalContext) -> None:
    context.expire()
    task.cancel()


def _networked(kind: str) -> Callable[..., Any]:
    """A `LocalChannel` method that makes the multicallable of the network channel."""

    def networked(
        self: LocalChannel,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return getattr(self._network, kind)(method, request_serializer, response_deserializer)

    networked.__doc__ = f"The network channel's {kind} multicallable (streams are not local)."
    return networked


class LocalChannel(grpc.aio.Channel):
    """A channel whose unary calls reach `server` in-process; the rest go through `network`.

    Give it to a generated stub as its channel. `close` closes the network channel.
    """

    def __init__(self, server: LocalServer, network: grpc.aio.Channel) -> None:
        self._server = server
        self._network = network

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        """The local multicallable of `method` (awaited as grpc's is)."""
        return LocalUnaryUnary(
            self._server,
            method,
            request_serializer or _identity,
            response_deserializer or _identity,
        )

    unary_stream = _networked("unary_stream")
    stream_unary = _networked("stream_unary")
    stream_stream = _networked("stream_stream")

    async def close(self, grace: float | None = None) -> None:
        """Close the network channel."""
        await self._network.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        """The network channel's state."""
        return self._network.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        """The network channel's."""
        await self._network.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        """The network channel's."""
        await self._network.channel_ready()

    async def __aenter__(self) -> LocalChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._network.close()


def _identity(value: Any) -> Any:
    return value
