"""A gateway address where nothing listens: the SDK's Unavailable says what to check."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from functools import partial

import pytest

from stello_client import AsyncClient, Client, Retry
from stello_client.errors import rpc_error_line
from stello_client.exceptions import Unavailable
from stello_client.types import tool_result

ONCE = Retry(attempts=1, unavailable_for_s=0)


def closed_port() -> int:
    """A port nothing listens on (bound, noted, closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def unreachable(gateway: str | None) -> Unavailable:
    """The error of a call to `gateway` (None: STELLO_GATEWAY's)."""
    space = str(uuid.uuid4())
    async with AsyncClient(gateway, "k", space, plaintext=True, retry=ONCE) as client:
        with pytest.raises(Unavailable) as raised:
            await client.create_root(label="x")
    return raised.value


async def test_an_unreachable_gateway_says_what_to_check() -> None:
    """Nothing listening at the gateway= address: the message names the address and the
    argument, says nothing answered and what to do, then gRPC's words (it was gRPC's alone,
    "failed to connect to all addresses; ... Connection refused")."""
    address = f"127.0.0.1:{closed_port()}"
    error = await unreachable(address)
    assert error.cause is not None
    grpc_words = error.cause.details()
    assert error.details == (
        f"nothing answered at the gateway address {address} (from the gateway= argument): "
        "start the gateway (`stello up`), or pass the right address (gateway= or "
        f"STELLO_GATEWAY); gRPC: {grpc_words}"
    )
    assert str(error) == f"UNAVAILABLE: {error.details}"


async def test_an_unreachable_gateway_from_the_environment_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The address from STELLO_GATEWAY is said to come from it."""
    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("STELLO_GATEWAY", address)
    error = await unreachable(None)
    assert f"{address} (from STELLO_GATEWAY): start the gateway" in error.details


async def test_the_console_line_of_an_unreachable_gateway_has_one_hint() -> None:
    """The console's line (gRPC's words and its own hint) does not repeat the SDK's."""
    address = f"127.0.0.1:{closed_port()}"
    error = await unreachable(address)
    assert error.cause is not None
    line = rpc_error_line(error, address, as_flags=False)
    assert line == (
        f"UNAVAILABLE: {error.cause.details()} (is a gateway listening at {address}? "
        "start it: `stello up`)"
    )
    assert rpc_error_line(error, address) == (
        f"cannot reach the gateway at {address}: is `stello up` running?"
    )


async def test_a_watch_of_an_unreachable_gateway_says_what_to_check() -> None:
    """A watch (its own stream, not a unary call) says it too."""
    address = f"127.0.0.1:{closed_port()}"
    space = str(uuid.uuid4())
    async with AsyncClient(address, "k", space, plaintext=True, retry=ONCE) as client:
        async with client.watch(resume=False) as watch:
            with pytest.raises(Unavailable) as raised:
                await anext(watch)
    assert raised.value.details.startswith(f"nothing answered at the gateway address {address}")


def readers(client: AsyncClient | Client) -> dict[str, Callable[[], Iterable[object] | object]]:
    """Each reader that pages or streams, by name: a call that starts it."""
    session = str(uuid.uuid4())
    results = [tool_result("call", "x")]
    return {
        "records": partial(client.records, session),
        "digests": partial(client.digests),
        "lineage": partial(client.lineage, session),
        "shared_memory": partial(client.shared_memory),
        "search_records": partial(client.search_records, "tides"),
        "search_sessions": partial(client.search_sessions, "tides"),
        "stream": partial(client.stream, session, "hi"),
        "submit_tool_results_stream": partial(client.submit_tool_results_stream, session, results),
    }


async def test_every_reader_of_an_unreachable_gateway_says_what_to_check() -> None:
    """The pages (records, digests, lineage, shared memory), the searches and the turn
    streams say it too, the space given by name (settled by WhoAmI) or by id."""
    address = f"127.0.0.1:{closed_port()}"
    said = f"nothing answered at the gateway address {address} (from the gateway= argument)"
    for space in (str(uuid.uuid4()), "by-name"):
        async with AsyncClient(address, "k", space, plaintext=True, retry=ONCE) as client:
            for name, start in readers(client).items():
                with pytest.raises(Unavailable) as raised:
                    begun = start()
                    if isinstance(begun, AsyncIterator):
                        await anext(begun)
                    else:
                        assert isinstance(begun, Awaitable)
                        await begun
                assert raised.value.details.startswith(said), name


def test_every_reader_of_the_sync_client_says_what_to_check() -> None:
    """The sync client's iterators (its pages, streams and watch) say it too."""
    address = f"127.0.0.1:{closed_port()}"
    said = f"nothing answered at the gateway address {address} (from the gateway= argument)"
    with Client(address, "k", str(uuid.uuid4()), plaintext=True, retry=ONCE) as client:
        starts = readers(client)
        starts["watch"] = partial(client.watch, resume=False)
        for name, start in starts.items():
            with pytest.raises(Unavailable) as raised:
                begun = start()
                if isinstance(begun, Iterator):
                    next(begun)
            assert raised.value.details.startswith(said), name


async def test_a_gateway_name_that_does_not_resolve_says_what_to_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host name no resolver knows names the address, where it came from and what to
    check, then gRPC's words (it was the resolver's alone, "errors resolving
    no-such-host.invalid:50063: [field:hostname lookup error:...]"), from the argument or
    STELLO_GATEWAY; the CLI's line stays its own."""
    address = "no-such-host.invalid:50063"
    error = await unreachable(address)
    assert error.cause is not None
    assert error.details == (
        f"the gateway address {address} (from the gateway= argument) does not resolve: check "
        "the host name, or pass the right address (gateway= or STELLO_GATEWAY); gRPC: "
        f"{error.cause.details()}"
    )
    assert rpc_error_line(error, address) == (
        f"cannot resolve host 'no-such-host.invalid' (in the gateway's address {address}): "
        "check the name"
    )
    monkeypatch.setenv("STELLO_GATEWAY", address)
    error = await unreachable(None)
    assert error.details.startswith(f"the gateway address {address} (from STELLO_GATEWAY) does")
