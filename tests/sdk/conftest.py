"""SDK fixtures: the gateway suite's storage, tree and gateway, and an `AsyncClient` on them.

The client is made as a program would make it, from the gateway's address and
the space's key (plaintext, the space named by id); its retries pause briefly
so a test that waits for them stays short.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path

import pytest

from agent_gateway.llm import Completion, EchoProvider, LLMMessage, StreamEvent, TextDelta, ToolSpec
from stello_client import AsyncClient, Retry
from tests.cli.processes import client_env, private_env
from tests.gateway.conftest import (  # noqa: F401 (fixtures used by name)
    Stack,
    _backends,
    _local_calls,
    _profiles_file,
    _provisioning_ttl_s,
    _stack,
    _start_gateway,
    _summarizer,
)

QUICK_RETRY = Retry(
    attempts=8, initial_backoff_s=0.05, max_backoff_s=0.5, busy_for_s=0, unavailable_for_s=0
)


class StalledModel(EchoProvider):
    """A model that never answers: a completion waits until its call ends, a stream sends
    one text delta at once and then waits. What a test of a call cut while the model works
    (a deadline, a closed client) starts, whatever the machine's speed."""

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Waits until the call ends."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """One delta, then a wait until the call ends."""
        yield TextDelta("hello")
        await asyncio.Event().wait()


def client_of(stack: Stack, **options: object) -> AsyncClient:
    """An AsyncClient on the stack's gateway as its space (more options by keyword)."""
    options.setdefault("retry", QUICK_RETRY)
    return AsyncClient(
        stack.gateway.address,
        stack.space.key,
        stack.space.sid,
        plaintext=True,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture(name="client")
async def _client(stack: Stack) -> AsyncIterator[AsyncClient]:
    """An AsyncClient on the stack's gateway, as its space."""
    async with client_of(stack) as client:
        yield client


async def run_python(
    stack: Stack, home: Path, *args: str, gateway: str = "", limit_s: float = 60
) -> str:
    """Run `python ARGS` as a user would, connected to the stack's space (through its
    gateway, or the one at `gateway`); its stdout. One still running after `limit_s`
    seconds is killed, and fails the test."""
    env = private_env(home)
    env.update(
        STELLO_GATEWAY=gateway or stack.gateway.address,
        STELLO_KEY=stack.space.key,
        STELLO_SPACE_ID=stack.space.sid,
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        env=client_env(env),
        cwd=home,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), limit_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"python {' '.join(args)} ran past {limit_s} s (a hang)") from None
    assert process.returncode == 0, err.decode()
    return out.decode()
