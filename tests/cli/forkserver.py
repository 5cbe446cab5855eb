"""A fork server for the CLI tests' client runs: `stello` processes without the start-up cost.

The suite runs `python -m stello_cli ARGS` about 500 times. Each run spent most of its
~0.2 s of CPU starting an interpreter and importing the command's modules (grpc,
protobuf, the client), the same in every run. This server imports them once; for each run
it forks a process that takes the caller's environment, working folder, stdin, stdout and
stderr (the descriptors, passed over a Unix socket) and arguments, and runs
`stello_cli.main` as `python -m stello_cli` would, ending as the interpreter ends: the
threads joined, the exit functions run, the output flushed, its exit status passed back.

So a run is still a process of its own, with its own environment and descriptors, whose
exit status and output the test reads. What it does not check is the interpreter's start
and the import of the modules, which the processes started as themselves do
(tests/cli/test_startup.py, `StelloUp` in tests/cli/processes.py, pexpect's terminals,
tests/cli/test_forkserver.py).

    python -m tests.cli.forkserver SOCKET  (from the repository's root)

Request (client -> server): 4 bytes of length with the three descriptors (stdin,
stdout, stderr) attached, then that many bytes of JSON: {"argv": [...], "env": {...},
"cwd": "..."}. Reply: the run's process id (8 bytes), then its status as
`subprocess` reports it (4 bytes: the exit code, or minus the signal that ended it).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import socket
import sys
import threading
import traceback
from typing import Any

START_ENV = dict(os.environ)  # before the imports below set their defaults

import stello_cli  # noqa: E402 (after START_ENV)
from stello_cli import main  # noqa: E402
from tests.cli.forkwire import HEADER, PID, STATUS, read_exactly  # noqa: E402

# The modules the client commands load on demand: loaded here once, for every run.
PRELOAD = (
    "asyncio",
    "grpc",
    "grpc.aio",
    "google.protobuf.json_format",
    "stello_client",
    "stello_client.aio",
    "stello_cli.gateway",
    "stello_cli.output.format",
    "stello_cli.sessions.commands",
    "stello_cli.space.views",
    "stello_cli.space.search",
    "stello_cli.space.watch",
    "stello_cli.space.retention",
    "stello_cli.transfer.commands",
    "stello_cli.turns",
)


def _preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)


_preload()

# What the imports set where the environment had nothing (stello's and stello_cli's
# defaults for gRPC): set again in each run whose environment has nothing there either.
IMPORT_DEFAULTS = {k: v for k, v in os.environ.items() if k not in START_ENV}


ORPHAN_CHECK_S = 5.0  # how often an idle server checks that its test run is still there


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _flags, _address = socket.recv_fds(conn, HEADER.size, 3)
    (size,) = HEADER.unpack(head)
    return json.loads(read_exactly(conn, size)), fds


def _exit_code(exc: SystemExit) -> int:
    """The exit status the interpreter gives an uncaught SystemExit."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


def _run(request: dict[str, Any], fds: list[int]) -> int:
    """The run itself, in the forked process: `python -m stello_cli ARGV`, to its end."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as `python -m` puts the working folder first
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in IMPORT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    sys.argv = [os.path.join(os.path.dirname(stello_cli.__file__), "__main__.py")]
    sys.argv += request["argv"]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # as the interpreter does: the traceback, status 1
        traceback.print_exc()
        code = 1
    # The interpreter's end: non-daemon threads joined, exit functions, the streams flushed.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            code = 120  # as Python's finalization answers an unflushable stdout
    return code


def _serve_one(conn: socket.socket, listener: socket.socket) -> None:
    """In a child of the server: fork the run, pass its pid and status back, end."""
    request, fds = _receive(conn)
    pid = os.fork()
    if pid == 0:
        conn.close()
        listener.close()
        os._exit(_run(request, fds))
    for fd in fds:
        os.close(fd)
    conn.sendall(PID.pack(pid))
    _, status = os.waitpid(pid, 0)
    conn.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
    conn.close()


def serve(path: str) -> None:
    """Accept runs on the Unix socket at `path` until killed, or until the process that
    started it is gone (a test run killed before its exit functions ran)."""
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(ORPHAN_CHECK_S)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # The runs' processes are their handler's children; the handlers are reaped at once.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while os.getppid() == parent:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _serve_one(conn, listener)
            finally:
                os._exit(0)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
