"""A probe service for testing the kernel's server factory on its own.

It uses real request/response messages (storage's GetSession pair, which carry
`space_id`) behind a generic handler, so auth, tenancy, health and shutdown can
be exercised before and independently of any real service.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeAlias

import asyncpg
import grpc

from stello.auth import KeyStore
from stello.serving.server import ServiceApp
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from stello.validation import checked_space

SERVICE = "stello.test.v1.Probe"
ECHO = f"/{SERVICE}/Echo"
SLOW = f"/{SERVICE}/Slow"
ADMIN = f"/{SERVICE}/Admin"
STREAM = f"/{SERVICE}/Stream"
SLOW_STREAM = f"/{SERVICE}/SlowStream"
SLOW_STREAM_PAUSE_S = 60.0
FLOWING_STREAM = f"/{SERVICE}/FlowingStream"
WATCH_SPACE = f"/{SERVICE}/WatchSpace"
SPACE = f"/{SERVICE}/Space"
BOOM = f"/{SERVICE}/Boom"
BOOM_STREAM = f"/{SERVICE}/BoomStream"
DRIVER = f"/{SERVICE}/Driver"
RECORDS = f"/{SERVICE}/Records"

# The probe's methods all take and answer storage's GetSession pair.
Request: TypeAlias = storage_pb2.GetSessionRequest
Response: TypeAlias = storage_pb2.GetSessionResponse
Context: TypeAlias = grpc.aio.ServicerContext[Request, Response]


async def _echo(request: Request, context: Context) -> Response:
    response = storage_pb2.GetSessionResponse()
    response.session.id = request.session_id
    return response


async def _slow(request: Request, context: Context) -> Response:
    await asyncio.sleep(1.5)
    return await _echo(request, context)


async def _announced_slow(request: Request, context: Context) -> Response:
    """Slow, saying on stdout that it began (the subprocess mode's "slow" line)."""
    print("slow", flush=True)  # noqa: T201
    return await _slow(request, context)


async def _stream(request: Request, context: Context) -> AsyncIterator[Response]:
    for _ in range(2):
        yield await _echo(request, context)


async def _flowing_stream(request: Request, context: Context) -> AsyncIterator[Response]:
    """Messages as fast as the client takes them, for a minute at most: a client that leaves
    meets it at a `yield` (grpc closes the generator there), not in a pause."""
    loop = asyncio.get_running_loop()
    end = loop.time() + SLOW_STREAM_PAUSE_S
    while loop.time() < end:
        yield await _echo(request, context)


async def _slow_stream(request: Request, context: Context) -> AsyncIterator[Response]:
    """One message, then a second after a pause no test waits out: the client's cancel or its
    deadline reaches the server first however loaded the machine (with 1.5 s, a stalled client
    could let the stream end OK before its cancel arrived)."""
    yield await _echo(request, context)
    await asyncio.sleep(SLOW_STREAM_PAUSE_S)
    yield await _echo(request, context)


async def _space(request: Request, context: Context) -> Response:
    """The space the chain handed over: id = parsed, label = as sent (both empty if none)."""
    checked = checked_space.get()
    response = storage_pb2.GetSessionResponse()
    if checked is not None:
        response.session.label, response.session.id = checked[0], str(checked[1])
    return response


async def _boom(request: Request, context: Context) -> Response:
    raise RuntimeError("SELECT secret FROM internals -- a bug's text")


async def _boom_stream(request: Request, context: Context) -> AsyncIterator[Response]:
    yield await _echo(request, context)
    raise RuntimeError("SELECT secret FROM internals -- a bug's text")


async def _driver(request: Request, context: Context) -> Response:
    raise asyncpg.InternalClientError("cannot switch to state 15; another operation (2)")


async def _records(
    request: storage_pb2.AppendRecordsRequest, context: Context
) -> storage_pb2.AppendRecordsResponse:
    return storage_pb2.AppendRecordsResponse(records=request.records)


def _handler(
    behavior: Callable[[Request, Context], Awaitable[Response]],
) -> grpc.RpcMethodHandler[Request, Response]:
    return grpc.unary_unary_rpc_method_handler(
        behavior,
        request_deserializer=storage_pb2.GetSessionRequest.FromString,
        response_serializer=storage_pb2.GetSessionResponse.SerializeToString,
    )


def _stream_handler(
    behavior: Callable[[Request, Context], AsyncIterator[Response]],
) -> grpc.RpcMethodHandler[Request, Response]:
    return grpc.unary_stream_rpc_method_handler(
        behavior,
        request_deserializer=storage_pb2.GetSessionRequest.FromString,
        response_serializer=storage_pb2.GetSessionResponse.SerializeToString,
    )


def register(server: grpc.aio.Server, *, announce_slow: bool = False) -> None:
    """Add the probe's methods to `server` (Slow prints "slow" as it begins if
    `announce_slow`)."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Echo": _handler(_echo),
        "Slow": _handler(_announced_slow if announce_slow else _slow),
        "Admin": _handler(_echo),
        "Stream": _stream_handler(_stream),
        "SlowStream": _stream_handler(_slow_stream),
        "FlowingStream": _stream_handler(_flowing_stream),
        "WatchSpace": _stream_handler(_slow_stream),  # counted as a long-lived stream
        "Space": _handler(_space),
        "Boom": _handler(_boom),
        "BoomStream": _stream_handler(_boom_stream),
        "Driver": _handler(_driver),
        "Records": grpc.unary_unary_rpc_method_handler(
            _records,
            request_deserializer=storage_pb2.AppendRecordsRequest.FromString,
            response_serializer=storage_pb2.AppendRecordsResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def probe_app(
    settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore, *, announce_slow: bool = False
) -> ServiceApp:
    """The probe as a ServiceApp (Admin needs an admin key)."""
    return ServiceApp(
        name="probe",
        service_names=(SERVICE,),
        register=partial(register, announce_slow=announce_slow),
        pool=pool,
        keys=keys,
        settings=settings,
        admin_methods=frozenset({ADMIN}),
    )


def call(
    channel: grpc.aio.Channel, method: str
) -> grpc.aio.UnaryUnaryMultiCallable[Request, Response]:
    """A callable for one probe method on `channel`."""
    return channel.unary_unary(
        method,
        request_serializer=storage_pb2.GetSessionRequest.SerializeToString,
        response_deserializer=storage_pb2.GetSessionResponse.FromString,
    )


def raw_call(
    channel: grpc.aio.Channel, method: str
) -> grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]:
    """A callable sending raw request bytes (what no stub would serialize) to `method`."""
    return channel.unary_unary(method)


if __name__ == "__main__":
    # Subprocess mode for the SIGTERM test: serve on port 0, print the port, then "slow" as
    # each Slow call begins.
    from stello.db.pool import create_pool
    from stello.serving.server import serve

    async def main() -> None:
        settings = StelloSettings(database_url=sys.argv[1], shutdown_grace_s=10)
        assert settings.database_url is not None
        async with create_pool(settings.database_url, settings) as pool:
            app = probe_app(settings, pool, KeyStore(pool, 0), announce_slow=True)
            await serve(app, "127.0.0.1:0", on_ready=lambda port: print(port, flush=True))  # noqa: T201

    asyncio.run(main())
