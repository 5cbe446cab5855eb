"""What belongs to the `stello up` process itself: one per config dir, and its signals.

Two `stello up` on one config dir wrote each other's credentials and console secret
(the client commands then called a gateway that had stopped): each holds an exclusive
lock on ``up.lock`` in the config dir while it runs, which says its pid and, once it
serves, its gateway. Two on one data dir (their own config dirs) ran one embedded
PostgreSQL, both supervising it: one running the embedded PostgreSQL also holds
``pgdata.up.lock`` beside its data dir. The locks are the kernel's (flock): a process
that died, even by SIGKILL, holds none, so the next `stello up` takes the file over
whatever it says.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from stello_client.errors import ClientError

log = logging.getLogger(__name__)

LOCK_FILE = "up.lock"


class UpLock:
    """The locks this process holds (its config dir's, and its data dir's when it runs the
    embedded PostgreSQL): what they say of it."""

    def __init__(self, fds: list[int], config_dir: Path) -> None:
        self._fds = fds
        self._config_dir = config_dir

    def say(self, gateway: str = "") -> None:
        """Write this process's pid, config dir and (once it serves) gateway into the locks."""
        said = {"pid": os.getpid(), "gateway": gateway, "config_dir": str(self._config_dir)}
        for fd in self._fds:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(said).encode(), 0)


@contextlib.contextmanager
def one_up(
    config_dir: Path, data_dir: Path | None = None, source: str = "STELLO_DATA_DIR"
) -> Iterator[UpLock]:
    """Hold `config_dir`'s lock, and `data_dir`'s (the embedded PostgreSQL's data
    directory; None for a database of STELLO_DATABASE_URL), while the block runs; `source`
    says what chose `data_dir` (`sharing_line`).

    Raises:
        ClientError: another live `stello up` holds either (one line: its pid and
            gateway, and what to do); its files are left as they are.
    """
    made_dir = not config_dir.exists()
    _make_config_dir(config_dir)
    config_lock = config_dir / LOCK_FILE
    made_lock = not config_lock.exists()
    with contextlib.ExitStack() as held:
        fds = [
            held.enter_context(_locked(config_lock, lambda said: running_line(config_dir, said)))
        ]
        if data_dir is not None:
            try:
                data_dir.parent.mkdir(parents=True, exist_ok=True)
                shared = data_dir

                def sharing(said: bytes) -> str:
                    return sharing_line(shared, said, source)

                fds.append(held.enter_context(_locked(data_lock(data_dir), sharing)))
            except ClientError:
                _unmake(config_lock if made_lock else None, config_dir if made_dir else None)
                raise
        lock = UpLock(fds, config_dir)
        lock.say()
        yield lock


def _make_config_dir(config_dir: Path) -> None:
    """Make `config_dir` (one there is fine); one line naming it (and STELLO_CONFIG_DIR when
    that chose it) when it is a file or cannot be made, where `[Errno 17] File exists` was."""
    name = "STELLO_CONFIG_DIR" if os.environ.get("STELLO_CONFIG_DIR") else "the config dir"
    if config_dir.exists() and not config_dir.is_dir():
        raise ClientError(f"{name}: {config_dir} is a file, not a folder")
    try:
        config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ClientError(f"{name}: cannot make {config_dir}: {exc.strerror}") from None


def _unmake(lock_file: Path | None, config_dir: Path | None) -> None:
    """Remove what a refused `stello up` made: its config dir's lock file (still held, so
    no other process uses it: one that opened it before finds it gone once it has the lock,
    `_locked`) and the config dir (when empty)."""
    if lock_file is not None:
        lock_file.unlink(missing_ok=True)
    if config_dir is not None:
        with contextlib.suppress(OSError):  # not empty: something else put a file there
            config_dir.rmdir()


def data_lock(data_dir: Path) -> Path:
    """The lock of a data directory: a file beside it (PostgreSQL's initdb wants the
    directory itself empty)."""
    return data_dir.parent / f"{data_dir.name}.{LOCK_FILE}"


@contextlib.contextmanager
def _locked(path: Path, refusal: Callable[[bytes], str]) -> Iterator[int]:
    """The lock file at `path`, held (its descriptor) until the block ends; a ClientError
    naming its holder (`refusal` of what its lock says) when another process holds it."""
    fd = _lock(path, refusal)
    try:
        try:
            yield fd
        finally:
            os.ftruncate(fd, 0)  # a file that names no process: nothing runs here
    finally:
        os.close(fd)  # ends the lock


def _lock(path: Path, refusal: Callable[[bytes], str]) -> int:
    """A descriptor of the file at `path`, locked; a ClientError naming its holder (`refusal`)
    when another process holds it. A file removed between its open and its lock (a refused
    `stello up` removes the lock file it made, `_unmake`) is opened again: the lock is the
    one file at `path`'s."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            said = os.pread(fd, 4096, 0)
            os.close(fd)
            raise ClientError(refusal(said)) from None
        if _is_file_at(fd, path):
            return fd
        os.close(fd)


def _is_file_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the one at `path` (not removed meanwhile)."""
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def _holder(said: bytes) -> tuple[str, str]:
    """The running one as its lock names it: `pid N, gateway G` (or that it starts), and
    its config dir ("" when not said)."""
    try:
        holder = json.loads(said)
        who = f"pid {int(holder['pid'])}, " + (
            f"gateway {holder['gateway']}" if holder["gateway"] else "still starting"
        )
    except (ValueError, KeyError, TypeError):
        return "starting", ""  # it has not written its pid yet
    config = holder.get("config_dir")
    return who, config if isinstance(config, str) else ""


def running_line(config_dir: Path, said: bytes) -> str:
    """Why this `stello up` does not start: the one running on `config_dir`, and what to do."""
    who, _ = _holder(said)
    return (
        f"another `stello up` ({who}) runs on the config dir {config_dir}: stop it first, "
        "or start this one with another config dir (STELLO_CONFIG_DIR)"
    )


CHOSEN = {"--data-dir": "given with --data-dir", "STELLO_DATA_DIR": "from STELLO_DATA_DIR"}
"""What chose a data dir, as `sharing_line` says it (else: the default)."""


def sharing_line(data_dir: Path, said: bytes, source: str = "STELLO_DATA_DIR") -> str:
    """Why this `stello up` does not start: another one runs the embedded PostgreSQL of
    `data_dir` (from its own config dir), which `source` chose ("--data-dir",
    "STELLO_DATA_DIR", "": the default), and what to do."""
    who, config = _holder(said)
    if config:
        who = f"{who}, config dir {config}"
    chosen = CHOSEN.get(source, "the default")
    another = (
        "another --data-dir"
        if source == "--data-dir"
        else "another data dir (--data-dir, or STELLO_DATA_DIR)"
    )
    return (
        f"another `stello up` ({who}) runs the embedded PostgreSQL of the data dir "
        f"{data_dir} ({chosen}): stop it first, or start this one with {another}"
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
