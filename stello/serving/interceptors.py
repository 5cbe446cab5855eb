"""The call chain every server runs: one interceptor, one wrapped behaviour per method.

`CallChain` is a server's only interceptor. On a method's first call it wraps
the handler's behaviour once and keeps it; what depends on the method alone
(auth or not, admin only, whether the request has a ``space_id``, the tolerant
parser, the metric children) is worked out then, not per call. Each call then
goes through, in this order:

1. its clock starts, its metadata is read once (``authorization``,
   ``x-request-id``) and its request id set (`request_id_var`): the caller's
   ``x-request-id``, else a new one from `RequestIds`;
2. the error boundary's request check (`stello.serving.boundary`): bytes that do not
   parse, text or JSON no store can hold, INVALID_ARGUMENT naming the field;
3. auth (every method but health and reflection): the key (UNAUTHENTICATED),
   the admin scope (PERMISSION_DENIED), the request's ``space_id``
   (INVALID_ARGUMENT when not a UUID, NOT_FOUND when not the key's, as if it
   did not exist: existence must not leak across tenants); the principal, the
   key and the parsed space are handed to the servicer (`principal_var`,
   `api_key_var`, `stello.validation.checked_space`);
4. the handler;
5. an exception from 2-4 becomes the status `stello.serving.boundary.client_error`
   gives it (nothing answers UNKNOWN);
6. the final status (`stello.serving.access_log.outcome`: a call the client cancelled
   or that outlived its deadline is CANCELLED or DEADLINE_EXCEEDED, never OK) is counted
   (`stello.telemetry.metrics`; from 1 to here the call counts as in flight) and
   written in the call's access line: DEBUG, or INFO
   with ``STELLO_ACCESS_LOG=1``; a call that failed or took longer than
   ``STELLO_SLOW_CALL_MS`` is INFO always (`stello.serving.access_log.AccessLog`). A JSON log
   line has
   its fields too: request_id, rpc_method, code, duration_ms, the key_id of
   the key that sent it once the key is known (a call refused by its check, its
   scope or its space names the key too: which client sends what is refused),
   and the space_id the call was admitted for.

One layer instead of one per concern: each awaited layer and each scan of the
metadata costs every call (DESIGN §9: per-hop CPU within 1.3x a bare server's).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import grpc

from stello.auth import KeyStore, Principal
from stello.errors import (
    REQUEST_ID_KEY,
    InvalidArgument,
    PermissionDenied,
    StelloError,
    Unauthenticated,
    abort_with,
)
from stello.serving.access_log import AccessLog, outcome
from stello.serving.boundary import check_request, client_error, request_descriptor, tolerant
from stello.serving.space_calls import LONG_LIVED, Slot, SpaceCalls, current_slot
from stello.telemetry.metrics import MethodMetrics, RpcMetrics
from stello.validation import checked_space

log = logging.getLogger("stello.rpc")

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)
api_key_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("api_key", default=None)
sender_var: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar(
    "sender", default=None
)
"""The key id of a call's valid key, once resolved (its access line names it, admitted or not)."""


PUBLIC_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
else:  # the runtime classes are not subscriptable
    Context = grpc.aio.ServicerContext
    Handler = grpc.RpcMethodHandler
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]
Behavior = Callable[[Any, Context], Any]


def current_principal() -> Principal:
    """The authenticated caller of the current RPC."""
    principal = principal_var.get()
    if principal is None:
        raise Unauthenticated("no authenticated principal in this context")
    return principal


class RequestIds:
    """Request ids without a syscall: a random prefix per chain and a counter.

    The 64 random bits drawn when a server's chain is built tell processes and
    restarts apart, the counter tells its calls apart; 32 hex characters, like
    the ``uuid4().hex`` (a ``getrandom`` per call) they replace.
    """

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count()

    def new(self) -> str:
        """The next id."""
        return f"{self._prefix}{next(self._counter):016x}"


@dataclass(frozen=True, slots=True)
class MethodPlan:
    """What the chain does for one method, worked out on its first call."""

    name: str
    auth: bool
    admin: bool
    has_space: bool
    metrics: MethodMetrics | None
    calls: SpaceCalls
    """The count its calls are held in, per space."""


def _enter(plan: MethodPlan) -> None:
    """A call of `plan` began: it is in flight (its space is counted once admitted)."""
    if plan.metrics is not None:
        plan.metrics.in_flight += 1


def _leave(plan: MethodPlan, counted: Slot | None) -> None:
    """A call of `plan` ended: no longer in flight, and its place in its space's count
    (`counted`, the one `_admit` took, if any) given back."""
    if counted is not None:
        counted.give()
    if plan.metrics is not None:
        plan.metrics.in_flight -= 1


class CallChain(grpc.aio.ServerInterceptor):
    """Request id, error boundary, auth and tenancy, metrics and the access line, in one layer."""

    def __init__(
        self,
        keys: KeyStore,
        metrics: RpcMetrics | None = None,
        *,
        admin_methods: frozenset[str] = frozenset(),
        access: AccessLog | None = None,
        space_calls: SpaceCalls | None = None,
        space_watches: SpaceCalls | None = None,
    ) -> None:
        self._keys = keys
        self._space_calls = space_calls or SpaceCalls(0)
        self._space_watches = space_watches or SpaceCalls(0)
        self._space_waiters = SpaceCalls(self._space_calls.cap, "calls waiting aside")
        self._metrics = metrics
        self._admin_methods = admin_methods
        self._access = access or AccessLog()
        self._ids = RequestIds()
        self._cache: dict[str, tuple[Handler, Handler]] = {}
        self._running: set[asyncio.Task[Any]] = set()
        """The tasks of the calls in flight (networked and in-process), for `ended`."""

    @property
    def in_flight(self) -> frozenset[asyncio.Task[Any]]:
        """The tasks of the calls in flight (a test waits for one to be cancelled)."""
        return frozenset(self._running)

    async def ended(self, timeout_s: float) -> int:
        """Wait (at most `timeout_s`) for the calls in flight to end, their cleanup done; how
        many had not. grpc's `server.stop` cancels the calls past its grace but may return
        before their `finally` ran: a turn's lease given back there needs the gateway's
        background runner, which shutdown stops next."""
        running = list(self._running)
        if not running:
            return 0
        _, late = await asyncio.wait(running, timeout=timeout_s)
        return len(late)

    def _track(self) -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        return task

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
        wrapped = self._wrap(handler, method)
        self._cache[method] = (handler, wrapped)
        return wrapped

    def _plan(self, handler: Handler, method: str) -> MethodPlan:
        descriptor = request_descriptor(handler.request_deserializer)
        return MethodPlan(
            name=method,
            auth=not method.startswith(PUBLIC_PREFIXES),
            admin=method in self._admin_methods,
            has_space=descriptor is not None and "space_id" in descriptor.fields_by_name,
            metrics=None if self._metrics is None else self._metrics.method(method),
            calls=(
                self._space_watches
                if method.rpartition("/")[2] in LONG_LIVED
                else self._space_calls
            ),
        )

    def _wrap(self, handler: Handler, method: str) -> Handler:
        plan = self._plan(handler, method)
        parse = tolerant(handler.request_deserializer)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(plan, cast(Behavior, handler.unary_unary)),
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(plan, cast(Behavior, handler.unary_stream)),
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        return handler  # client/bidi streaming: not used by our APIs

    def _unary(self, plan: MethodPlan, behavior: Behavior) -> Behavior:
        async def unary(request: Any, context: Context) -> Any:
            began = time.perf_counter()
            header = self._start(context)
            error: BaseException | None = None
            finished = False
            counted: Slot | None = None
            task = self._track()
            _enter(plan)
            try:
                counted = await self._admit(plan, request, header)
                return await behavior(request, context)
            except grpc.aio.AbortError as exc:  # the status is already set
                error = exc
                raise
            except Exception as exc:
                error = exc
                failure = self._failed(plan, context, exc, began)
                finished = True
                await abort_with(context, failure, request_id_var.get())
            except BaseException as exc:  # cancelled: the client left or the deadline passed
                error = exc
                raise
            finally:
                _leave(plan, counted)
                self._running.discard(task)
                if not finished:
                    self._finish(plan, context, error, began)

        return unary

    def _stream(self, plan: MethodPlan, behavior: Behavior) -> Behavior:
        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            began = time.perf_counter()
            header = self._start(context)
            error: BaseException | None = None
            finished = False
            counted: Slot | None = None
            task = self._track()
            _enter(plan)
            try:
                counted = await self._admit(plan, request, header)
                async for item in behavior(request, context):
                    yield item
            except grpc.aio.AbortError as exc:
                error = exc
                raise
            except Exception as exc:
                error = exc
                failure = self._failed(plan, context, exc, began)
                finished = True
                await abort_with(context, failure, request_id_var.get())
            except BaseException as exc:
                error = exc
                raise
            finally:
                _leave(plan, counted)
                self._running.discard(task)
                if not finished:
                    self._finish(plan, context, error, began)

        return stream

    def _start(self, context: Context) -> str:
        """Read the metadata once: set the request id, answer the authorization header."""
        header = request_id = ""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and not header:  # the first of each counts
                header = str(value)
            elif key == REQUEST_ID_KEY and not request_id:
                request_id = str(value)
        request_id_var.set(request_id or self._ids.new())
        return header

    def _failed(
        self, plan: MethodPlan, context: Context, exc: Exception, began: float
    ) -> StelloError:
        """What the client is told of `exc`, the call counted and logged with it first:
        grpc sends the status as the handler aborts, and a client that then reads the
        metrics must find the call there."""
        failure = client_error(exc, plan.name)
        context.set_code(failure.code)
        self._finish(plan, context, exc, began)
        return failure

    def _finish(
        self, plan: MethodPlan, context: Context, error: BaseException | None, began: float
    ) -> None:
        code = outcome(context, error)
        seconds = time.perf_counter() - began
        if plan.metrics is not None:
            plan.metrics.observe(code, seconds)
        level = self._access.level(code, seconds)
        if log.isEnabledFor(level):
            log.log(
                level,
                "rpc %s %s %.1fms",
                plan.name,
                code.name,
                seconds * 1000,
                extra=_access_fields(plan.name, code, seconds),
            )

    async def _admit(self, plan: MethodPlan, request: Any, header: str) -> Slot | None:
        """(Unless public) the key and its scope, then the request check, then the space,
        and the call counted against its space's cap; its place in the count (to give back;
        also `current_slot`, for a call that waits aside). The key comes first: a caller
        without a valid one learns nothing of a request's rules (UNAUTHENTICATED whatever
        it sent)."""
        if not plan.auth:
            check_request(request)
            return None
        secret = bearer_key(header)
        principal = await self._keys.resolve(secret)
        if principal is None:
            raise Unauthenticated("unknown or revoked API key")
        sender_var.set(principal.key_id)
        if plan.admin and not principal.is_admin:
            method = plan.name.rpartition("/")[2]
            raise PermissionDenied(f"{method} needs an admin-scope key; this key is a tenant's")
        check_request(request)
        counted = None
        if plan.has_space:
            raw, space_id = _space(request.space_id)
            await self._keys.check_space(principal, space_id, raw)
            checked_space.set((raw, space_id))
            if plan.calls.take(space_id, raw):
                aside = self._space_waiters if plan.calls is self._space_calls else None
                counted = Slot(plan.calls, space_id, aside)
                current_slot.set(counted)
        principal_var.set(principal)
        api_key_var.set(secret)
        return counted


def _access_fields(method: str, code: grpc.StatusCode, seconds: float) -> dict[str, object]:
    """The access line's fields for a JSON log (STELLO_LOG_FORMAT=json): the request id,
    method, code and milliseconds, the id of the key that sent it (once known: admitted
    or refused by a later check) and the space the call was admitted for (absent when
    it was refused before either was known). Never the key's secret."""
    fields: dict[str, object] = {
        "request_id": request_id_var.get(),
        "rpc_method": method,
        "code": code.name,
        "duration_ms": round(seconds * 1000, 1),
    }
    sender = sender_var.get()
    if sender is not None:
        fields["key_id"] = str(sender)
    checked = checked_space.get()
    if checked is not None:
        fields["space_id"] = str(checked[1])
    return fields


def bearer_key(header: str) -> str:
    """The key of an ``authorization: Bearer <key>`` header (Unauthenticated otherwise)."""
    if not header:
        raise Unauthenticated("missing authorization metadata: send 'authorization: Bearer <key>'")
    scheme, _, secret = header.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Unauthenticated("authorization must be 'Bearer <key>'")
    return secret


def _space(raw: str) -> tuple[str, uuid.UUID]:
    """The request's ``space_id`` as sent and parsed (InvalidArgument: not a UUID)."""
    try:
        space_id = uuid.UUID(raw)
    except ValueError:
        description = "is required" if not raw else f"must be a UUID, got {raw[:64]!r}"
        raise InvalidArgument.field("space_id", description) from None
    return raw, space_id
