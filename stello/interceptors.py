"""Server interceptors: request ids and logging, the error boundary, auth and tenancy.

Passed to ``grpc.aio.server(interceptors=[...])`` in this order (outermost
first): `MetricsInterceptor` (stello.metrics), `RequestIdInterceptor`,
`ErrorInterceptor`, `AuthInterceptor`. Each
wraps the method handler's behaviour, so the auth check sees the decoded
request (its ``space_id``) and every error raised anywhere below is turned
into a status in one place.

The error boundary (DESIGN §7) keeps internals from clients: a request that
does not parse, or holds what no text or JSON can (U+0000, a Struct nested
past 16 levels), is INVALID_ARGUMENT naming the field, before auth and the
handler; domain errors keep their status; a lost database is UNAVAILABLE;
anything else is INTERNAL "internal error (id ...)", the id, method and
traceback in the log. Nothing answers UNKNOWN. A call the client cancelled
or that outlived its deadline is logged and counted as CANCELLED or
DEADLINE_EXCEEDED (`outcome`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import grpc

from stello.auth import KeyStore, Principal
from stello.db import CONNECTION_ERRORS, UNAVAILABLE_MESSAGE
from stello.errors import (
    FieldViolation,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    StelloError,
    Unauthenticated,
    Unavailable,
    abort_with,
)
from stello.validation import request_violations
from stello.wire import locate_parse_failure

log = logging.getLogger("stello.rpc")

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)
api_key_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("api_key", default=None)

DEADLINE_SLACK_S = 0.1
"""A call cancelled this close to its deadline was cancelled by the deadline."""

PUBLIC_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
else:  # the runtime classes are not subscriptable
    Context = grpc.aio.ServicerContext
    Handler = grpc.RpcMethodHandler
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]
Behavior = Callable[[Any, Context], Any]
Decorator = Callable[[Behavior, str, bool], Behavior]


def current_principal() -> Principal:
    """The authenticated caller of the current RPC."""
    principal = principal_var.get()
    if principal is None:
        raise Unauthenticated("no authenticated principal in this context")
    return principal


def wrap_handler(
    handler: Handler,
    method: str,
    decorate: Decorator,
    deserializer: Callable[[bytes], Any] | None = None,
) -> Handler:
    """Rebuild `handler` with its unary or server-streaming behaviour decorated (and its
    request deserializer replaced, when one is given)."""
    parse = deserializer or handler.request_deserializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            decorate(cast(Behavior, handler.unary_unary), method, False),
            request_deserializer=parse,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            decorate(cast(Behavior, handler.unary_stream), method, True),
            request_deserializer=parse,
            response_serializer=handler.response_serializer,
        )
    return handler  # client/bidi streaming: not used by our APIs


def _around(before: Callable[[Any, Context, str], Awaitable[None]]) -> Decorator:
    """A decorator that awaits `before(request, context, method)` ahead of the behaviour."""

    def decorate(behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if streaming:

            async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
                await before(request, context, method)
                async for item in behavior(request, context):
                    yield item

            return stream

        async def unary(request: Any, context: Context) -> Any:
            await before(request, context, method)
            return await behavior(request, context)

        return unary

    return decorate


def _metadata_value(context: Context, key: str) -> str:
    for name, value in context.invocation_metadata() or ():
        if name == key:
            return str(value)
    return ""


class HandlerInterceptor(grpc.aio.ServerInterceptor):
    """Base of our interceptors: decorates a method's behaviour once and reuses it.

    Decorators read per-call data (metadata) from the call's context, so the
    wrapped handler of a method is built on its first call and cached.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        hit = self._cache.get(method)
        if hit is not None and hit[0] is handler:
            return hit[1]
        wrapped = self.wrap(handler, method)
        self._cache[method] = (handler, wrapped)
        return wrapped

    def wrap(self, handler: Handler, method: str) -> Handler:
        """The handler to serve `method` with (default: `decorate` its behaviour)."""
        return wrap_handler(handler, method, self.decorate)

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        """Wrap one behaviour; subclasses override."""
        raise NotImplementedError


def outcome(context: Context, error: BaseException | None) -> grpc.StatusCode:
    """The status a finished call ended with, as the client saw it.

    A handler the client abandoned is cancelled by grpc, with no status set:
    CANCELLED, or DEADLINE_EXCEEDED when its deadline had passed (or was due
    within `DEADLINE_SLACK_S`).
    """
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return code
    remaining = context.time_remaining()
    # The client's own deadline timer cancels the call a moment before the server's fires.
    expired = remaining is not None and remaining <= DEADLINE_SLACK_S
    if isinstance(error, asyncio.CancelledError) or context.cancelled():
        return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
    if error is not None:
        return grpc.StatusCode.UNKNOWN
    return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.OK


class RequestIdInterceptor(HandlerInterceptor):
    """Gives each call a request id (``x-request-id`` or a new one) and logs its outcome."""

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        if streaming:

            async def stream(request: Any, context: Context) -> Any:
                began = time.perf_counter()
                request_id_var.set(_metadata_value(context, "x-request-id") or uuid.uuid4().hex)
                error: BaseException | None = None
                try:
                    async for item in behavior(request, context):
                        yield item
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    _log_call(method, outcome(context, error), began)

            return stream

        async def unary(request: Any, context: Context) -> Any:
            began = time.perf_counter()
            request_id_var.set(_metadata_value(context, "x-request-id") or uuid.uuid4().hex)
            error: BaseException | None = None
            try:
                return await behavior(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                _log_call(method, outcome(context, error), began)

        return unary


def _log_call(method: str, code: grpc.StatusCode, began: float) -> None:
    log.info(
        "rpc %s %s %.1fms",
        method,
        code.name,
        (time.perf_counter() - began) * 1000,
        extra={"request_id": request_id_var.get()},
    )


class Unparsed:
    """A request whose bytes did not parse, carried to the boundary that refuses it."""

    __slots__ = ("violation",)

    def __init__(self, violation: FieldViolation) -> None:
        self.violation = violation


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserialize`, answering an `Unparsed` instead of raising (grpc would say UNKNOWN)."""
    if deserialize is None:
        return None
    descriptor = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, RecursionError: bytes we cannot read
            if descriptor is None:
                return Unparsed(FieldViolation("request", f"does not parse: {exc}"))
            return Unparsed(locate_parse_failure(descriptor, data))

    return parse


class ErrorInterceptor(HandlerInterceptor):
    """The error boundary: parse and text checks, then every failure as a documented status."""

    def wrap(self, handler: Handler, method: str) -> Handler:
        return wrap_handler(handler, method, self.decorate, _tolerant(handler.request_deserializer))

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        return _map_errors(behavior, method, streaming)


def check_request(request: Any) -> None:
    """Refuse a request that did not parse or holds what cannot be stored (InvalidArgument)."""
    if isinstance(request, Unparsed):
        violation = request.violation
        raise InvalidArgument(f"{violation.field}: {violation.description}", [violation])
    if hasattr(request, "ListFields"):
        found = request_violations(request)
        if found:
            summary = "; ".join(f"{v.field}: {v.description}" for v in found)
            raise InvalidArgument(f"invalid request: {summary}", found)


def client_error(exc: Exception, method: str) -> StelloError:
    """What the client is told of `exc`; internals go to the log only, under an error id."""
    if isinstance(exc, StelloError) and not isinstance(exc, Internal):
        return exc
    if isinstance(exc, CONNECTION_ERRORS):
        log.warning("%s: database unavailable: %s: %s", method, exc.__class__.__name__, exc)
        return Unavailable(UNAVAILABLE_MESSAGE)
    error_id = uuid.uuid4().hex[:16]
    log.error("internal error (id %s) in %s", error_id, method, exc_info=exc)
    return Internal(f"internal error (id {error_id})")


def _map_errors(behavior: Behavior, method: str, streaming: bool) -> Behavior:
    if streaming:

        async def stream(request: Any, context: Context) -> Any:
            try:
                check_request(request)
                async for item in behavior(request, context):
                    yield item
            except grpc.aio.AbortError:
                raise  # the status is already set
            except Exception as exc:
                await abort_with(context, client_error(exc, method))

        return stream

    async def unary(request: Any, context: Context) -> Any:
        try:
            check_request(request)
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_with(context, client_error(exc, method))

    return unary


class AuthInterceptor(HandlerInterceptor):
    """Requires ``authorization: Bearer <key>``; enforces scopes and the caller's spaces.

    A request whose ``space_id`` is not the key's space answers NOT_FOUND, as if
    the space did not exist: existence must not leak across tenants.
    """

    def __init__(self, keys: KeyStore, admin_methods: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self._keys = keys
        self._admin_methods = admin_methods

    def wrap(self, handler: Handler, method: str) -> Handler:
        if method.startswith(PUBLIC_PREFIXES):
            return handler
        return wrap_handler(handler, method, _around(self._check))

    async def _check(self, request: Any, context: Context, method: str) -> None:
        header = _metadata_value(context, "authorization")
        principal = await self._authenticate(header)
        if method in self._admin_methods and not principal.is_admin:
            raise PermissionDenied(f"{method} needs an admin-scope key")
        self._check_space(request, principal)
        principal_var.set(principal)
        api_key_var.set(header.partition(" ")[2].strip())

    async def _authenticate(self, header: str) -> Principal:
        scheme, _, secret = header.partition(" ")
        if not header:
            raise Unauthenticated(
                "missing authorization metadata: send 'authorization: Bearer <key>'"
            )
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthenticated("authorization must be 'Bearer <key>'")
        principal = await self._keys.resolve(secret.strip())
        if principal is None:
            raise Unauthenticated("unknown or revoked API key")
        return principal

    @staticmethod
    def _check_space(request: Any, principal: Principal) -> None:
        descriptor = getattr(request, "DESCRIPTOR", None)
        if descriptor is None or "space_id" not in descriptor.fields_by_name:
            return
        raw = request.space_id
        try:
            space_id = uuid.UUID(raw)
        except ValueError:
            description = "is required" if not raw else f"must be a UUID, got {raw[:64]!r}"
            raise InvalidArgument.field("space_id", description) from None
        if not principal.may_access(space_id):
            raise NotFound(f"space {raw} not found")
