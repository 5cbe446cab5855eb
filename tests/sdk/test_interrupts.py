"""Ctrl-C in a program using the sync `Client`: a real SIGINT to the main thread while it
waits for a turn, in a Python process of its own (the servers run on this test's loop, and
only a process's main thread gets a KeyboardInterrupt)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import GatewayStarter, Stack
from tests.sdk.conftest import client_of, run_python

pytestmark = [pytest.mark.sql, pytest.mark.subprocess]

DELAY_S = 1.0
"""The echo model's wait before it answers (and before each streamed delta)."""

PROGRAM = f"""
import json, signal, sys, threading, time
from stello_client import Client


def ctrl_c_during(call):
    main = threading.main_thread().ident
    threading.Timer({DELAY_S} * 0.4, signal.pthread_kill, (main, signal.SIGINT)).start()
    try:
        call()
    except BaseException as exc:
        return type(exc).__name__ + (": " + str(exc) if str(exc) else "")
    return "returned"


with Client() as client:
    root = client.create_root(label="ctrl-c").id
    if sys.argv[1] == "send":
        interrupted = ctrl_c_during(lambda: client.send(root, "interrupted"))
    else:
        interrupted = ctrl_c_during(lambda: list(client.stream(root, "interrupted")))
    time.sleep({DELAY_S} * 4)  # a turn left running commits meanwhile
    stored = [r.content for r in client.records(root)]
    reply = client.send(root, "next").assistant.content
print(json.dumps({{"root": root, "interrupted": interrupted, "stored": stored, "next": reply}}))
"""


async def ctrl_c(start_gateway: GatewayStarter, stack: Stack, home: Path, call: str) -> Any:
    """Run PROGRAM against a gateway whose model is slow, Ctrl-C during `call` (send or
    stream); what it saw, and the session's records afterwards as this test reads them."""
    slow = await start_gateway(echo_delay_s=DELAY_S)
    out = await run_python(stack, home, "-c", PROGRAM, call, gateway=slow.address)
    seen = json.loads(out)
    async with client_of(stack) as client:
        seen["records"] = [r.content async for r in client.records(seen["root"])]
    return seen


async def test_ctrl_c_cancels_a_sync_send(
    start_gateway: GatewayStarter, stack: Stack, tmp_path: Path
) -> None:
    """Ctrl-C while a sync `send()` waits for the model cancels the call, as cancelling an
    AsyncClient task does: nothing is stored (the turn ran on, unseen, and was stored after
    the KeyboardInterrupt), and the session is free for the next turn."""
    seen = await ctrl_c(start_gateway, stack, tmp_path, "send")
    assert seen["interrupted"] == "KeyboardInterrupt"
    assert seen["stored"] == []
    assert seen["next"] == "echo: next"
    assert seen["records"] == ["next", "echo: next"]


async def test_ctrl_c_during_a_sync_stream_raises_itself(
    start_gateway: GatewayStarter, stack: Stack, tmp_path: Path
) -> None:
    """Ctrl-C while a sync `stream()` waits for its next event raises the KeyboardInterrupt
    itself (it was "RuntimeError: aclose(): asynchronous generator is already running",
    the stream still running) and stores nothing."""
    seen = await ctrl_c(start_gateway, stack, tmp_path, "stream")
    assert seen["interrupted"] == "KeyboardInterrupt"
    assert seen["stored"] == []
    assert seen["records"] == ["next", "echo: next"]
