"""Where a client connects and as whom: arguments first, then the environment, then what
`stello up` saved.

The environment: ``STELLO_GATEWAY`` (host:port), ``STELLO_KEY``,
``STELLO_SPACE_ID`` (a space's id or name), and for TLS ``STELLO_CA_FILE``
(its presence means TLS), ``STELLO_CERT_FILE`` / ``STELLO_KEY_FILE`` (mutual
TLS) and ``STELLO_SERVER_NAME``; ``STELLO_MAX_MESSAGE_BYTES`` as the servers'.
Each value falls back on its own (``--gateway`` with the saved key works, as
the `stello` command always did), but the saved space only with the saved key:
another key without a space gets its own one space, as WhoAmI tells. Nothing
here touches the network: a space given by name, or not at all, is settled by
the client's first call (WhoAmI).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from stello.channels import ClientTls
from stello.errors import FailedPrecondition
from stello_client.connection.credentials import Credentials, credentials_path, load_credentials
from stello_client.connection.flags import address_problem, pick
from stello_client.exceptions.base import ConfigurationError

DEFAULT_MESSAGE_BYTES = 64 * 1024 * 1024  # STELLO_MAX_MESSAGE_BYTES' default


@dataclass(frozen=True, slots=True)
class Target:
    """Where a client connects, with which key, for which space (an id, a name, or "")."""

    gateway: str
    key: str
    space: str = ""
    tls: ClientTls | None = None
    max_message_bytes: int = DEFAULT_MESSAGE_BYTES
    source: str = ""
    """Where `gateway` came from ("the gateway= argument", ...; "" unknown)."""
    key_source: str = ""
    """Where `key` came from ("the key= argument", "STELLO_KEY", the saved file; "" unknown)."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """TLS as files: the CA that verifies the gateway (its presence means TLS), a client
    certificate and key for mutual TLS, the name in the gateway's certificate."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""

    @classmethod
    def from_env(cls, given: TlsFiles | None = None) -> TlsFiles:
        """Each file given, else its variable (STELLO_CA_FILE, STELLO_CERT_FILE,
        STELLO_KEY_FILE, STELLO_SERVER_NAME)."""
        given = given or cls()
        return cls(
            pick(given.ca_file, "STELLO_CA_FILE", None),
            pick(given.cert_file, "STELLO_CERT_FILE", None),
            pick(given.key_file, "STELLO_KEY_FILE", None),
            pick(given.server_name, "STELLO_SERVER_NAME", None),
        )

    def load(self) -> ClientTls | None:
        """The TLS material (None = plaintext: no CA file).

        Raises:
            ConfigurationError: a certificate without its key or without a CA, a server
                name without a CA, or a file that cannot be read.
        """
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigurationError(
                "a client certificate needs its private key: give both the certificate and "
                "key files (STELLO_CERT_FILE, STELLO_KEY_FILE), or neither",
                setting="tls",
            )
        if self.cert_file and not self.ca_file:
            raise ConfigurationError(
                "a client certificate needs the CA file (STELLO_CA_FILE) that verifies the server",
                setting="tls",
            )
        if self.server_name and not self.ca_file:
            raise ConfigurationError(
                "a server name needs the CA file (STELLO_CA_FILE): it is checked against the "
                "server's certificate",
                setting="tls",
            )
        if not self.ca_file:
            return None
        try:
            return ClientTls.from_files(
                self.ca_file,
                self.cert_file or None,
                self.key_file or None,
                self.server_name or None,
            )
        except FailedPrecondition as exc:
            raise ConfigurationError(exc.message, setting="tls") from None


def message_limit() -> int:
    """The client's gRPC message limit: STELLO_MAX_MESSAGE_BYTES, as the servers'."""
    value = os.environ.get("STELLO_MAX_MESSAGE_BYTES", "").strip()
    try:
        return int(value) if value else DEFAULT_MESSAGE_BYTES
    except ValueError:
        raise ConfigurationError(
            f"STELLO_MAX_MESSAGE_BYTES must be a number of bytes, got {value!r}",
            setting="max_message_bytes",
        ) from None


def resolve_target(
    gateway: str | None = None,
    key: str | None = None,
    space: str | None = None,
    *,
    tls: ClientTls | TlsFiles | None = None,
    plaintext: bool = False,
) -> Target:
    """Gateway, key and space from the arguments, the environment, then `stello up`'s file
    (read only when something is missing; each value falls back on its own, the saved space
    only when the key is the saved one).

    `tls` given as material is used as is; as files (or not at all) each file
    falls back to its variable; `plaintext=True` ignores them all.

    Raises:
        ConfigurationError: no gateway address or no key anywhere, one given empty, or
            bad TLS settings.
    """
    refuse_empty(gateway=gateway, key=key, space=space)
    address = pick(gateway, "STELLO_GATEWAY", None)
    secret = pick(key, "STELLO_KEY", None)
    named = pick(space, "STELLO_SPACE_ID", None)
    saved = _saved() if not (address and secret and named) else None
    if saved is not None:
        address = address or saved.gateway
        secret = secret or saved.key
        if secret == saved.key:  # the saved space is the saved key's: another key's is its own
            named = named or saved.space_id
    if not address:
        raise ConfigurationError(
            "no gateway address: run `stello up` first, or pass gateway= / set STELLO_GATEWAY",
            setting="gateway",
        )
    check_gateway(address, "gateway" if gateway else "STELLO_GATEWAY")
    source = _source(gateway, saved)
    if not secret:
        raise ConfigurationError(
            "no API key: run `stello up` first, or pass key= / set STELLO_KEY", setting="key"
        )
    material = None
    if not plaintext:
        material = tls if isinstance(tls, ClientTls) else TlsFiles.from_env(tls).load()
    keyed = _key_source(key, saved)
    return Target(address, secret, named, material, message_limit(), source, keyed)


def _source(gateway: str | None, saved: Credentials | None) -> str:
    """Where the gateway's address came from: the argument, the variable, else the file."""
    if gateway:
        return "the gateway= argument"
    if os.environ.get("STELLO_GATEWAY", "").strip() or saved is None:
        return "STELLO_GATEWAY"
    return "the address `stello up` saved"


def _key_source(key: str | None, saved: Credentials | None) -> str:
    """Where the key came from: the argument, the variable, else the file."""
    if key:
        return "the key= argument"
    if os.environ.get("STELLO_KEY", "").strip() or saved is None:
        return "STELLO_KEY"
    return f"the key `stello up` saved in {credentials_path()}"


def check_gateway(address: str, source: str = "gateway") -> None:
    """`address` is HOST:PORT (or one of gRPC's own targets, unix:PATH say).

    Raises:
        ConfigurationError: it is a URL, or its port is missing or out of range, naming
            `source` (the argument or variable it came from).
    """
    problem = address_problem(address)
    if problem is not None:
        raise ConfigurationError(f"{source}: {problem}", setting="gateway")


def refuse_empty(*, left_out: Mapping[str, str] | None = None, **given: str | None) -> None:
    """Each of gateway, key and space given is not empty: an empty one (`--key "$KEY"` with
    KEY unset) fell back to the variable or the saved one, acting with a key not chosen.
    `left_out` says what leaving each out does, where that is not what a new client does
    (`using()`).

    Raises:
        ConfigurationError: one is given empty, naming it and what leaving it out does.
    """
    for setting, value in given.items():
        if value is not None and not value.strip():
            variable = "STELLO_SPACE_ID" if setting == "space" else f"STELLO_{setting.upper()}"
            does = (left_out or {}).get(setting, f"use {variable} or what `stello up` saved")
            raise ConfigurationError(
                f"{setting}= is empty: give one, or leave it out to {does}", setting=setting
            )


def _saved() -> Credentials | None:
    """What `stello up` saved, or None."""
    try:
        return load_credentials()
    except FailedPrecondition as exc:
        raise ConfigurationError(exc.message, setting="credentials") from None
