"""What the gateway says of a hop's transport failure: words, never gRPC's debug text."""

from __future__ import annotations

import grpc
from grpc.aio import AioRpcError, Metadata

from agent_gateway.clients.rpc import OVERSIZED, OVERSIZED_HEADERS, _plain
from stello.errors import from_rpc_error


def exhausted(details: str) -> AioRpcError:
    """A RESOURCE_EXHAUSTED of the transport (no Stello status details)."""
    return AioRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, Metadata(), Metadata(), details)


def test_headers_past_the_metadata_limit_are_named_as_such() -> None:
    """Trailers past gRPC's metadata limit are not a large reply (raising
    STELLO_MAX_MESSAGE_BYTES cannot help), and gRPC's text does not reach the client."""
    exc = exhausted("received metadata size exceeds hard limit (value length 20062 vs. 16384)")
    assert _plain(exc, from_rpc_error(exc)) == OVERSIZED_HEADERS


def test_a_reply_past_the_message_limit() -> None:
    exc = exhausted("Received message larger than max (4562 vs. 4096)")
    assert _plain(exc, from_rpc_error(exc)) == OVERSIZED
