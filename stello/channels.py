"""Client channels to Stello services: auth metadata, message limits, load balancing."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from stello.settings import MIB


def bearer_metadata(key: str) -> tuple[tuple[str, str], ...]:
    """Per-call metadata that authenticates as `key`."""
    return (("authorization", f"Bearer {key}"),)


class _AddAuth:
    """Adds ``authorization: Bearer <key>`` to calls that carry no key of their own."""

    def __init__(self, key: str) -> None:
        self._pair = ("authorization", f"Bearer {key}")

    def details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        """The call's details with the key added when missing."""
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        if not metadata.get_all("authorization"):
            metadata.add(*self._pair)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


# grpc.aio files an interceptor under the first call kind it subclasses, so a
# class implementing both would only ever see unary calls: one class per kind.
class _UnaryAuth(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, auth: _AddAuth) -> None:
        self._auth = auth

    async def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._auth.details(client_call_details), request)


class _StreamAuth(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, auth: _AddAuth) -> None:
        self._auth = auth

    async def intercept_unary_stream(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._auth.details(client_call_details), request)


def open_channel(
    target: str | Sequence[str],
    *,
    key: str | None = None,
    max_message_bytes: int = 64 * MIB,
    root_certificates: bytes | None = None,
) -> grpc.aio.Channel:
    """A channel to one address, or round-robin over several; `key` authenticates every call."""
    if not isinstance(target, str):
        target = "ipv4:" + ",".join(target)
    options: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.lb_policy_name", "round_robin"),
        # Subchannels of our own: a channel never inherits the reconnect backoff that
        # another channel in the process built up against an address now reused.
        ("grpc.use_local_subchannel_pool", 1),
    ]
    interceptors: list[grpc.aio.ClientInterceptor] | None = None
    if key:
        auth = _AddAuth(key)
        interceptors = [_UnaryAuth(auth), _StreamAuth(auth)]
    if root_certificates is None:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
