"""Stop what a test run started once the run is gone, when its own teardown did not run.

A pytest ended by SIGTERM or SIGKILL runs no teardown: scripts/test stops its background
passes with SIGTERM when the foreground fails (a lint error, Ctrl-C), and each left its
embedded PostgreSQL, its Citus nodes and its PgBouncer running, with their folders in /tmp.
Each of those is started with a reaper beside it (`reap_with_this_process`): a process of
its own session (a signal to the run's process group does not reach it) that waits for
the test run's process to end, then

- sends every PostgreSQL whose data directory lies in the folder a fast shutdown (SIGINT to
  the pid of its `postmaster.pid`) and waits for it to end;
- sends SIGTERM to the other processes it was given (a PgBouncer);
- each only while that pid's command line names the folder (not a pid reused since);
- deletes the folder.

After a teardown that ran, nothing is left for it to do: the servers are stopped and the
folder is gone. Standard library only: it starts in a few milliseconds.

    python tests/support/reaper.py OWNER_PID FOLDER [PID ...]
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import time
from pathlib import Path

STOP_WAIT_S = 30.0  # how long a PostgreSQL may take to stop before the folder goes anyway


def reap_with_this_process(folder: Path, *pids: int) -> None:
    """Start a reaper for `folder` (and `pids`) that acts once this process has ended."""
    # Spawned, not a Popen: it outlives this process, which never waits for it (a Popen
    # collected while its process runs is a ResourceWarning, an error in this suite).
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    os.posix_spawn(
        sys.executable,
        [sys.executable, __file__, str(os.getpid()), str(folder), *map(str, pids)],
        os.environ,
        file_actions=quiet,
        setsid=True,
    )


def wait_for_end(pid: int) -> None:
    """Return once process `pid` has ended."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        poller = select.poll()
        poller.register(handle, select.POLLIN)
        poller.poll()
    finally:
        os.close(handle)


def _runs_from(pid: int, folder: Path) -> bool:
    """Whether process `pid` runs and names `folder` in its command line: a pid file left
    behind, or a pid the system has given to another process since, is not signalled."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return os.fsencode(folder) in command


def _postmasters(folder: Path) -> list[int]:
    """The running PostgreSQL servers' pids whose data directory lies in `folder`."""
    found = []
    for pid_file in folder.glob("**/postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            found.append(int(pid_file.read_text().splitlines()[0]))
    return found


def reap(folder: Path, pids: list[int]) -> None:
    """Stop the servers in `folder` and the processes `pids`, then delete `folder`."""
    servers = [pid for pid in _postmasters(folder) if _runs_from(pid, folder)]
    for pid in servers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
    for pid in pids:
        if _runs_from(pid, folder):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while any(_runs_from(pid, folder) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> None:
    owner, folder, *pids = argv
    wait_for_end(int(owner))
    reap(Path(folder), [int(pid) for pid in pids])


if __name__ == "__main__":
    main(sys.argv[1:])
