"""A key the gateway refuses: the SDK's Unauthenticated says where the client took it from."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stello_client import AsyncClient, Client
from stello_client.connection.credentials import Credentials, credentials_path, save_credentials
from stello_client.errors import rpc_error_line
from stello_client.exceptions import Unauthenticated
from tests.gateway.conftest import Stack

WRONG = "stello_000000000000_" + "x" * 43
ADVICE = (
    "pass a key this gateway knows and has not revoked (key= or STELLO_KEY; `stello up` "
    "saves one of its own gateway)"
)


async def refused(client: AsyncClient) -> Unauthenticated:
    """The error of `client`'s first call (closing the client)."""
    async with client:
        with pytest.raises(Unauthenticated) as raised:
            await client.get_tree()
    return raised.value


async def test_a_refused_key_argument_says_so(stack: Stack) -> None:
    """A wrong key= says it came from the argument and what to check (it said only
    "unknown or revoked API key")."""
    error = await refused(AsyncClient(stack.gateway.address, WRONG, stack.space.sid))
    assert error.details == f"unknown or revoked API key (the key= argument): {ADVICE}"
    assert str(error) == f"UNAUTHENTICATED: {error.details}"


async def test_a_refused_key_from_the_environment_names_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key from STELLO_KEY is said to come from it."""
    monkeypatch.setenv("STELLO_KEY", WRONG)
    error = await refused(AsyncClient(stack.gateway.address, None, stack.space.sid))
    assert error.details == f"unknown or revoked API key (STELLO_KEY): {ADVICE}"


async def test_a_refused_saved_key_names_the_file(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The key `stello up` saved is said to come from its file, and to run it again."""
    monkeypatch.delenv("STELLO_KEY", raising=False)
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))
    save_credentials(Credentials(stack.space.sid, WRONG, stack.gateway.address))
    error = await refused(AsyncClient(space=stack.space.sid))
    assert error.details == (
        f"unknown or revoked API key (the key `stello up` saved in {credentials_path()}): "
        "run `stello up` again, which saves a key its gateway takes, or pass another "
        "(key= or STELLO_KEY)"
    )


async def test_a_refused_key_of_using_names_the_argument(stack: Stack) -> None:
    """A key given to using() is said to come from using()'s key= argument."""
    async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
        error = await refused(client.using(key=WRONG))
    assert error.details.startswith("unknown or revoked API key (the key= argument of using()):")


async def test_a_refused_key_in_a_stream_a_watch_and_a_sync_client(stack: Stack) -> None:
    """A turn stream, a watch and the sync client say it too."""
    async with AsyncClient(stack.gateway.address, WRONG, stack.space.sid) as client:
        with pytest.raises(Unauthenticated) as streamed:
            async for _ in client.stream(stack.space.sid, "hi"):
                pass
        async with client.watch(resume=False) as watch:
            with pytest.raises(Unauthenticated) as watched:
                await anext(watch)
    synced = await asyncio.to_thread(sync_error, stack)
    for error in (streamed.value, watched.value, synced):
        assert error.details.startswith("unknown or revoked API key (the key= argument): ")


def sync_error(stack: Stack) -> Unauthenticated:
    """The sync client's error for a refused key (run in a thread: the gateway runs on the
    test's loop)."""
    with Client(stack.gateway.address, WRONG, stack.space.sid) as sync:
        with pytest.raises(Unauthenticated) as raised:
            sync.get_tree()
    return raised.value


async def test_the_line_of_a_refused_key_has_no_sdk_hint(stack: Stack) -> None:
    """The CLI's and console's line (each says where its own key came from) is the
    gateway's words alone."""
    error = await refused(AsyncClient(stack.gateway.address, WRONG, stack.space.sid))
    assert rpc_error_line(error) == "unknown or revoked API key"
    assert rpc_error_line(error, as_flags=False) == "UNAUTHENTICATED: unknown or revoked API key"
