"""`open_channel(..., connections=N)`: calls taken in turn over N connections (SpreadChannel)."""

from __future__ import annotations

import collections
from typing import Any

import grpc

from stello.channels import SpreadChannel, open_channel

ECHO = "/test.Echo/Peer"


async def test_calls_take_the_connections_in_turn() -> None:
    """Six calls over three connections arrive from three peers, two calls each, in turn."""
    server = grpc.aio.server()
    peers: list[str] = []

    async def peer(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        peers.append(context.peer())
        return request

    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(peer)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Echo", {"Peer": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with open_channel(f"127.0.0.1:{port}", connections=3) as channel:
            assert isinstance(channel, SpreadChannel)
            call = channel.unary_unary(ECHO)
            for i in range(6):
                assert await call(bytes([i]), timeout=10) == bytes([i])
    finally:
        await server.stop(None)
    assert sorted(collections.Counter(peers).values()) == [2, 2, 2]
    assert peers[:3] == peers[3:]  # in turn
