"""Reading a supervisor's merged /metrics in tests."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def calls_by_worker(port: int, method: str) -> dict[str, float]:
    """Calls of `method` by worker label, from the merged /metrics on loopback `port`."""
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "stello_rpc_calls_total" and sample.labels["method"] == method:
                worker = sample.labels["worker"]
                calls[worker] = calls.get(worker, 0.0) + sample.value
    return calls
