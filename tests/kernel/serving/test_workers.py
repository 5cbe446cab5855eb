"""``--workers N``: N processes serve one port under a supervisor (`stello.serving.workers`,
DESIGN §7, §9).

One tree service with two workers is shared by the module's tests (a real
``python -m tree_service`` with its sweeper, metrics on); the SIGTERM and
refusal tests start their own short-lived processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stello.channels import open_channel
from stello.db.periodic import ROUNDS
from stello.serving.workers import Supervisor, WorkerFailed, WorkerPlan
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.cli.processes import gone
from tests.support.fixtures import MakeSession, TestSpace
from tests.support.metrics import by_worker, calls_by_worker
from tests.support.ports import free_port
from tree_service.sweep.repository import SWEEP_LOCK_KEY
from tree_service.sweep.sweeper import Sweeper

pytestmark = [pytest.mark.sql, pytest.mark.subprocess]

WORKERS = 2
GET_NODE = "/stello.tree.v1.SessionTree/GetNode"


def children(pid: int) -> set[int]:
    """The processes `pid` started that are still running."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(c) for c in (task / "children").read_text().split())
    return found


@dataclass
class Supervised:
    """A ``python -m tree_service --workers N`` process, its ports and its stderr file."""

    process: asyncio.subprocess.Process
    port: int
    metrics_port: int
    stderr: IO[bytes]

    @property
    def address(self) -> str:
        """host:port its workers share."""
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        """What the supervisor and its workers wrote to stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def scrape(self) -> dict[str, float]:
        """GetNode calls by worker label, from the supervisor's merged /metrics."""
        return calls_by_worker(self.metrics_port, GET_NODE)

    def sweeps(self) -> dict[str, float]:
        """The provisional sweeper's rounds that ended without a failure, by worker label
        (one that found the sweep's lock held is one of them)."""
        return by_worker(self.metrics_port, f"{ROUNDS}_total", task=Sweeper.task_name, outcome="ok")

    async def until_each_swept(self, since: dict[str, float], rounds: int) -> None:
        """Until each worker's sweeper has ended `rounds` more rounds than `since` counted."""
        async with asyncio.timeout(30):
            while True:
                now = await asyncio.to_thread(self.sweeps)
                if len(now) == WORKERS and all(
                    n >= since.get(w, 0) + rounds for w, n in now.items()
                ):
                    break
                await asyncio.sleep(0.05)


async def start_tree(env: dict[str, str], *args: str) -> Supervised:
    """Start the tree service with `args` on free ports; wait until its port answers SERVING."""
    port, metrics_port = free_port(), free_port()
    stderr = tempfile.TemporaryFile()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tree_service",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=stderr,
    )
    supervised = Supervised(process, port, metrics_port, stderr)
    await wait_serving(supervised)
    return supervised


async def wait_serving(supervised: Supervised, within_s: float = 60) -> None:
    """Until the port answers SERVING and the supervisor said it listens; fail if it exited."""
    deadline = time.monotonic() + within_s
    async with open_channel(supervised.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if supervised.process.returncode is not None:
                raise AssertionError(f"tree exited: {supervised.log()[-3000:]}")
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                if reply.status == health_pb2.HealthCheckResponse.SERVING and (
                    "workers (pids" in supervised.log()
                ):
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"not SERVING within {within_s} s: {supervised.log()[-3000:]}")


async def stop(supervised: Supervised) -> int:
    """SIGTERM the supervisor; its exit status."""
    if supervised.process.returncode is None:
        supervised.process.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(supervised.process.wait(), timeout=30)


@pytest.fixture(name="tree_env", scope="module")
def _tree_env(database_env: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        **database_env,
        "STELLO_AUTH_CACHE_TTL_S": "0",
        "STELLO_TREE_SWEEP_INTERVAL_S": "0.1",
        "STELLO_DB_POOL_MAX_SIZE": "4",
        "STELLO_SHUTDOWN_GRACE_S": "2",
    }


@pytest.fixture(name="tree", scope="module")
async def _tree(tree_env: dict[str, str]) -> AsyncIterator[Supervised]:
    supervised = await start_tree(tree_env, "--workers", str(WORKERS))
    try:
        yield supervised
    finally:
        await stop(supervised)
        supervised.stderr.close()


async def spread_calls(supervised: Supervised, space: TestSpace, session: uuid.UUID) -> None:
    """48 GetNode calls over 16 connections taken in turn (SO_REUSEPORT spreads connections)."""
    request = tree_pb2.GetNodeRequest(space_id=space.sid, session_id=str(session))
    async with open_channel(supervised.address, key=space.key, connections=16) as channel:
        stub = tree_pb2_grpc.SessionTreeStub(channel)
        for _ in range(48):
            await stub.GetNode(request, timeout=10, wait_for_ready=True)


class TestWorkers:
    async def test_every_worker_answers_on_the_one_port(
        self, tree: Supervised, space: TestSpace, make_session: MakeSession
    ) -> None:
        """Calls on 16 connections reach both workers, counted apart in the merged /metrics."""
        session = await make_session()
        assert len(children(tree.process.pid)) == WORKERS
        await spread_calls(tree, space, session)
        calls = await asyncio.to_thread(tree.scrape)
        assert sorted(calls) == [str(i) for i in range(WORKERS)], calls
        assert all(count > 0 for count in calls.values()), calls
        assert sum(calls.values()) >= 48

    async def test_workers_sweep_under_the_one_lock(
        self, tree: Supervised, pool: asyncpg.Pool, space: TestSpace, make_session: MakeSession
    ) -> None:
        """While the sweep lock is held no worker sweeps; once free, the expired rows go."""
        expired = [await make_session(provisional=True) for _ in range(3)]
        due = (
            "UPDATE sessions SET provisional_until = now() - interval '1 s'"
            " WHERE space_id = $1 AND id = ANY($2::uuid[])"
        )
        left = "SELECT count(*) FROM sessions WHERE space_id = $1 AND id = ANY($2::uuid[])"
        async with pool.acquire() as holder, holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock($1)", SWEEP_LOCK_KEY)
            await pool.execute(due, space.id, expired)
            since = await asyncio.to_thread(tree.sweeps)
            await tree.until_each_swept(since, 2)  # the second began after the rows were due
            assert await pool.fetchval(left, space.id, expired) == 3
        for _ in range(200):  # 20 s
            if not await pool.fetchval(left, space.id, expired):
                break
            await asyncio.sleep(0.1)
        assert await pool.fetchval(left, space.id, expired) == 0

    async def test_a_killed_worker_is_replaced(
        self, tree: Supervised, space: TestSpace, make_session: MakeSession
    ) -> None:
        """A worker killed with SIGKILL is replaced; the port keeps answering on every
        connection."""
        session = await make_session()
        before = children(tree.process.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = children(tree.process.pid)
            if victim not in now and len(now) == WORKERS and "starting another" in tree.log():
                break
            await asyncio.sleep(0.1)
        now = children(tree.process.pid)
        assert victim not in now and len(now) == WORKERS, tree.log()[-2000:]
        await wait_serving(tree)
        await spread_calls(tree, space, session)
        assert tree.process.returncode is None

    async def test_a_second_deployment_is_refused(
        self, tree: Supervised, tree_env: dict[str, str]
    ) -> None:
        """Another supervisor, or a single process, on the claimed port stops with a message."""
        for workers in ("2", "1"):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tree_service",
                "--port",
                str(tree.port),
                "--workers",
                workers,
                env=tree_env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
            said = stderr.decode()
            assert process.returncode == 1, said
            assert "Traceback" not in said
            if workers == "2":
                assert f"port {tree.port} is served by another Stello deployment" in said
            else:
                assert f"cannot listen on 127.0.0.1:{tree.port}" in said
        assert tree.process.returncode is None


async def test_sigterm_stops_every_worker(tree_env: dict[str, str]) -> None:
    """SIGTERM stops the supervisor and all its workers cleanly (exit 0), and frees the port."""
    supervised = await start_tree(tree_env, "--workers", "2")
    workers = children(supervised.process.pid)
    assert len(workers) == 2
    try:
        assert await stop(supervised) == 0, supervised.log()[-2000:]
    finally:
        supervised.stderr.close()
    assert all(gone(pid) for pid in workers)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", supervised.port))  # no worker and no guard holds it


async def test_workers_stop_when_the_supervisor_is_killed(tree_env: dict[str, str]) -> None:
    """A supervisor killed with SIGKILL leaves no worker serving its port (their lifeline
    closes)."""
    supervised = await start_tree(tree_env, "--workers", "2")
    workers = children(supervised.process.pid)
    try:
        supervised.process.send_signal(signal.SIGKILL)
        await supervised.process.wait()
        deadline = time.monotonic() + 30
        while not all(gone(pid) for pid in workers):
            assert time.monotonic() < deadline, supervised.log()[-2000:]
            await asyncio.sleep(0.1)
        assert "the supervisor is gone" in supervised.log()
    finally:
        for pid in workers:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        supervised.stderr.close()


# Worker 0 exits at once; worker 1 never says it is ready (it would wait for good).
FAILING_START = """
import json, os, sys, time
role = json.loads(os.environ["STELLO_WORKER"])
if role["index"] == 0:
    sys.exit(3)
time.sleep(600)
"""


async def test_a_worker_that_cannot_start_stops_the_others_and_is_named() -> None:
    """One worker exits before it is ready: `Supervisor.start` fails naming that worker and
    its exit, once every other worker's start has ended and its process was stopped (none
    is left starting or running behind the supervisor's back)."""
    plan = WorkerPlan("probe", [sys.executable, "-c", FAILING_START], workers=2, grace_s=1)
    supervisor = Supervisor(plan)
    with pytest.raises(WorkerFailed) as failed:
        await supervisor.start()
    assert str(failed.value) == (
        "probe worker 0 exited with status 3 before it was ready; the other workers were stopped"
    )
    starting = [
        t
        for t in asyncio.all_tasks()
        if getattr(t.get_coro(), "__qualname__", "") == "Supervisor._start"
    ]
    assert starting == []
    pids = supervisor.pids
    assert len(pids) == 2 and all(gone(pid) for pid in pids)
