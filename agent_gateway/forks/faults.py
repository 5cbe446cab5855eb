"""The fault seam of the provisioning saga (DESIGN §4.1).

The saga awaits `Faults.hit(point)` at each of `FAULT_POINTS`. Production passes
`NoFaults`; in-process tests pass an object that stops a real server there;
subprocess tests set ``STELLO_GATEWAY_FAULT=<point>:exit`` so the process dies
with ``os._exit(137)`` at that point. Nothing is monkeypatched.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Protocol

FAULT_POINTS = (
    "fork.after_create",
    "fork.after_storage",
    "fork.before_commit",
    "fork.after_commit",
)
EXIT_CODE = 137

log = logging.getLogger(__name__)


class Faults(Protocol):
    """Called by the saga at each named point; may stop the process or raise."""

    async def hit(self, point: str) -> None:
        """The saga reached `point` (one of FAULT_POINTS)."""
        ...


class NoFaults:
    """The production seam: every point passes."""

    async def hit(self, point: str) -> None:
        """Do nothing."""


class ExitFaults:
    """Kills the process at one point, as a crash would (no cleanup, no reply)."""

    def __init__(self, point: str) -> None:
        if point not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {point!r}; use one of {', '.join(FAULT_POINTS)}")
        self.point = point

    async def hit(self, point: str) -> None:
        """Exit with status 137 when `point` is the configured one."""
        if point == self.point:
            log.warning("fault injected: exiting at %s", point)
            sys.stderr.flush()
            os._exit(EXIT_CODE)


def parse_fault(value: str) -> tuple[str, str]:
    """Split ``<point>:exit`` into (point, action), or raise ValueError saying what is wrong."""
    point, sep, action = value.rpartition(":")
    if not sep or action != "exit":
        raise ValueError(f"fault must be '<point>:exit', got {value!r}")
    if point not in FAULT_POINTS:
        raise ValueError(f"unknown fault point {point!r}; use one of {', '.join(FAULT_POINTS)}")
    return point, action


def faults_from_setting(value: str | None) -> Faults:
    """The seam ``STELLO_GATEWAY_FAULT`` asks for: NoFaults when unset."""
    if not value:
        return NoFaults()
    point, _ = parse_fault(value)
    return ExitFaults(point)
