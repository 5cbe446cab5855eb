"""The CLI fork server's wire (tests/cli/forkserver.py, its client in tests/cli/processes.py)."""

from __future__ import annotations

import socket
import struct

HEADER = struct.Struct("!I")  # the request's length, sent with its three descriptors
PID = struct.Struct("!q")  # the run's process id
STATUS = struct.Struct("!i")  # its status as `subprocess` reports it


def read_exactly(conn: socket.socket, size: int) -> bytes:
    """`size` bytes from `conn`; ConnectionError when it ends before them."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(
                f"the fork server's connection ended {size - len(data)} bytes early"
            )
        data += chunk
    return data
