"""Reading a supervisor's merged /metrics in tests."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def calls_by_worker(port: int, method: str) -> dict[str, float]:
    """Calls of `method` by worker label, from the merged /metrics on loopback `port`."""
    return by_worker(port, "stello_rpc_calls_total", method=method)


def by_worker(port: int, name: str, **labels: str) -> dict[str, float]:
    """The samples `name` that have `labels` (among others), summed by worker label, from
    the merged /metrics on loopback `port`."""
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                worker = sample.labels["worker"]
                found[worker] = found.get(worker, 0.0) + sample.value
    return found


def sample(port: int, name: str, **labels: str) -> float | None:
    """The value of the sample `name` with `labels` that /metrics on loopback `port` serves
    (None: no such series)."""
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    return None
