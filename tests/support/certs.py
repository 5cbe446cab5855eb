"""Throwaway TLS material for the TLS tests: a CA, its server and client certificates, another CA.

The server certificate names 127.0.0.1 (IP) and localhost (DNS), so a client dialling
``127.0.0.1:port`` verifies it without a name override. Keys are P-256 (quick to make).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from stello.auth import KeyStore
from stello.channels import ClientTls
from stello.serving.runner import AppFactory
from stello.serving.server import ServiceApp
from stello.settings import StelloSettings

VALID_FOR = datetime.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files in one folder: `ca` signed the server and client certificates; `other_ca` none."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path

    def client(self, *, with_cert: bool = False, server_name: str | None = None) -> ClientTls:
        """Client TLS trusting `ca`, presenting the client certificate when `with_cert`."""
        if with_cert:
            return ClientTls.from_files(self.ca, self.client_cert, self.client_key, server_name)
        return ClientTls.from_files(self.ca, server_name=server_name)


def serving_tls(factory: AppFactory, files: TlsFiles, *, mutual: bool = False) -> AppFactory:
    """`factory` serving TLS with `files` (requiring client certificates when `mutual`)."""

    def with_tls(settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore) -> ServiceApp:
        update = {
            "tls_cert_file": str(files.server_cert),
            "tls_key_file": str(files.server_key),
            "tls_client_ca_file": str(files.ca) if mutual else None,
        }
        return factory(settings.model_copy(update=update), pool, keys)

    return with_tls


@dataclass(frozen=True, slots=True)
class _Issuer:
    name: x509.Name
    key: ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
    )


def _write(
    folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> None:
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _ca(folder: Path, stem: str, common_name: str) -> _Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write(folder, stem, cert, key)
    return _Issuer(name, key)


def _leaf(
    folder: Path,
    stem: str,
    issuer: _Issuer,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName],
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(_name(stem), issuer.name, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    _write(folder, stem, builder.sign(issuer.key, hashes.SHA256()), key)


def write_tls_files(folder: Path) -> TlsFiles:
    """Make a CA, a server and a client certificate it signs, and an unrelated CA, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = _ca(folder, "ca", "Stello test CA")
    _ca(folder, "other-ca", "Unrelated test CA")
    server_names: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    _leaf(folder, "server", ca, ExtendedKeyUsageOID.SERVER_AUTH, server_names)
    _leaf(folder, "client", ca, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return TlsFiles(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
        other_ca=folder / "other-ca.pem",
    )


@pytest.fixture(name="tls_files", scope="session")
def _tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """TLS material shared by the session's TLS tests."""
    return write_tls_files(tmp_path_factory.mktemp("tls"))
