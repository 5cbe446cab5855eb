"""A WARNING said at most once per interval per kind, then how many were held back.

An outage makes every call fail the same way: a line per call would bury the
log (a read-only database under load said it thousands of times a minute). The
first of a kind is said at once; those within the next `every_s` are counted,
and the next one said after it tells how many there were.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(slots=True)
class _Spell:
    quiet_until: float
    held: int = 0


class WarnEvery:
    """Says `log.warning` of each kind at most once per `every_s` seconds."""

    def __init__(
        self,
        log: logging.Logger,
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._every_s = every_s
        self._clock = clock
        self._spells: dict[Hashable, _Spell] = {}

    def warning(self, kind: Hashable, message: str, *args: object) -> bool:
        """Log `message % args` unless one of `kind` was said less than `every_s` ago (then
        count it); whether it was said. A line said after held ones ends with how many."""
        now = self._clock()
        spell = self._spells.get(kind)
        if spell is not None and now < spell.quiet_until:
            spell.held += 1
            return False
        held = 0 if spell is None else spell.held
        self._spells[kind] = _Spell(now + self._every_s)
        if held:
            message += f" ({held} more like it since, said at most every {self._every_s:g} s)"
        self._log.warning(message, *args)
        return True
