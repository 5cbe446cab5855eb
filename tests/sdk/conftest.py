"""SDK fixtures: the gateway suite's storage, tree and gateway, and an `AsyncClient` on them.

The client is made as a program would make it, from the gateway's address and
the space's key (plaintext, the space named by id); its retries pause briefly
so a test that waits for them stays short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from stello_client import AsyncClient, Retry
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

QUICK_RETRY = Retry(attempts=8, initial_backoff_s=0.05, max_backoff_s=0.5, busy_for_s=0)


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
