"""Who a gateway RPC acts for: the caller's key, deadline and request id (from the interceptors)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from agent_gateway.clients import Caller
from stello.errors import Unauthenticated
from stello.serving.interceptors import api_key_var, request_id_var

if TYPE_CHECKING:
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def caller_of(context: Context) -> Caller:
    """The caller's key (forwarded to storage and tree), deadline and request id."""
    key = api_key_var.get()
    if not key:
        raise Unauthenticated("no API key in this context")
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    return Caller(key, deadline, request_id_var.get())
