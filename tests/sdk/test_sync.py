"""The sync `Client`'s iterators: closing one ends its call at once, and one left unfinished
never keeps the program from ending (explore12 F1, F9)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stello_client import Client, Retry
from tests.gateway.conftest import GatewayStarter, Stack
from tests.sdk.conftest import client_of, run_python

pytestmark = pytest.mark.sql

UNFINISHED = """
from stello_client import Client

client = Client()
root = client.create_root(label="left unfinished").id
client.send(root, "one turn, two records")
records = client.records(root, page_size=1)
print(next(records).content)
events = client.stream(root, "a reply long enough to come in several deltas")
print(type(next(events)).__name__)
"""


@pytest.mark.subprocess
async def test_an_unfinished_sync_iterator_lets_the_program_exit(
    stack: Stack, tmp_path: Path
) -> None:
    """A program that leaves a `records()` and a `stream()` iterator unfinished in module
    variables ends at once: it hung forever, their cleanup at the interpreter's exit waiting
    for the client's loop thread, which no longer ran."""
    out = await run_python(stack, tmp_path, "-c", UNFINISHED, limit_s=20)
    assert out.splitlines() == ["one turn, two records", "TextDelta"]


DELAY_S = 0.6
"""The echo model's wait before each of its deltas."""
BUSY_S = 5.0
"""How long the send after the closes may find the session busy (the gateway releases a
cancelled turn when it reads the cancel, a moment after the close: longer on a loaded machine)."""


def stream_then_close(gateway: str, stack: Stack, root: str) -> str:
    """Read a stream's first event, close it (still referenced), then send, retried while
    the session is busy for up to BUSY_S: the close is a cancel the gateway acts on when it
    reads it, so the release may come a moment after it. A turn the close did not cancel
    would run to its end, its two more deltas, and be stored: the caller's check of the
    records fails then, however the machine's load stretched the wait."""
    busy = Retry(attempts=2, busy_for_s=BUSY_S)  # attempts=1 would never retry
    with Client(gateway, stack.space.key, stack.space.sid, plaintext=True, retry=busy) as client:
        events = client.stream(root, "cancelled by close")
        first = type(next(events)).__name__
        events.close()
        assert list(events) == []  # closed: nothing more is read
        with client.stream(root, "cancelled by with") as again:
            next(again)
        return first + " " + client.send(root, "next").assistant.content


async def test_closing_a_sync_stream_cancels_its_turn(
    start_gateway: GatewayStarter, stack: Stack
) -> None:
    """`close()` on a stream still referenced (and leaving its ``with`` block) cancels the
    turn at once: the next send finds the session free, and nothing of the closed turns
    is stored."""
    slow = await start_gateway(echo_delay_s=DELAY_S)
    async with client_of(stack) as client:
        root = (await client.create_root(label="closed streams")).id
        seen = await asyncio.to_thread(stream_then_close, slow.address, stack, root)
        assert seen == "TextDelta echo: next"
        assert [r.content async for r in client.records(root)] == ["next", "echo: next"]


FORKED = """
import os, signal
from stello_client import Client
from stello_client.exceptions import ConfigurationError

client = Client()
client.who_am_i()
child = os.fork()
if child == 0:
    signal.alarm(10)  # a hang ends the child
    try:
        client.who_am_i()
        print("answered", flush=True)
    except ConfigurationError as exc:
        print(exc.setting, flush=True)
    os._exit(0)
os.waitpid(child, 0)
client.close()
"""


@pytest.mark.subprocess
async def test_a_sync_client_used_in_a_forked_child_raises(stack: Stack, tmp_path: Path) -> None:
    """The parent's sync client, called in a forked child (multiprocessing's fork, Gunicorn
    --preload), raises ConfigurationError (setting "process") at once: it waited forever for
    a loop thread the child does not have (explore12 F3)."""
    out = await run_python(stack, tmp_path, "-c", FORKED, limit_s=20)
    assert out.splitlines() == ["process"]
