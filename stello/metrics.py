"""Prometheus metrics per RPC: a counter by status code and a latency histogram.

Each server owns its registry (several servers may share a process, as under
`stello up` or in tests), exported on its own port when one is configured.
A method's metric children are looked up once (`RpcMetrics.method`), its
counter child per status code on that code's first call: a call costs two
increments, no label lookup.
"""

from __future__ import annotations

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server


class MethodMetrics:
    """The metric children of one method: its histogram and a counter per status code."""

    __slots__ = ("_by_code", "_calls", "_method", "_seconds", "_service")

    def __init__(self, calls: Counter, seconds: Histogram, service: str, method: str) -> None:
        self._calls = calls
        self._service = service
        self._method = method
        self._seconds = seconds.labels(service, method)
        self._by_code: dict[grpc.StatusCode, Counter] = {}

    def observe(self, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call that ended with `code` after `seconds`."""
        counter = self._by_code.get(code)
        if counter is None:
            counter = self._calls.labels(self._service, self._method, code.name)
            self._by_code[code] = counter
        counter.inc()
        self._seconds.observe(seconds)


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
        self._methods: dict[str, MethodMetrics] = {}

    def method(self, method: str) -> MethodMetrics:
        """The children of `method` (built on first use, then shared)."""
        found = self._methods.get(method)
        if found is None:
            found = MethodMetrics(self.calls, self.seconds, self.service, method)
            self._methods[method] = found
        return found

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call."""
        self.method(method).observe(code, seconds)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Expose /metrics over HTTP on `port` (a daemon thread)."""
        start_http_server(port, addr=host, registry=self.registry)
