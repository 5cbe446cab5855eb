"""The connection flags of the programs (`stello`, `python -m stello_console`): TLS from the
command line, each flag falling back to its variable, mistakes named by their flags.

Only argparse is imported at the top: building a parser loads no grpc (the
TLS material is read when a command runs).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from stello_client.errors import ClientError

if TYPE_CHECKING:
    from stello.channels import ClientTls


MAX_DEADLINE_S = 366 * 24 * 3600
"""The longest deadline a call takes (`timeout=`, `--timeout`): a year. gRPC's deadline
arithmetic overflows past about 9.2e9 s (int64 nanoseconds) and ends such a call at once
as if its deadline had passed; no deadline at all is None (the SDK)."""

# gRPC's own target forms (unix:PATH, dns:///host:port, ...) pass unchecked.
GRPC_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:")
PORTS = "1..65535"


def address_problem(address: str) -> str | None:
    """Why `address` is not HOST:PORT (``[::1]:50063`` for IPv6), or None when it is one
    (or one of gRPC's own target forms): gRPC would take any text and fail later, at the
    first call, in its resolver's words or as a gateway that does not answer."""
    if address.startswith(GRPC_SCHEMES):
        return None
    example = "(e.g. 127.0.0.1:50063)"
    if "://" in address:
        return f"give HOST:PORT {example}, not a URL, got {address!r}"
    host, colon, port = address.rpartition(":")
    if not colon or host.endswith("]") != host.startswith("["):
        return f"give HOST:PORT {example}: the port is missing in {address!r}"
    if not host:
        return f"give HOST:PORT {example}: the host is missing in {address!r}"
    if ":" in host and not host.startswith("["):
        return f"an IPv6 address goes in brackets, [::1]:50063, got {address!r}"
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"the port must be {PORTS}, got {port!r}"
    return None


def gateway_address(text: str) -> str:
    """An argparse type: HOST:PORT (`address_problem` says what else is refused); an empty
    one is left to the client, which says it is empty."""
    problem = address_problem(text.strip()) if text.strip() else None
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535 (0: any free one)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def pick(given: str | None, env: str, saved: str | None) -> str:
    """The given value, else the variable's, else the saved one ("" when none)."""
    return given or os.environ.get(env, "").strip() or (saved or "")


class FileName(str):
    """A file argument as the command line gave it: bytes that are not UTF-8 are kept
    (Linux names files by bytes; `os` and `pathlib` take them back), so the `stello`
    command's check of its arguments lets it through; `stello.formats.file_names.shown_name` prints
    it."""


def file_name(text: str) -> FileName:
    """An argparse type: a file's name (`FileName`)."""
    return FileName(text)


def tls_options(group: Any, *, default: Any = None) -> None:
    """--ca-file, --cert-file, --key-file (file names: `FileName`), --server-name (each
    with its variable)."""
    group.add_argument(
        "--ca-file",
        type=file_name,
        default=default,
        metavar="PEM",
        help="CA that verifies the server: connect with TLS (STELLO_CA_FILE)",
    )
    group.add_argument(
        "--cert-file",
        type=file_name,
        default=default,
        metavar="PEM",
        help="client certificate for mutual TLS (STELLO_CERT_FILE)",
    )
    group.add_argument(
        "--key-file",
        type=file_name,
        default=default,
        metavar="PEM",
        help="its private key (STELLO_KEY_FILE)",
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
        ClientError: a certificate without its key, or without a CA file; a file that
            cannot be read or is not PEM (naming its flag or variable, and the file).
    """
    from stello.channels import ClientTls

    ca = pick(getattr(args, "ca_file", None), "STELLO_CA_FILE", None)
    cert = pick(getattr(args, "cert_file", None), "STELLO_CERT_FILE", None)
    key = pick(getattr(args, "key_file", None), "STELLO_KEY_FILE", None)
    if cert and not key:
        raise ClientError(
            "--key-file: required with --cert-file (a client certificate needs its private "
            "key): pass both (STELLO_KEY_FILE, STELLO_CERT_FILE), or neither"
        )
    if key and not cert:
        raise ClientError(
            "--cert-file: required with --key-file (a private key goes with its client "
            "certificate): pass both (STELLO_CERT_FILE, STELLO_KEY_FILE), or neither"
        )
    if cert and not ca:
        raise ClientError(
            "--cert-file: needs --ca-file (STELLO_CA_FILE): the CA that verifies the server"
        )
    server_name = pick(getattr(args, "server_name", None), "STELLO_SERVER_NAME", None)
    if server_name and not ca:
        raise ClientError(
            "--server-name: needs --ca-file (STELLO_CA_FILE): it is checked against the "
            "server's certificate"
        )
    if not ca:
        return None
    return ClientTls(
        _read_pem(args, "ca_file", ca, "CA file"),
        _read_pem(args, "cert_file", cert, "certificate file") if cert else None,
        _read_pem(args, "key_file", key, "key file") if key else None,
        server_name or None,
    )


def _read_pem(args: argparse.Namespace, dest: str, path: str, what: str) -> bytes:
    """The PEM file `path` that the flag of `dest` (else its variable) named; a ClientError
    naming that flag or variable when it cannot be used (`read_pem` names the file)."""
    from stello.channels import read_pem
    from stello.errors import FailedPrecondition

    flag = "--" + dest.replace("_", "-")
    source = flag if getattr(args, dest, None) else f"STELLO_{dest.upper()}"
    try:
        return read_pem(path, what)
    except FailedPrecondition as exc:
        raise ClientError(f"{source}: {exc.message}") from None
