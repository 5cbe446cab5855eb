"""Observability: request ids in log lines, /metrics over HTTP, traces across the services."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import subprocess
import sys
import urllib.request
import uuid
from functools import partial
from pathlib import Path
from typing import Literal

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stello.serving.interceptors import request_id_var
from stello.storage.v1 import storage_pb2, storage_pb2_grpc
from stello.telemetry.logs import LogSettings, build_handler
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from storage_service.app import create_app as storage_app
from tests.support.fixtures import ServerStarter, TestSpace
from tests.support.ports import free_port
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

REPO = Path(__file__).resolve().parents[2]
SERVICES = {"storage": "stello.storage.v1.SessionStorage", "tree": "stello.tree.v1.SessionTree"}


class CapturedLogs:
    """A handler of `stello.telemetry.logs` on a logger, writing into a string."""

    def __init__(self, logger: str, log_format: Literal["text", "json"]) -> None:
        self.stream = io.StringIO()
        self.logger = logging.getLogger(logger)
        self.handler = build_handler(LogSettings(format=log_format), self.stream)
        self.level = self.logger.level

    def __enter__(self) -> CapturedLogs:
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *_: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)

    def lines(self) -> list[str]:
        """What was written, one entry per line."""
        return self.stream.getvalue().splitlines()


class TestLogs:
    def test_json_line_carries_the_current_request_id(self) -> None:
        """Inside an RPC's context any logger's JSON line has that request id; outside, '-'."""
        with CapturedLogs("stello.test", "json") as logs:
            token = request_id_var.set("req-42")
            try:
                logging.getLogger("stello.test").info("inside %s", "a call", extra={"n": 3})
            finally:
                request_id_var.reset(token)
            logging.getLogger("stello.test").warning("outside")
        inside, outside = (json.loads(line) for line in logs.lines())
        assert inside["message"] == "inside a call"
        assert (inside["request_id"], inside["level"], inside["n"]) == ("req-42", "INFO", 3)
        assert outside["request_id"] == "-"

    @pytest.mark.sql
    async def test_rpc_log_line_has_the_callers_request_id(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """The per-call log line (text format) names the x-request-id the client sent."""
        running = await start_server(storage_app)
        with CapturedLogs("stello.rpc", "text") as logs:
            async with running.channel() as channel:
                with pytest.raises(grpc.aio.AioRpcError):
                    await storage_pb2_grpc.SessionStorageStub(channel).GetSession(
                        storage_pb2.GetSessionRequest(
                            space_id=space.sid, session_id=str(uuid.uuid4())
                        ),
                        metadata=(*space.metadata, ("x-request-id", "trace-me-7")),
                    )
        (line,) = [line for line in logs.lines() if "GetSession" in line]
        method = "/stello.storage.v1.SessionStorage/GetSession"
        assert f"INFO stello.rpc [trace-me-7] rpc {method} " in line
        assert " NOT_FOUND " in line

    @pytest.mark.sql
    async def test_a_json_access_line_names_the_key_and_space(
        self, start_server: ServerStarter, space: TestSpace
    ) -> None:
        """In JSON the access line carries its fields: method, code, milliseconds, and the
        key id and space the call was admitted for (explore9 F9: only the message had the
        method, and nothing said whose call it was); never the key itself."""
        running = await start_server(storage_app)
        with CapturedLogs("stello.rpc", "json") as logs:
            async with running.channel() as channel:
                with pytest.raises(grpc.aio.AioRpcError):
                    await storage_pb2_grpc.SessionStorageStub(channel).GetSession(
                        storage_pb2.GetSessionRequest(
                            space_id=space.sid, session_id=str(uuid.uuid4())
                        ),
                        metadata=(*space.metadata, ("x-request-id", "trace-me-8")),
                    )
        (line,) = [json.loads(line) for line in logs.lines() if "GetSession" in line]
        assert {k: line[k] for k in ("request_id", "rpc_method", "code")} == {
            "request_id": "trace-me-8",
            "rpc_method": "/stello.storage.v1.SessionStorage/GetSession",
            "code": "NOT_FOUND",
        }
        assert (line["key_id"], line["space_id"]) == (str(space.key_id), space.sid)
        assert isinstance(line["duration_ms"], float)
        assert space.key not in json.dumps(line)


@pytest.mark.sql
async def test_metrics_are_scraped_over_http(start_server: ServerStarter, space: TestSpace) -> None:
    """STELLO_TREE_METRICS_PORT serves Prometheus text with a count per method and code."""
    port = free_port()
    running = await start_server(partial(tree_app, config=TreeSettings(metrics_port=port)))
    async with running.channel() as channel:
        stub = tree_pb2_grpc.SessionTreeStub(channel)
        for _ in range(3):
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetNode(
                    tree_pb2.GetNodeRequest(space_id=space.sid, session_id=str(uuid.uuid4())),
                    metadata=space.metadata,
                )
    url = f"http://127.0.0.1:{port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    samples = {
        (sample.name, sample.labels.get("method"), sample.labels.get("code")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    method = "/stello.tree.v1.SessionTree/GetNode"
    assert samples[("stello_rpc_calls_total", method, "NOT_FOUND")] == 3
    assert samples[("stello_rpc_duration_seconds_count", method, None)] == 3
    tasks = {
        sample.labels["task"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "stello_background_rounds_total" and sample.labels["outcome"] == "ok"
    }
    # Each background task is counted (explore9 F9), its first round made at start.
    assert tasks == {"stello-tree-sweeper", "stello-tree-eraser", "stello-tree-retention"}


@pytest.mark.sql
@pytest.mark.subprocess
def test_one_send_is_one_trace_across_the_services(
    database_url: str, database_env: dict[str, str]
) -> None:
    """With tracing on, a Send (gateway, storage) and a Fork (and tree) are one trace each."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.deploy.trace_probe", database_url],
        cwd=REPO,
        env={**os.environ, **database_env, "STELLO_AUTH_CACHE_TTL_S": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    traces = json.loads(done.stdout)
    for rpc, services in (("Send", {"storage"}), ("Fork", {"storage", "tree"})):
        spans = traces[rpc.lower()]
        assert len({s["trace_id"] for s in spans}) == 1, spans
        name = f"/stello.agent.v1.AgentGateway/{rpc}"
        ours = [s for s in spans if s["name"] == name]
        assert sorted(s["kind"] for s in ours) == ["CLIENT", "SERVER"]  # caller's, gateway's
        (gateway,) = [s for s in ours if s["kind"] == "SERVER"]
        calls = [s for s in spans if s["parent_id"] == gateway["span_id"]]
        assert calls and {s["kind"] for s in calls} == {"CLIENT"}  # the gateway's own calls
        served = {s["name"].split("/")[1] for s in spans if s["kind"] == "SERVER"}
        assert served == {"stello.agent.v1.AgentGateway"} | {SERVICES[x] for x in services}
