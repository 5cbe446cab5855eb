"""Where a client command connects and as whom; session ids from what a person typed.

Flags first, then the environment (``STELLO_GATEWAY``, ``STELLO_KEY``,
``STELLO_SPACE_ID``, ``STELLO_CA_FILE``, ...), then what `stello up` saved. The
space may be a UUID, a space's name, or nothing: a name or nothing is settled
by asking the gateway which spaces the key reaches (WhoAmI). A session may be
its id or the first digits of it, resolved within the space by the gateway's
ResolveSessionPrefix (one index range, never a read of the whole space).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import string
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import ClientTls, bearer_metadata, open_channel
from stello_client.credentials import Credentials, load_credentials
from stello_client.errors import ClientError, UsageError, rpc_error_line

CANDIDATES_SHOWN = 4
DEFAULT_MESSAGE_BYTES = 64 * 1024 * 1024  # STELLO_MAX_MESSAGE_BYTES' default
_HEX = frozenset(string.hexdigits)


def pick(flag: str | None, env: str, saved: str | None) -> str:
    """The flag's value, else the variable's, else the saved one ("" when none)."""
    return flag or os.environ.get(env, "").strip() or (saved or "")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a client command connects, with which key, for which space (name, id or "")."""

    gateway: str
    key: str
    space: str
    tls: ClientTls | None = None


def resolve_target(args: argparse.Namespace) -> Target:
    """Gateway, key and space from flags, environment, then what `stello up` saved."""
    saved: Credentials | None = load_credentials()
    gateway = pick(args.gateway, "STELLO_GATEWAY", saved.gateway if saved else None)
    key = pick(args.key, "STELLO_KEY", saved.key if saved else None)
    space = pick(args.space, "STELLO_SPACE_ID", saved.space_id if saved else None)
    for value, what, flag, env in (
        (gateway, "gateway address", "--gateway", "STELLO_GATEWAY"),
        (key, "API key", "--key", "STELLO_KEY"),
    ):
        if not value:
            raise ClientError(f"no {what}: run `stello up` first, or pass {flag} / set {env}")
    return Target(gateway, key, space, resolve_tls(args))


def tls_options(group: Any, *, default: Any = None) -> None:
    """--ca-file, --cert-file, --key-file, --server-name (each with its variable)."""
    group.add_argument(
        "--ca-file",
        default=default,
        metavar="PEM",
        help="CA that verifies the server: connect with TLS (STELLO_CA_FILE)",
    )
    group.add_argument(
        "--cert-file",
        default=default,
        metavar="PEM",
        help="client certificate for mutual TLS (STELLO_CERT_FILE)",
    )
    group.add_argument(
        "--key-file", default=default, metavar="PEM", help="its private key (STELLO_KEY_FILE)"
    )
    group.add_argument(
        "--server-name",
        default=default,
        metavar="NAME",
        help="the name in the server's certificate when the address is not it (STELLO_SERVER_NAME)",
    )


def resolve_tls(args: argparse.Namespace) -> ClientTls | None:
    """TLS from the flags, else the environment; None (plaintext) without a CA file.

    Raises:
        ClientError: a certificate without its key, or without a CA file.
        stello.errors.FailedPrecondition: a file cannot be read.
    """
    ca = pick(args.ca_file, "STELLO_CA_FILE", None)
    cert = pick(args.cert_file, "STELLO_CERT_FILE", None)
    key = pick(args.key_file, "STELLO_KEY_FILE", None)
    if bool(cert) != bool(key):
        raise ClientError(
            "a client certificate needs its private key: pass both --cert-file and --key-file "
            "(STELLO_CERT_FILE, STELLO_KEY_FILE), or neither"
        )
    if cert and not ca:
        raise ClientError(
            "--cert-file needs --ca-file (STELLO_CA_FILE): the CA that verifies the server"
        )
    server_name = pick(getattr(args, "server_name", None), "STELLO_SERVER_NAME", None)
    if server_name and not ca:
        raise ClientError(
            "--server-name needs --ca-file (STELLO_CA_FILE): it is checked against the "
            "server's certificate"
        )
    return ClientTls.from_files(ca, cert or None, key or None, server_name or None) if ca else None


def message_limit() -> int:
    """The client's gRPC message limit: STELLO_MAX_MESSAGE_BYTES, as the servers'."""
    value = os.environ.get("STELLO_MAX_MESSAGE_BYTES", "").strip()
    try:
        return int(value) if value else DEFAULT_MESSAGE_BYTES
    except ValueError:
        raise ClientError(
            f"STELLO_MAX_MESSAGE_BYTES must be a number of bytes, got {value!r}"
        ) from None


@dataclass(slots=True)
class Client:
    """The gateway as a command uses it: calls carry the key and the deadline; ids resolve."""

    stub: agent_pb2_grpc.AgentGatewayStub
    target: Target
    space_id: str
    timeout: float | None
    flags: Mapping[str, str] = field(default_factory=dict)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Per-call metadata with the key (streams need it too, so it is never left to the
        channel: grpc.aio's channel interceptors see unary calls only)."""
        return bearer_metadata(self.target.key)

    async def call(self, method: Any, request: Any) -> Any:
        """One unary call with the key and the command's deadline."""
        return await method(request, timeout=self.timeout, metadata=self.metadata)

    async def session(self, text: str, what: str = "SESSION") -> str:
        """The id of the session `text` names: a whole id, or its first digits.

        Raises:
            UsageError: `text` is neither an id nor hex digits.
            ClientError: no session, or several, start with those digits.
        """
        with contextlib.suppress(ValueError):
            return str(uuid.UUID(text))
        digits = text.replace("-", "").lower()
        if not digits or len(digits) > 32 or not _HEX.issuperset(digits):
            raise UsageError(
                f"{what}: {text!r} is neither a session id nor its first digits (0-9, a-f)"
            )
        request = agent_pb2.ResolveSessionPrefixRequest(
            space_id=self.space_id, prefix=digits, limit=CANDIDATES_SHOWN + 1
        )
        found = list((await self.call(self.stub.ResolveSessionPrefix, request)).sessions)
        if not found:
            raise ClientError(
                f"{what}: no session id starts with {text!r} in this space "
                "(`stello tree` lists them)"
            )
        if len(found) > 1:
            listed = ", ".join(f"{s.id[:12]} ({s.label})" for s in found[:CANDIDATES_SHOWN])
            more = ", ..." if len(found) > CANDIDATES_SHOWN else ""
            raise ClientError(
                f"{what}: {text!r} is the start of several session ids: {listed}{more}; "
                "type more of it"
            )
        return str(found[0].id)


async def resolve_space(
    stub: agent_pb2_grpc.AgentGatewayStub, target: Target, seconds: float | None
) -> str:
    """The space id `target.space` names: a UUID as is; a name or nothing by asking WhoAmI."""
    with contextlib.suppress(ValueError):
        return str(uuid.UUID(target.space))
    reply = await stub.WhoAmI(
        agent_pb2.WhoAmIRequest(), timeout=seconds, metadata=bearer_metadata(target.key)
    )
    spaces = list(reply.spaces)
    listed = ", ".join(f"{s.name} ({s.id})" for s in spaces) or "none"
    if target.space:
        for space in spaces:
            if space.name == target.space:
                return str(space.id)
        raise ClientError(
            f"--space: this key reaches no space named {target.space!r} (its spaces: {listed})"
        )
    if len(spaces) == 1:
        return str(spaces[0].id)
    raise ClientError(
        f"this key reaches {len(spaces)} spaces ({listed}): choose one with --space NAME "
        "or set STELLO_SPACE_ID"
    )


@contextlib.asynccontextmanager
async def gateway(args: argparse.Namespace) -> AsyncIterator[Client]:
    """A `Client` for the command's target; a failed call inside becomes a `ClientError`."""
    target = resolve_target(args)
    flags: Mapping[str, str] = getattr(args, "flags", {}) or {}
    async with open_channel(
        target.gateway, tls=target.tls, max_message_bytes=message_limit()
    ) as channel:
        stub = agent_pb2_grpc.AgentGatewayStub(channel)
        try:
            space_id = await resolve_space(stub, target, args.timeout)
            yield Client(stub, target, space_id, args.timeout, flags)
        except grpc.aio.AioRpcError as err:
            raise ClientError(rpc_error_line(err, target.gateway, flags)) from None
