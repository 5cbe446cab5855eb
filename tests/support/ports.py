"""A loopback port for a server a test starts later (a subprocess, a pgbouncer, a Citus node).

Binding port 0 gives a port of the kernel's ephemeral range, which any outgoing connection
on the machine may take between the probe and the server's own bind (a CI pass beside
another took one so). `free_port` picks one below that range instead, where only servers
that chose it bind.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20_000
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range."""
    high = ephemeral_low()
    for _ in range(200):
        port = random.randrange(LOWEST, high)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port between {LOWEST} and {high}")
