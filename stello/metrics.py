"""Prometheus metrics per RPC: a counter by status code and a latency histogram.

Each server owns its registry (several servers may share a process, as under
`stello up` or in tests), exported on its own port when one is configured.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from stello.interceptors import Behavior, Context, HandlerInterceptor, outcome


class RpcMetrics:
    """The metric families of one server."""

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        self.service = service
        self.calls = Counter(
            "stello_rpc_calls",
            "RPCs handled, by method and status code.",
            ["service", "method", "code"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "stello_rpc_duration_seconds",
            "RPC handling time.",
            ["service", "method"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call."""
        self.calls.labels(self.service, method, code.name).inc()
        self.seconds.labels(self.service, method).observe(seconds)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Expose /metrics over HTTP on `port` (a daemon thread)."""
        start_http_server(port, addr=host, registry=self.registry)


class MetricsInterceptor(HandlerInterceptor):
    """Times every call and counts it by its final status code (an abandoned call as
    CANCELLED or DEADLINE_EXCEEDED, never OK)."""

    def __init__(self, metrics: RpcMetrics) -> None:
        super().__init__()
        self._metrics = metrics

    def decorate(self, behavior: Behavior, method: str, streaming: bool) -> Behavior:
        metrics = self._metrics

        def finish(context: Context, began: float, error: BaseException | None) -> None:
            metrics.observe(method, outcome(context, error), time.perf_counter() - began)

        if streaming:

            async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
                began = time.perf_counter()
                error: BaseException | None = None
                try:
                    async for item in behavior(request, context):
                        yield item
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    finish(context, began, error)

            return stream

        async def unary(request: Any, context: Context) -> Any:
            began = time.perf_counter()
            error: BaseException | None = None
            try:
                return await behavior(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                finish(context, began, error)

        return unary
