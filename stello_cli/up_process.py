"""What belongs to the `stello up` process itself: one per config dir, and its signals.

Two `stello up` on one config dir wrote each other's credentials and console secret
(the client commands then called a gateway that had stopped): each holds an exclusive
lock on ``up.lock`` in the config dir while it runs, which says its pid and, once it
serves, its gateway. The lock is the kernel's (flock): a process that died, even by
SIGKILL, holds none, so the next `stello up` takes the file over whatever it says.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from stello_client.errors import ClientError

log = logging.getLogger(__name__)

LOCK_FILE = "up.lock"


class UpLock:
    """The lock of a config dir, held: what it says of this process."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def say(self, gateway: str = "") -> None:
        """Write this process's pid and (once it serves) its gateway into the lock file."""
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps({"pid": os.getpid(), "gateway": gateway}).encode(), 0)


@contextlib.contextmanager
def one_up(config_dir: Path) -> Iterator[UpLock]:
    """Hold `config_dir`'s lock while the block runs (module doc).

    Raises:
        ClientError: another live `stello up` holds it (one line: its pid and gateway,
            and what to do); its files are left as they are.
    """
    config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = config_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ClientError(running_line(config_dir, os.pread(fd, 4096, 0))) from None
        lock = UpLock(fd)
        lock.say()
        try:
            yield lock
        finally:
            os.ftruncate(fd, 0)  # a file that names no process: nothing runs here
    finally:
        os.close(fd)  # ends the lock


def running_line(config_dir: Path, said: bytes) -> str:
    """Why this `stello up` does not start: the one running on `config_dir`, and what to do."""
    try:
        holder = json.loads(said)
        who = f"pid {int(holder['pid'])}, " + (
            f"gateway {holder['gateway']}" if holder["gateway"] else "still starting"
        )
    except (ValueError, KeyError, TypeError):
        who = "starting"  # it has not written its pid yet
    return (
        f"another `stello up` ({who}) runs on the config dir {config_dir}: stop it first, "
        "or start this one with another config dir (STELLO_CONFIG_DIR)"
    )


@contextlib.asynccontextmanager
async def stop_on_signals() -> AsyncIterator[None]:
    """Turn SIGINT/SIGTERM into a cancellation of the current task, ended as a normal exit."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    received = 0

    def on_signal() -> None:
        nonlocal received
        received += 1
        if received == 1:
            log.info("stopping (a second Ctrl-C skips the grace period)")
        task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    try:
        yield
    except asyncio.CancelledError:
        if not received:
            raise
        while task.uncancel():
            pass
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
