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


def pick(given: str | None, env: str, saved: str | None) -> str:
    """The given value, else the variable's, else the saved one ("" when none)."""
    return given or os.environ.get(env, "").strip() or (saved or "")


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
    from stello.channels import ClientTls

    ca = pick(getattr(args, "ca_file", None), "STELLO_CA_FILE", None)
    cert = pick(getattr(args, "cert_file", None), "STELLO_CERT_FILE", None)
    key = pick(getattr(args, "key_file", None), "STELLO_KEY_FILE", None)
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
