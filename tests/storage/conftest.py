"""Storage test fixtures: a real storage server on port 0 and stubs authenticated per space."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from stello.storage.v1 import storage_pb2_grpc
from storage_service import create_app
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace

StubFor = Callable[[str], storage_pb2_grpc.SessionStorageStub]


@pytest.fixture(name="storage_server")
async def _storage_server(start_server: ServerStarter) -> RunningServer:
    return await start_server(create_app)


@pytest.fixture(name="stub_for")
async def _stub_for(storage_server: RunningServer) -> AsyncIterator[StubFor]:
    """Stubs to the storage server authenticated with a given key; channels closed at teardown."""
    channels: list[grpc.aio.Channel] = []

    def make(key: str) -> storage_pb2_grpc.SessionStorageStub:
        channel = storage_server.channel(key)
        channels.append(channel)
        return storage_pb2_grpc.SessionStorageStub(channel)

    yield make
    for channel in channels:
        await channel.close()


@pytest.fixture(name="stub")
def _stub(stub_for: StubFor, space: TestSpace) -> storage_pb2_grpc.SessionStorageStub:
    """A stub authenticated as the test's own space."""
    return stub_for(space.key)
