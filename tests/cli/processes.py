"""Real `stello` processes for the CLI tests: `stello up` in a private home, and client runs."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.cli.forkwire import HEADER, PID, STATUS, read_exactly

ROOT = Path(__file__).resolve().parents[2]  # the repository's
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
    """Run `python -m stello_cli ARGS` to completion and capture its output, as a process
    forked from a fork server (tests/cli/forkserver.py, one per set of interpreter and gRPC
    settings)."""
    env = client_env(env)
    return ForkServer.serving(env).run(env, args, stdin)


CLI_TIMEOUT_S = 60

# What is read once, at the start (the interpreter's streams, locale and flags; gRPC's
# logging, read when it loads): a run forks from a server started with the same values only.
_START_SETTINGS = ("PYTHON", "LC_", "LANG", "GRPC_")


def _start_settings(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_START_SETTINGS)))


class ForkServer:
    """A running tests/cli/forkserver.py, one per interpreter set-up, for the whole run."""

    _servers: dict[tuple[tuple[str, str], ...], ForkServer] = {}
    _lock = threading.Lock()

    def __init__(self, env: dict[str, str]) -> None:
        self._folder = tempfile.mkdtemp(prefix="stello-cli-fork-")
        self.path = os.path.join(self._folder, "socket")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.forkserver", self.path],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline() != "ready\n":
            self._process.kill()
            raise RuntimeError("the CLI fork server did not start (its stderr is above)")
        atexit.register(self.stop)

    @classmethod
    def serving(cls, env: dict[str, str]) -> ForkServer:
        """The server for `env`'s interpreter set-up, started on first use."""
        key = _start_settings(env)
        with cls._lock:
            if key not in cls._servers:
                cls._servers[key] = cls(env)
            return cls._servers[key]

    def stop(self) -> None:
        """Stop the server (its runs end with their own processes)."""
        self._process.kill()
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def run(
        self, env: dict[str, str], args: tuple[str, ...], stdin: str | None
    ) -> subprocess.CompletedProcess[str]:
        """One run, as `subprocess.run(..., capture_output=True, text=True)` answers it."""
        argv = [sys.executable, "-m", "stello_cli", *args]
        request = json.dumps({"argv": list(args), "env": env, "cwd": os.getcwd()}).encode()
        read_in, write_in = os.pipe() if stdin is not None else (_inherited_stdin(), -1)
        read_out, write_out = os.pipe()
        read_err, write_err = os.pipe()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CLI_TIMEOUT_S)
            conn.connect(self.path)
            socket.send_fds(conn, [HEADER.pack(len(request))], [read_in, write_out, write_err])
            conn.sendall(request)
            for fd in (read_in, write_out, write_err):
                os.close(fd)
            pid = PID.unpack(read_exactly(conn, PID.size))[0]
            out, err = _communicate(write_in, read_out, read_err, stdin, pid, argv)
            code = STATUS.unpack(read_exactly(conn, STATUS.size))[0]
        return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


def _inherited_stdin() -> int:
    """This process's stdin for a run given none, as `subprocess` passes it on."""
    try:
        return os.dup(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)


def _communicate(
    write_in: int, read_out: int, read_err: int, stdin: str | None, pid: int, argv: list[str]
) -> tuple[bytes, bytes]:
    """Feed stdin and read stdout and stderr to their ends at once (as `communicate`), or
    kill the run past CLI_TIMEOUT_S (as `subprocess.run` raises TimeoutExpired)."""
    read: dict[int, bytes] = {read_out: b"", read_err: b""}

    def drain(fd: int) -> None:
        with open(fd, "rb") as stream:
            read[fd] = stream.read()

    def feed() -> None:
        with open(write_in, "wb") as stream, contextlib.suppress(BrokenPipeError):
            stream.write((stdin or "").encode(locale.getpreferredencoding(False)))

    threads = [threading.Thread(target=drain, args=(fd,)) for fd in (read_out, read_err)]
    if write_in >= 0:
        threads.append(threading.Thread(target=feed))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + CLI_TIMEOUT_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(argv, CLI_TIMEOUT_S)
    return read[read_out], read[read_err]


def _text(data: bytes) -> str:
    """Output as `subprocess.run(text=True)` decodes it: the locale's encoding, newlines
    translated."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
