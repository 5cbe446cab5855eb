"""Client channels to Stello services: auth metadata, message limits, load balancing, TLS."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from stello.errors import FailedPrecondition
from stello.formats.file_names import shown_name

# Not stello.settings' MIB: importing it loads pydantic, which a client needs nothing of.
MIB = 1024 * 1024

# WatchSpace's initial metadata: the cursor the stream starts after, sent as soon
# as the gateway fixed it (before any event), so a client knows when to read state.
WATCH_CURSOR_METADATA = "stello-watch-cursor"


@dataclass(frozen=True, slots=True)
class ClientTls:
    """What a client needs to reach a TLS server, and its own certificate for mutual TLS.

    Attributes:
        root_certificates: PEM roots that verify the server's certificate.
        certificate_chain: PEM certificate the client presents (mutual TLS), or None.
        private_key: PEM private key of `certificate_chain`, or None.
        server_name: the name expected in the server's certificate instead of the
            target's host (``grpc.ssl_target_name_override``), or None.
    """

    root_certificates: bytes
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("a client certificate needs its private key: give both or neither")

    @classmethod
    def from_files(
        cls,
        ca_file: str | Path,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        server_name: str | None = None,
    ) -> ClientTls:
        """Read the PEM files; FailedPrecondition naming a file that cannot be used."""
        return cls(
            read_pem(ca_file, "CA file"),
            read_pem(cert_file, "certificate file") if cert_file else None,
            read_pem(key_file, "key file") if key_file else None,
            server_name or None,
        )

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials of this material."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def read_pem(path: str | Path, what: str) -> bytes:
    """The bytes of a PEM file; FailedPrecondition naming `what` and the file when unusable
    (bytes of its name that are not UTF-8 shown as `\\xff`)."""
    shown = shown_name(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FailedPrecondition(f"cannot read the {what} {shown}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise FailedPrecondition(f"the {what} {shown} is not PEM (no -----BEGIN line)")
    return data


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


class _Spread:
    """A method's multicallables on several channels: each call takes the next one."""

    __slots__ = ("_next",)

    def __init__(self, calls: Sequence[Any]) -> None:
        self._next = itertools.cycle(calls).__next__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._next()(*args, **kwargs)


def _spread(kind: str) -> Callable[..., Any]:
    def spread(
        self: SpreadChannel,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return _Spread(
            [
                getattr(channel, kind)(
                    method, request_serializer, response_deserializer, _registered_method
                )
                for channel in self.channels
            ]
        )

    spread.__doc__ = f"The {kind} multicallable of `method`, taking the channels in turn."
    return spread


class SpreadChannel(grpc.aio.Channel):
    """Several channels to the same target, each its own HTTP/2 connection, used in turn.

    A channel keeps one connection per address and a server spreads its load per
    connection — the workers of one port (SO_REUSEPORT) as the pods behind one
    Kubernetes Service — so one channel loads one worker. Each call here takes
    the next channel (so the next connection).
    """

    def __init__(self, channels: Sequence[grpc.aio.Channel]) -> None:
        self.channels = tuple(channels)

    unary_unary = _spread("unary_unary")
    unary_stream = _spread("unary_stream")
    stream_unary = _spread("stream_unary")
    stream_stream = _spread("stream_stream")

    async def close(self, grace: float | None = None) -> None:
        """Close every channel."""
        for channel in self.channels:
            await channel.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        """The first channel's state."""
        return self.channels[0].get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        """The first channel's."""
        await self.channels[0].wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        """Once every channel is ready."""
        for channel in self.channels:
            await channel.channel_ready()

    async def __aenter__(self) -> SpreadChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def open_channel(
    target: str | Sequence[str],
    *,
    key: str | None = None,
    max_message_bytes: int = 64 * MIB,
    root_certificates: bytes | None = None,
    tls: ClientTls | None = None,
    options: Sequence[tuple[str, int | str]] = (),
    connections: int = 1,
) -> grpc.aio.Channel:
    """A channel to one address, or round-robin over several; `key` authenticates every call.

    Plaintext unless `tls` (or just `root_certificates`, the same as
    ``tls=ClientTls(root_certificates)``) is given. `options` are more channel arguments
    (they come after, so they win). With `connections` above 1, that many channels
    taken in turn (`SpreadChannel`): a server of several workers or replicas behind
    one address balances connections, not calls.
    """
    if connections > 1:
        return SpreadChannel(
            [
                open_channel(
                    target,
                    key=key,
                    max_message_bytes=max_message_bytes,
                    root_certificates=root_certificates,
                    tls=tls,
                    options=options,
                )
                for _ in range(connections)
            ]
        )
    if root_certificates is not None:
        if tls is not None:
            raise TypeError("pass root_certificates or tls, not both")
        tls = ClientTls(root_certificates)
    if not isinstance(target, str):
        target = "ipv4:" + ",".join(target)
    arguments: list[tuple[str, int | str]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.lb_policy_name", "round_robin"),
        # Subchannels of our own: a channel never inherits the reconnect backoff that
        # another channel in the process built up against an address now reused.
        ("grpc.use_local_subchannel_pool", 1),
        # Reconnect at least every 2 s (gRPC's default backoff grows to 120 s): a
        # service back from a short outage is reached again within seconds, so the
        # gateway's turns and lease releases resume (DESIGN §4.2, issue #13).
        ("grpc.max_reconnect_backoff_ms", 2000),
        *options,
    ]
    interceptors: list[grpc.aio.ClientInterceptor] | None = None
    if key:
        auth = _AddAuth(key)
        interceptors = [_UnaryAuth(auth), _StreamAuth(auth)]
    if tls is None:
        return grpc.aio.insecure_channel(target, options=arguments, interceptors=interceptors)
    if tls.server_name:
        arguments.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.aio.secure_channel(
        target, tls.credentials(), options=arguments, interceptors=interceptors
    )
