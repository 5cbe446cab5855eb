"""stello.periodic: a stop lets the round under way finish, and cancels an idle wait."""

from __future__ import annotations

import asyncio

from stello.periodic import Periodic


class SlowRound(Periodic):
    """A round that takes `round_s` and records how it ended."""

    def __init__(self, round_s: float) -> None:
        super().__init__(interval_s=60.0)
        self.round_s = round_s
        self.started = asyncio.Event()
        self.ends: list[str] = []

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
    periodic = SlowRound(0.0)
    periodic.start()
    await periodic.started.wait()
    await asyncio.sleep(0.05)  # the round is over: it waits 60 s for the next
    loop = asyncio.get_running_loop()
    began = loop.time()
    await periodic.stop()
    assert loop.time() - began < 5.0
    assert periodic.ends == ["finished"]
