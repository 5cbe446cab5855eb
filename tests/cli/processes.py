"""Real `stello` processes for the CLI tests: `stello up` in a private home, and client runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

READY_TIMEOUT_S = 90.0
FREE_PORTS = (
    *("--storage-port", "0", "--tree-port", "0", "--gateway-port", "0"),
    *("--console-port", "0"),
)


def private_env(home: Path) -> dict[str, str]:
    """An environment whose home, XDG dirs, config and data dirs all live under `home`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("STELLO_", "XDG_", "OTEL_"))
    }
    runtime = home / "run"
    for folder in (home, home / "config", home / "data", runtime):
        folder.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_RUNTIME_DIR=str(runtime),
        STELLO_CONFIG_DIR=str(home / "config" / "stello"),
        STELLO_DATA_DIR=str(home / "data" / "pgdata"),
        STELLO_AUTH_CACHE_TTL_S="0",
        STELLO_SHUTDOWN_GRACE_S="2",
        PYTHONUNBUFFERED="1",
    )
    return env


# Makes the embedded cluster in argv[1] (initdb, start) and stops it: the library's own
# steps on a first `stello up`, before any database of ours.
_MAKE_CLUSTER = """
import sys
from pathlib import Path
from stello.db.embedded import embedded_cluster
with embedded_cluster(Path(sys.argv[1])):
    pass
"""
# What each start of the cluster writes anew: its options, its log, the processes using it.
_PER_START = ("postmaster.opts", "log", ".handle_pids.json")


def make_cluster_template(data_dir: Path) -> Path:
    """An initialized, stopped embedded cluster in `data_dir` (see `copy_cluster`)."""
    subprocess.run([sys.executable, "-c", _MAKE_CLUSTER, str(data_dir)], check=True, timeout=120)
    for name in _PER_START:
        (data_dir / name).unlink(missing_ok=True)
    return data_dir


def copy_cluster(template: Path, data_dir: str | Path) -> None:
    """Put a copy of the `cluster_template` fixture's cluster at `data_dir`, owners and modes
    kept (as root the cluster's files are another user's): a `stello up` there starts it
    without initdb, as a second start would. Only for the tests of what `stello up` does once
    its cluster exists; the first start's initdb stays covered by the others."""
    Path(data_dir).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(data_dir)], check=True, timeout=60)


def client_env(env: dict[str, str]) -> dict[str, str]:
    """`env` without asyncio debug mode, for client runs whose output a test compares exactly.

    Debug mode writes slow-callback warnings to stderr when the machine is busy;
    the servers under test keep it.
    """
    return {name: value for name, value in env.items() if name != "PYTHONASYNCIODEBUG"}


def run_cli(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m stello_cli ARGS` to completion and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "stello_cli", *args],
        env=client_env(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def cli_json(env: dict[str, str], *args: str) -> Any:
    """Run a client command with --json; fail the test with its stderr when it fails."""
    done = run_cli(env, *args, "--json")
    assert done.returncode == 0, f"stello {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def postgres_processes(data_dir: Path) -> list[psutil.Process]:
    """Live (not zombie) PostgreSQL processes serving `data_dir`."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        info = process.info
        if info["status"] == psutil.STATUS_ZOMBIE or not info["cmdline"]:
            continue
        if str(data_dir) in " ".join(info["cmdline"]):
            found.append(process)
    return found


def gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        # psutil is untyped here (no types-psutil in the lock): its answers are Any.
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@dataclass
class StelloUp:
    """A running `stello up` with its printed lines (gateway, storage, tree, space_id, key,
    ready, saved)."""

    env: dict[str, str]
    process: subprocess.Popen[str]
    lines: dict[str, str]
    reader: _LineReader
    stderr_path: Path
    output: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, env: dict[str, str], *extra: str) -> StelloUp:
        """Start it on free ports and wait for the last line of its banner (`saved:`)."""
        stderr_path = Path(env["HOME"]) / f"stello-up-{time.monotonic_ns()}.log"
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "stello_cli", "up", *FREE_PORTS, *extra],
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert process.stdout is not None
        lines: dict[str, str] = {}
        output: list[str] = []
        deadline = time.monotonic() + READY_TIMEOUT_S
        reader = _LineReader(process.stdout)
        while "saved" not in lines:
            line = reader.next(deadline - time.monotonic())
            if line is None:  # stopped as after a failed test, its output pipe closed
                failed = cls(env, process, lines, reader, stderr_path, output)
                failed.kill()
                raise AssertionError(
                    f"stello up never got ready: {output}\n{failed.stderr[-3000:]}"
                )
            output.append(line)
            name, sep, value = line.partition(": ")
            if sep:
                lines[name.strip()] = value.strip()
        return cls(env, process, lines, reader, stderr_path, output)

    @property
    def data_dir(self) -> Path:
        """The embedded PostgreSQL's data directory."""
        return Path(self.env["STELLO_DATA_DIR"])

    def postmaster_pid(self) -> int:
        """The pid of the embedded PostgreSQL (first line of postmaster.pid)."""
        return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])

    @property
    def stderr(self) -> str:
        """What it logged so far."""
        return self.stderr_path.read_text()

    def interrupt(self, timeout_s: float = 30) -> tuple[int, list[str]]:
        """Ctrl-C: SIGINT, then wait; its exit code and the lines it printed after ready."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=timeout_s)
        return code, self._drain()

    def _drain(self) -> list[str]:
        rest = []
        while (line := self.reader.next(5)) is not None:
            rest.append(line)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return rest

    def kill(self) -> None:
        """Cleanup after a failed test: make sure nothing is left running."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None and not self.process.stdout.closed:
            self._drain()


class _LineReader:
    """Reads a pipe's lines on a thread, so waiting for one can time out."""

    def __init__(self, stream: Any) -> None:
        self._lines: list[str | None] = []
        self._ready = threading.Condition()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            with self._ready:
                self._lines.append(line.rstrip("\n"))
                self._ready.notify()
        with self._ready:
            self._lines.append(None)
            self._ready.notify()

    def next(self, timeout_s: float) -> str | None:
        """The next line, or None at EOF or timeout."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._lines), timeout=max(timeout_s, 0)):
                return None
            return self._lines.pop(0)
