"""Run the three services in this process with tracing into memory; print one Send's and
one Fork's spans.

``python -m tests.deploy.trace_probe DSN`` prints ``{"send": [...], "fork": [...]}``,
each a list of spans (name, kind, trace and span ids, parent). It runs as its
own process because tracing instruments ``grpc.aio`` for the whole process.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.db.pool import create_pool
from stello.serving.server import ServiceApp, shutdown
from stello.settings import StelloSettings
from stello.telemetry.tracing import TracingSettings, setup_tracing
from stello_cli.up.suite import Ports, start_servers


def finished(exporter: InMemorySpanExporter) -> list[dict[str, str | None]]:
    """The spans recorded since the last call, as dicts; clears the exporter."""
    spans = [
        {
            "name": span.name,
            "kind": span.kind.name,
            "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}",
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        }
        for span in exporter.get_finished_spans()
        if span.context is not None
    ]
    exporter.clear()
    return spans


async def probe(dsn: str, exporter: InMemorySpanExporter) -> dict[str, list[dict[str, str | None]]]:
    """Start storage, tree and gateway; create a root; record a Send, then a Fork."""
    settings = StelloSettings(database_url=dsn, auth_cache_ttl_s=0, shutdown_grace_s=1)
    async with create_pool(dsn, settings) as pool:
        keys = KeyStore(pool, 0)
        tag = uuid.uuid4().hex[:10]
        created = await keys.create_key(space=f"trace-{tag}", principal=f"trace-{tag}")
        space = str(created.space_id)
        running: list[tuple[ServiceApp, grpc.aio.Server]] = []
        try:
            addresses = await start_servers(
                settings, Ports("127.0.0.1", 0, 0, 0), pool, keys, running
            )
            async with open_channel(addresses["gateway"], key=created.secret) as channel:
                gateway = agent_pb2_grpc.AgentGatewayStub(channel)
                root = await gateway.CreateRoot(agent_pb2.CreateRootRequest(space_id=space))
                exporter.clear()
                await gateway.Send(
                    agent_pb2.SendRequest(
                        space_id=space, session_id=root.session.id, content="trace me"
                    )
                )
                await asyncio.sleep(0.2)  # the servers' spans end after the reply is sent
                traces = {"send": finished(exporter)}
                await gateway.Fork(
                    agent_pb2.ForkRequest(
                        space_id=space, source_session_id=root.session.id, label="traced"
                    )
                )
                await asyncio.sleep(0.2)
                traces["fork"] = finished(exporter)
                return traces
        finally:
            for app, server in reversed(running):
                await shutdown(app, server, 0)


def main() -> None:
    """Probe, then print the spans as JSON."""
    exporter = InMemorySpanExporter()
    provider = setup_tracing(TracingSettings(), "trace-probe", exporter)
    assert provider is not None
    json.dump(asyncio.run(probe(sys.argv[1], exporter)), sys.stdout)


if __name__ == "__main__":
    main()
