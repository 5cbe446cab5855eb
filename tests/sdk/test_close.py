"""A client closed while its calls run: each ends with the SDK's `Cancelled`, not gRPC's
UsageError or a bare CancelledError in a task nobody cancelled (explore12 F6)."""

from __future__ import annotations

import asyncio

import pytest

from stello_client import AsyncClient, Retry
from stello_client.exceptions import Cancelled
from stello_client.types import TextDelta
from tests.gateway.conftest import GatewayStarter, Stack
from tests.sdk.conftest import StalledModel

pytestmark = pytest.mark.sql


def slow_client(address: str, stack: Stack, retry: Retry | None = None) -> AsyncClient:
    """An AsyncClient on the gateway at `address`, as the stack's space."""
    return AsyncClient(address, stack.space.key, stack.space.sid, plaintext=True, retry=retry)


async def test_close_ends_a_send_and_a_stream_in_flight_with_cancelled(
    start_gateway: GatewayStarter, stack: Stack
) -> None:
    """A send waiting for the model and a stream between its events, when the client
    closes, raise Cancelled; the client's next call opens the channel again."""
    slow = await start_gateway(provider=StalledModel())
    client = slow_client(slow.address, stack)
    first, second = [(await client.create_root(label=label)).id for label in ("s", "t")]
    send = asyncio.create_task(client.send(first, "slow"))
    events = client.stream(second, "a reply in several deltas")
    assert isinstance(await anext(events), TextDelta)
    await client.close()
    with pytest.raises(Cancelled, match="closed during the call"):
        await asyncio.wait_for(send, 5)
    with pytest.raises(Cancelled, match="closed during the call"):
        await asyncio.wait_for(anext(events), 5)
    assert (await client.who_am_i()).spaces
    await client.close()


async def test_close_ends_a_call_between_retries_with_cancelled(
    start_gateway: GatewayStarter, stack: Stack
) -> None:
    """A send pausing between TURN_IN_PROGRESS retries when its client closes raises
    Cancelled (it raised grpc's UsageError "Channel is closed": the retry reused the closed
    channel's stub)."""
    slow = await start_gateway(echo_delay_s=1.0)
    patient = Retry(attempts=8, initial_backoff_s=2.0, max_backoff_s=2.0, busy_for_s=10.0)
    async with slow_client(slow.address, stack) as holder:
        root = (await holder.create_root(label="held")).id
        held = asyncio.create_task(holder.send(root, "holds the session"))
        client = slow_client(slow.address, stack, patient)
        waiting = asyncio.create_task(client.send(root, "retried"))
        await asyncio.sleep(0.5)  # its first attempt met the lease; it pauses (1-2 s)
        await client.close()
        with pytest.raises(Cancelled, match="closed during the call"):
            await asyncio.wait_for(waiting, 5)
        await held
