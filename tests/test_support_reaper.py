"""A killed test run leaves no server behind (tests/support/reaper.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.processes import gone
from tests.support.reaper import reap

pytestmark = pytest.mark.subprocess

DEADLINE_S = 60.0

# A test run's stand-in: an embedded PostgreSQL of its own and a process beside it (as a
# PgBouncer is), each started with its reaper; it reports them, then waits to be killed.
_RUN = """
import json, subprocess, sys, time
from tests.support.database import restartable_postgres
from tests.support.reaper import reap_with_this_process

with restartable_postgres() as postgres:
    folder = postgres._pgdata.parent
    beside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(folder)])
    reap_with_this_process(folder, beside.pid)
    postmaster = int((folder / "data" / "postmaster.pid").read_text().splitlines()[0])
    print(json.dumps({"folder": str(folder), "postmaster": postmaster, "beside": beside.pid}))
    sys.stdout.flush()
    time.sleep(600)
"""


def test_a_killed_run_s_postgres_and_processes_are_stopped_and_its_folder_deleted() -> None:
    """SIGKILL to a test run: its embedded PostgreSQL is stopped, the process started beside
    it is ended and the folder is deleted, all without the run's teardown."""
    run = subprocess.Popen(
        [sys.executable, "-c", _RUN], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert run.stdout is not None
    started = json.loads(run.stdout.readline())
    folder = Path(started["folder"])
    assert not gone(started["postmaster"]) and folder.exists()
    run.send_signal(signal.SIGKILL)
    run.wait()
    run.stdout.close()
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if gone(started["postmaster"]) and gone(started["beside"]) and not folder.exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"left behind after {DEADLINE_S:g} s: {started}")


def test_a_pid_that_names_another_folder_is_not_signalled(tmp_path: Path) -> None:
    """A pid given to the reaper that is now another process's (its command line does not
    name the folder) is left alone, and the folder is still deleted."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    folder = tmp_path / "reaped"
    folder.mkdir()
    try:
        reap(folder, [other.pid])
        assert other.poll() is None
        assert not folder.exists()
    finally:
        other.kill()
        other.wait()
