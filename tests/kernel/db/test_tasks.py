"""`stello.db.tasks`: work its caller's cancellation must not cut (`to_the_end`), stopping a
task (`cancel_and_wait`), steps each taken whatever failed before (`Steps`)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from stello.db.tasks import Steps, cancel_and_wait, to_the_end


async def failing(release: asyncio.Event) -> None:
    """Work that fails once released."""
    await release.wait()
    raise RuntimeError("the work failed")


async def test_a_cancelled_caller_waits_and_says_how_it_ended() -> None:
    release = asyncio.Event()
    ended: list[asyncio.Future[None]] = []
    caller = asyncio.ensure_future(to_the_end(failing(release), ended.append))
    await asyncio.sleep(0.01)
    caller.cancel()
    await asyncio.sleep(0.01)
    assert not caller.done()  # waits for the work's end
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert len(ended) == 1 and isinstance(ended[0].exception(), RuntimeError)


async def test_a_second_cancellation_still_says_how_the_work_ended() -> None:
    """Cancelled twice (the caller leaves, then gives up waiting), the caller goes at once
    and the work runs on; its end is still said when it comes, its error consumed: never
    "Task exception was never retrieved" (explore14 F7)."""
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        release = asyncio.Event()
        ended: list[asyncio.Future[None]] = []

        def said(done: asyncio.Future[None]) -> None:
            done.exception()  # what a `said` reads
            ended.append(done)

        caller = asyncio.ensure_future(to_the_end(failing(release), said))
        await asyncio.sleep(0.01)
        caller.cancel()
        await asyncio.sleep(0.01)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert ended == []
        release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(ended) == 1 and isinstance(ended[0].exception(), RuntimeError)
        ended.clear()
        gc.collect()
        await asyncio.sleep(0)
        assert unhandled == []
    finally:
        loop.set_exception_handler(None)


async def slow_to_end(release: asyncio.Event) -> None:
    """A task whose cancellation takes until `release` (its cleanup waits)."""
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.shield(release.wait())


async def test_a_stopper_cancelled_while_its_task_ends_is_cancelled() -> None:
    """`cancel_and_wait` cancels a task and waits for its end; cancelled itself meanwhile, it
    raises its own cancellation (a `suppress(CancelledError)` around the wait swallowed it:
    the stopper went on as if never cancelled)."""
    release = asyncio.Event()
    task = asyncio.ensure_future(slow_to_end(release))
    await asyncio.sleep(0)
    stopper = asyncio.ensure_future(cancel_and_wait(task))
    await asyncio.sleep(0.01)
    stopper.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert task.cancelled()


async def test_a_stopper_ends_with_its_task() -> None:
    """Not cancelled itself, `cancel_and_wait` returns once the task has ended."""
    release = asyncio.Event()
    task = asyncio.ensure_future(slow_to_end(release))
    await asyncio.sleep(0)
    stopper = asyncio.ensure_future(cancel_and_wait(task))
    await asyncio.sleep(0.01)
    assert not stopper.done()
    release.set()
    await stopper
    assert task.cancelled()


async def test_a_stopper_cleaning_up_after_its_own_cancellation_ends_its_cleanup() -> None:
    """A caller already cancelled, stopping a task in its cleanup (as `stello up` shuts its
    servers down after Ctrl-C cancelled it), is not taken for cancelled again by the task's
    own end: `cancel_and_wait` returns and the rest of the cleanup runs (it raised the
    CancelledError, its caller's count of cancellations being above zero already)."""
    task = asyncio.ensure_future(asyncio.Event().wait())
    cleaned: list[str] = []

    async def cleaning_up() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await cancel_and_wait(task)
            cleaned.append("after the stop")

    caller = asyncio.ensure_future(cleaning_up())
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert task.cancelled()
    assert cleaned == ["after the stop"]


class TestSteps:
    @staticmethod
    def steps(told: list[tuple[str, type[BaseException]]]) -> Steps:
        """Steps telling each failure to `told` (what, its type)."""
        return Steps(lambda what, exc: told.append((what, type(exc))))

    async def test_a_step_cancelled_on_its_own_skips_no_later_step(self) -> None:
        """A step that raises CancelledError of its own (it awaited a task someone else
        cancelled; the steps' taker is not cancelled) failed like any other: it is told, the
        later steps are taken, and its CancelledError is raised after the last. Before, it
        went through `take` at once and every later step was skipped (a shutdown left its
        pollers and its server running)."""
        gone = asyncio.ensure_future(asyncio.Event().wait())
        gone.cancel()
        told: list[tuple[str, type[BaseException]]] = []
        taken: list[str] = []

        async def later() -> None:
            taken.append("later")

        steps = self.steps(told)
        await steps.take("awaiting a cancelled task", gone)
        await steps.take("later", later())
        assert taken == ["later"]
        assert told == [("awaiting a cancelled task", asyncio.CancelledError)]
        with pytest.raises(asyncio.CancelledError):
            steps.raise_first()

    async def test_the_first_failure_is_raised_a_cancelled_step_or_not(self) -> None:
        """An error before a step's own cancellation is the one raised after the last step."""
        gone = asyncio.ensure_future(asyncio.Event().wait())
        gone.cancel()
        told: list[tuple[str, type[BaseException]]] = []

        async def fails() -> None:
            raise RuntimeError("the first step failed")

        steps = self.steps(told)
        await steps.take("failing", fails())
        await steps.take("awaiting a cancelled task", gone)
        assert told == [
            ("failing", RuntimeError),
            ("awaiting a cancelled task", asyncio.CancelledError),
        ]
        with pytest.raises(RuntimeError, match="the first step failed"):
            steps.raise_first()

    async def test_a_cancelled_taker_takes_no_further_step(self) -> None:
        """The taker's own cancellation (the shutdown itself cancelled) during a step is raised
        at once: not told as a step's failure, no later step taken."""
        started = asyncio.Event()
        told: list[tuple[str, type[BaseException]]] = []
        taken: list[str] = []

        async def waits() -> None:
            started.set()
            await asyncio.Event().wait()

        async def later() -> None:
            taken.append("later")

        async def taking() -> None:
            steps = self.steps(told)
            await steps.take("waiting", waits())
            await steps.take("later", later())

        taker = asyncio.ensure_future(taking())
        await started.wait()
        taker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taker
        assert taken == [] and told == []

    async def test_a_taker_cleaning_up_after_its_cancellation_takes_every_step(self) -> None:
        """A taker already cancelled, taking its steps in its cleanup (`stello up` shuts its
        servers down after Ctrl-C cancelled it), tells a step's own CancelledError from a new
        cancellation of its own: the later steps are taken."""
        told: list[tuple[str, type[BaseException]]] = []
        taken: list[str] = []
        blocked = asyncio.Event()

        async def later() -> None:
            taken.append("later")

        async def cleaning_up() -> None:
            try:
                blocked.set()
                await asyncio.Event().wait()
            finally:
                gone = asyncio.ensure_future(asyncio.Event().wait())
                gone.cancel()
                steps = self.steps(told)
                await steps.take("awaiting a cancelled task", gone)
                await steps.take("later", later())

        taker = asyncio.ensure_future(cleaning_up())
        await blocked.wait()
        taker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taker
        assert taken == ["later"]
        assert told == [("awaiting a cancelled task", asyncio.CancelledError)]
