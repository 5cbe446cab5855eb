"""WarnEvery: a WARNING of each kind at most once per interval, then how many were held."""

from __future__ import annotations

import logging

import pytest

from stello.telemetry.log_every import WarnEvery


def test_once_per_interval_per_kind_then_how_many_were_held(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    every = WarnEvery(logging.getLogger("t.every"), 10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t.every"):
        assert every.warning("a", "down: %s", 1)
        assert not every.warning("a", "down: %s", 2)
        assert not every.warning("a", "down: %s", 3)
        assert every.warning("b", "other")  # another kind is said at once
        now[0] = 10.0
        assert every.warning("a", "down: %s", 4)
        now[0] = 25.0
        assert every.warning("a", "down: %s", 5)
    assert caplog.messages == [
        "down: 1",
        "other",
        "down: 4 (2 more like it since, said at most every 10 s)",
        "down: 5",
    ]
