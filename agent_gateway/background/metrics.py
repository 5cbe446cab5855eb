"""The background runner's Prometheus metrics, by kind: jobs queued and running (gauges),
runs ended by outcome, model calls and tokens spent.

Made with no registry and registered on the server's once it exists (`BackgroundRunner.start`),
so a runner built in a test counts without a server.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from agent_gateway.background.jobs import BUDGET_SPENT, FAILED, STOPPED
from stello.common.v1 import common_pb2

OUTCOMES = {
    common_pb2.JOB_STATUS_DONE: "done",
    BUDGET_SPENT: "budget_spent",
    STOPPED: "stopped",
    FAILED: "failed",
}


class RunnerMetrics:
    """The runner's Prometheus metrics, by kind."""

    def __init__(self) -> None:
        self.queued = Gauge(
            "stello_gateway_jobs_queued",
            "Background jobs waiting to run, by kind.",
            ["kind"],
            registry=None,
        )
        self.running = Gauge(
            "stello_gateway_jobs_running",
            "Background jobs running, by kind.",
            ["kind"],
            registry=None,
        )
        self.ended = Counter(
            "stello_gateway_jobs",
            "Background job runs ended, by kind and outcome (done, budget_spent, stopped, "
            "failed; busy: another run held the job).",
            ["kind", "outcome"],
            registry=None,
        )
        self.model_calls = Counter(
            "stello_gateway_job_model_calls",
            "Model calls made by background jobs.",
            ["kind"],
            registry=None,
        )
        self.tokens = Counter(
            "stello_gateway_job_tokens",
            "Tokens background jobs' model calls used, as providers reported them.",
            ["kind"],
            registry=None,
        )

    def register(self, registry: CollectorRegistry) -> None:
        """Count on `registry`."""
        for metric in (self.queued, self.running, self.ended, self.model_calls, self.tokens):
            registry.register(metric)
