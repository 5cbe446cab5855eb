"""Prometheus metrics per RPC: a counter by status code and a latency histogram.

Each server owns its registry (several servers may share a process, as under
`stello up` or in tests), exported on its own port when one is configured.
A service run as several worker processes (`stello.serving.workers`) exports one page:
each worker serves its registry on a loopback port of its own, and the
supervisor's `WorkersCollector` reads them when scraped, every sample labelled
with its `worker` (sum over it for the service's totals).

A call costs a few plain additions, no lock and no label lookup: each method's
counts live in a `MethodMetrics` (looked up once, `RpcMetrics.method`), and the
registry reads them through `RpcCollector` when scraped. prometheus_client's
own Counter and Histogram take a lock per increment and walk the buckets in
Python (about 4.5 µs a call against about 1 µs here, on every hop of every
call). Only the server's event loop thread writes a method's counts; a scrape
from the /metrics thread reads them as they are at that moment. So do the calls
in flight (a method's `in_flight`, which the call chain adds to as a call starts
and takes from as it ends) and the database pool's connections (`PoolCollector`):
saturation shows as connections all in use and calls piling up (explore11 F7).
"""

from __future__ import annotations

import bisect
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping

import asyncpg
import grpc
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""The histogram's upper bounds in seconds (then +Inf)."""

CALLS = "stello_rpc_calls"
SECONDS = "stello_rpc_duration_seconds"
IN_FLIGHT = "stello_rpc_in_flight"
IN_FLIGHT_HELP = "RPCs being handled now, by method (streams until they end)."
POOL_CONNECTIONS = "stello_db_pool_connections"
POOL_MAX = "stello_db_pool_max_connections"
LABELS = ("service", "method")


class MethodMetrics:
    """One method's counts: calls per status code, and its latency histogram."""

    __slots__ = ("buckets", "by_code", "created", "in_flight", "method", "sum")

    def __init__(self, method: str) -> None:
        self.method = method
        self.created = time.time()
        self.by_code: dict[grpc.StatusCode, int] = {}
        self.buckets = [0] * (len(BUCKETS) + 1)
        """Observations per bucket (not cumulative); the last one is +Inf."""
        self.sum = 0.0
        self.in_flight = 0
        """Calls started and not yet finished (the call chain keeps it)."""

    def observe(self, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call that ended with `code` after `seconds`."""
        by_code = self.by_code
        by_code[code] = by_code.get(code, 0) + 1
        # bisect_left: a value equal to a bound falls in that bound's bucket (le).
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds


class RpcCollector(Collector):
    """The two families of a server's methods, as the registry asks for them."""

    def __init__(self, service: str, methods: dict[str, MethodMetrics]) -> None:
        self._service = service
        self._methods = methods

    def describe(self) -> Iterator[Metric]:
        """The families, empty (what the registry checks names with)."""
        yield CounterMetricFamily(CALLS, "RPCs handled, by method and status code.")
        yield HistogramMetricFamily(SECONDS, "RPC handling time.")
        yield GaugeMetricFamily(IN_FLIGHT, IN_FLIGHT_HELP)

    def collect(self) -> Iterator[Metric]:
        """The families with every method's counts so far."""
        calls = CounterMetricFamily(
            CALLS, "RPCs handled, by method and status code.", labels=["service", "method", "code"]
        )
        seconds = HistogramMetricFamily(SECONDS, "RPC handling time.", labels=LABELS)
        in_flight = GaugeMetricFamily(IN_FLIGHT, IN_FLIGHT_HELP, labels=LABELS)
        bounds = [*map(floatToGoString, BUCKETS), "+Inf"]
        for method in list(self._methods.values()):
            for code, count in list(method.by_code.items()):
                calls.add_metric([self._service, method.method, code.name], count, method.created)
            cumulative, total = [], 0
            for bound, count in zip(bounds, list(method.buckets), strict=True):
                total += count
                cumulative.append((bound, total))
            seconds.add_metric([self._service, method.method], cumulative, method.sum)
            # As prometheus_client's own histogram reports it (its family has no argument).
            labels = {"service": self._service, "method": method.method}
            seconds.samples.append(Sample(f"{SECONDS}_created", labels, method.created))
            in_flight.add_metric([self._service, method.method], method.in_flight)
        yield calls
        yield seconds
        yield in_flight


class PoolCollector(Collector):
    """A server's database pool, as /metrics asks: its connections idle and in use, and the
    most it may open. The servers of one process that share a pool (`stello up`) each show
    it whole."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    def describe(self) -> Iterator[Metric]:
        """The families, empty (what the registry checks names with)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with the pool's counts now."""
        connections, most = self._families()
        pool = self._pool
        idle = pool.get_idle_size()
        connections.add_metric(["idle"], idle)
        connections.add_metric(["in_use"], max(pool.get_size() - idle, 0))
        most.add_metric([], pool.get_max_size())
        yield connections
        yield most

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                POOL_CONNECTIONS,
                "The database pool's open connections, by state: idle, in_use (all in use at "
                "the max: calls wait for one).",
                labels=["state"],
            ),
            GaugeMetricFamily(POOL_MAX, "The most connections the database pool may open."),
        )


class RpcMetrics:
    """The metric families of one server."""

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        self.service = service
        self._methods: dict[str, MethodMetrics] = {}
        self.registry.register(RpcCollector(service, self._methods))

    def method(self, method: str) -> MethodMetrics:
        """The counts of `method` (built on first use, then shared)."""
        found = self._methods.get(method)
        if found is None:
            found = MethodMetrics(method)
            self._methods[method] = found
        return found

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call."""
        self.method(method).observe(code, seconds)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Expose /metrics over HTTP on `port` (a daemon thread); the port bound (0 = any)."""
        return serve_registry(self.registry, port, host)


def serve_registry(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> int:
    """Expose `registry` as /metrics over HTTP on `port` (a daemon thread); the port bound."""
    httpd, _ = start_http_server(port, addr=host, registry=registry)
    bound: int = httpd.server_port
    return bound


def serve_merged(ports: Callable[[], Mapping[int, int]], port: int, host: str) -> int:
    """Serve on `port` the /metrics of the workers `ports` answers (where each ready one
    serves its own, by worker index), merged and labelled `worker`; the port bound.

    Raises:
        OSError: `port` is taken.
    """
    registry = CollectorRegistry()
    registry.register(WorkersCollector(ports))
    return serve_registry(registry, port, host.strip("[]") or "127.0.0.1")


class WorkersCollector(Collector):
    """The metrics of a service's workers, read from each one's /metrics when scraped.

    `ports` answers where each ready worker serves them, by worker index; a worker
    that does not answer (being replaced) is left out of that scrape.
    """

    def __init__(self, ports: Callable[[], Mapping[int, int]], timeout_s: float = 2.0) -> None:
        self._ports = ports
        self._timeout_s = timeout_s

    def describe(self) -> Iterator[Metric]:
        """Nothing known before a scrape (the families are the workers')."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        """Every worker's families merged, each sample with a `worker` label."""
        merged: dict[str, Metric] = {}
        for index, port in sorted(self._ports().items()):
            try:
                text = self._read(port)
            except OSError:
                continue
            for family in text_string_to_metric_families(text):
                into = merged.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for sample in family.samples:
                    labels = {**sample.labels, "worker": str(index)}
                    into.samples.append(sample._replace(labels=labels))
        yield from merged.values()

    def _read(self, port: int) -> str:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=self._timeout_s) as reply:
            text: str = reply.read().decode()
        return text
