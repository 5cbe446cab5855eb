"""A port shared by one deployment's workers and refused to everyone else (DESIGN §7).

A service with several worker processes serves one port through SO_REUSEPORT:
each worker binds it and the kernel spreads the connections. SO_REUSEPORT alone
would let a second deployment (of the same user) bind the port too and take
half its connections without a word, so the supervisor claims the port first,
for as long as it runs:

- a guard socket bound to the port with SO_REUSEPORT (never listening, so it
  takes no connection): a process that does not share ports (a single-process
  server, another program) cannot bind it, even while no worker is up (between
  a killed worker and its replacement); port 0 picks the free port here;
- a lock per port named after it, in the kernel's abstract Unix socket space
  (`\\0stello-port-P`, one per network namespace, released when the holder dies,
  no file left behind); elsewhere than Linux a `flock`ed file in the temporary
  directory. A second supervisor finds it taken and stops with a message naming
  the port.

A server with one process needs none of this: it binds without SO_REUSEPORT
(`stello.serving.server`), which the kernel refuses to share.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
from pathlib import Path


class PortTaken(OSError):
    """Raised when a port cannot be claimed: in use, or claimed by another deployment."""


class PortClaim:
    """A claimed port: the guard socket and the deployment lock, released by `close`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._guard = _guard_socket(host, port)
        self.port: int = self._guard.getsockname()[1]
        try:
            self._lock = _deployment_lock(self.port)
        except BaseException:
            self._guard.close()
            raise

    @property
    def address(self) -> str:
        """host:port the workers bind."""
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        """Give the port up (the supervisor is done)."""
        self._guard.close()
        with contextlib.suppress(OSError):
            self._lock.close()

    def __enter__(self) -> PortClaim:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _guard_socket(host: str, port: int) -> socket.socket:
    bare = host.strip("[]") or "0.0.0.0"
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            bare, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise PortTaken(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    guard = socket.socket(family, kind, proto)
    try:
        guard.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        guard.bind(where)
    except OSError as exc:
        guard.close()
        raise PortTaken(
            f"cannot listen on {host}:{port}: the port is in use ({exc.strerror}); one "
            "deployment per port"
        ) from None
    return guard


class _FileLock:
    """The lock where abstract Unix sockets do not exist: an exclusive `flock`."""

    def __init__(self, path: Path) -> None:
        import fcntl

        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise

    def close(self) -> None:
        os.close(self._fd)


def _deployment_lock(port: int) -> socket.socket | _FileLock:
    taken = PortTaken(
        f"port {port} is served by another Stello deployment (its supervisor holds the "
        "port's lock); one deployment per port: stop it, or choose another port"
    )
    if sys.platform.startswith("linux"):
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0stello-port-{port}")
        except OSError:
            lock.close()
            raise taken from None
        return lock
    try:
        return _FileLock(Path(tempfile.gettempdir()) / f"stello-port-{port}.lock")
    except OSError:
        raise taken from None
