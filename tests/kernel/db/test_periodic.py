"""stello.db.periodic: a stop lets the round under way finish, and cancels an idle wait."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque

import pytest
from prometheus_client import CollectorRegistry

from stello.db.maintenance import SpaceNode
from stello.db.periodic import Periodic, Refused, RoundsCollector
from stello.errors import Unavailable


class SlowRound(Periodic):
    """A round that takes `round_s` and records how it ended, and when the task waits for
    its next round (`paused`: set as the wait begins)."""

    def __init__(self, round_s: float) -> None:
        super().__init__(interval_s=60.0)
        self.round_s = round_s
        self.started = asyncio.Event()
        self.paused = asyncio.Event()
        self.ends: list[str] = []

    async def _pause(self) -> None:
        self.paused.set()
        await super()._pause()

    async def run_once(self) -> None:
        self.started.set()
        try:
            await asyncio.sleep(self.round_s)
        except asyncio.CancelledError:
            self.ends.append("cancelled")
            raise
        self.ends.append("finished")


async def test_a_round_under_way_finishes() -> None:
    periodic = SlowRound(0.3)
    periodic.start()
    await periodic.started.wait()
    await periodic.stop()
    assert periodic.ends == ["finished"]
    assert not periodic.running


async def test_a_round_past_the_grace_is_cancelled() -> None:
    periodic = SlowRound(30.0)
    periodic.start()
    await periodic.started.wait()
    await periodic.stop(grace_s=0.1)
    assert periodic.ends == ["cancelled"]


async def test_an_idle_wait_ends_at_once() -> None:
    """A task waiting for its next round (60 s away) is cancelled at once, whatever the
    grace: the bound below is for a hang (a stop that waited for the wait), not a speed
    check."""
    periodic = SlowRound(0.0)
    periodic.start()
    await periodic.paused.wait()  # the round is over: it waits 60 s for the next
    async with asyncio.timeout(10):
        await periodic.stop(grace_s=3600)
    assert periodic.ends == ["finished"]


class Scripted(Periodic):
    """Rounds that raise the scripted errors in turn (None: a round that works)."""

    what = "scripted work"

    def __init__(self, *script: BaseException | None) -> None:
        super().__init__(interval_s=0.01)
        self.script = deque(script)
        self.done = asyncio.Event()

    async def run_once(self) -> None:
        if not self.script:
            self.done.set()
            return
        error = self.script.popleft()
        if error is not None:
            raise error


async def test_an_outage_is_one_warning_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rounds failing because the database cannot be reached log one WARNING line, without
    a traceback, when the outage begins (DEBUG after it), and INFO once a round works again
    (explore4 F7: ERROR and a traceback every round while the embedded PostgreSQL was down)."""
    refused = ConnectionRefusedError(111, "Connect call failed")
    periodic = Scripted(refused, refused, refused, None)
    with caplog.at_level(logging.DEBUG, logger="stello.db.periodic"):
        periodic.start()
        await asyncio.wait_for(periodic.done.wait(), 10)
        await periodic.stop()
    said = [(r.levelno, r.exc_info is not None) for r in caplog.records]
    assert said == [
        (logging.WARNING, False),
        (logging.DEBUG, False),
        (logging.DEBUG, False),
        (logging.INFO, False),
    ]
    assert caplog.records[0].getMessage() == (
        "scripted work failed: cannot reach what it needs (ConnectionRefusedError: [Errno 111] "
        "Connect call failed); retrying every 0.01s"
    )
    assert caplog.records[-1].getMessage() == "scripted work works again"


async def test_a_fault_shows_its_traceback_every_round(caplog: pytest.LogCaptureFixture) -> None:
    """Any other failure is a fault: ERROR with its traceback, every round."""
    periodic = Scripted(RuntimeError("bug"), RuntimeError("bug"))
    with caplog.at_level(logging.DEBUG, logger="stello.db.periodic"):
        periodic.start()
        await asyncio.wait_for(periodic.done.wait(), 10)
        await periodic.stop()
    said = [(r.levelno, r.exc_info is not None) for r in caplog.records]
    assert said == [(logging.ERROR, True), (logging.ERROR, True)]


async def test_a_refused_round_is_counted_and_logged_no_further(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A round that said itself what to fix and raised Refused is counted failed, with no
    line of the task's own (a traceback per round buried the one that named the setting)."""
    periodic = Scripted(Refused("key"), Refused("key"))
    with caplog.at_level(logging.DEBUG, logger="stello.db.periodic"):
        periodic.start()
        await asyncio.wait_for(periodic.done.wait(), 10)
        await periodic.stop()
    assert periodic.rounds.failed == 2
    assert caplog.records == []


async def test_rounds_are_counted_and_served_by_outcome() -> None:
    """Each round is counted by outcome (ok, outage, failed) with when the last that worked
    ended, and a registry serves them by task (explore9 F9: the background tasks had no
    metric, so a stalled erasure or sweep could not be alerted on)."""
    refused = ConnectionRefusedError(111, "Connect call failed")
    periodic = Scripted(refused, RuntimeError("bug"), None, None)
    registry = CollectorRegistry()
    registry.register(RoundsCollector([periodic]))
    began = time.time()
    periodic.start()
    await asyncio.wait_for(periodic.done.wait(), 10)
    await periodic.stop()
    rounds = periodic.rounds
    assert (rounds.outage, rounds.failed) == (1, 1) and rounds.ok >= 3  # 2 scripted, then done
    assert rounds.last_success is not None and rounds.last_success >= began

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"task": "stello-periodic", **labels})

    assert sample("stello_background_rounds_total", outcome="outage") == 1
    assert sample("stello_background_rounds_total", outcome="failed") == 1
    assert sample("stello_background_rounds_total", outcome="ok") == rounds.ok
    assert sample("stello_background_last_success_timestamp_seconds") == rounds.last_success
    assert sample("stello_background_last_round_seconds") == rounds.last_seconds


class WaitingFirst(SlowRound):
    """A SlowRound whose first round waits an interval (60 s) or a wake."""

    first_round_waits = True


async def test_a_first_round_that_waits_runs_at_a_wake() -> None:
    """With `first_round_waits`, no round runs at start; a wake runs the first."""
    periodic = WaitingFirst(0.0)
    periodic.start()
    await periodic.paused.wait()  # the task waits for its first round
    assert not periodic.started.is_set()
    periodic.wake()
    await asyncio.wait_for(periodic.started.wait(), 5)
    await periodic.stop()
    assert periodic.ends == ["finished"]


class BySpace(Periodic):
    """A round whose work across spaces fails, then goes space by space: spaces on the
    nodes in `down` are out of reach."""

    what = "test maintenance"

    def __init__(self, spaces: list[SpaceNode], down: set[str | None]) -> None:
        super().__init__(interval_s=60.0)
        self.spaces = spaces
        self.down = down
        self.worked: list[uuid.UUID] = []

    async def listed(self) -> list[SpaceNode]:
        return self.spaces

    async def work(self, space_id: uuid.UUID) -> int:
        self.worked.append(space_id)
        (space,) = (s for s in self.spaces if s.id == space_id)
        if space.node in self.down:
            raise Unavailable("the database is unavailable; retry the call")
        return 1

    async def run_once(self) -> int:
        return await self.by_space(Unavailable("across spaces failed"), self.listed, self.work)


def _spaces(*nodes: str | None) -> list[SpaceNode]:
    return [SpaceNode(uuid.uuid4(), node) for node in nodes]


async def test_by_space_skips_a_nodes_spaces_once_one_is_out_of_reach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The spaces of the nodes that answer are done; the node out of reach costs one try,
    its other spaces skipped; the skipped ones counted and said in one line naming it."""
    spaces = _spaces("a:1", "b:2", "a:1", "b:2", "b:2")
    periodic = BySpace(spaces, down={"b:2"})
    with caplog.at_level(logging.WARNING, logger="stello.db.periodic"):
        assert await periodic.run_once() == 2
    assert periodic.worked == [spaces[0].id, spaces[1].id, spaces[2].id]
    assert periodic.rounds.skipped_spaces == 3
    [line] = [r.getMessage() for r in caplog.records]
    assert "3 of 5 spaces skipped this round (those of b:2)" in line, line


async def test_by_space_without_nodes_tries_every_space() -> None:
    """Where the nodes are not known (plain PostgreSQL), every space is tried."""
    spaces = _spaces(None, None, None)
    periodic = BySpace(spaces, down=set())
    assert await periodic.run_once() == 3
    assert periodic.rounds.skipped_spaces == 0


async def test_by_space_that_reaches_no_space_is_the_outage() -> None:
    """Every space out of reach (or the spaces not listed): the round fails with the
    failure across spaces (an outage), not as a round that worked."""
    periodic = BySpace(_spaces("a:1", "a:1"), down={"a:1"})
    with pytest.raises(Unavailable, match="across spaces failed"):
        await periodic.run_once()

    async def unlisted() -> list[SpaceNode]:
        raise Unavailable("no listing")

    periodic.listed = unlisted  # type: ignore[method-assign]
    with pytest.raises(Unavailable, match="across spaces failed"):
        await periodic.run_once()


async def test_skipped_spaces_are_served() -> None:
    periodic = BySpace(_spaces("a:1", "b:2"), down={"b:2"})
    await periodic.run_once()
    registry = CollectorRegistry()
    registry.register(RoundsCollector([periodic]))
    value = registry.get_sample_value(
        "stello_background_skipped_spaces_total", {"task": periodic.task_name}
    )
    assert value == 1
