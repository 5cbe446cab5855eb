"""TLS and mutual TLS as configuration: servers from STELLO_TLS_*, clients from `ClientTls`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from pydantic import ValidationError

from stello.auth import KeyStore
from stello.channels import ClientTls, open_channel
from stello.errors import FailedPrecondition
from stello.serving.runner import AppFactory
from stello.serving.server import create_server
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from tests.support import probe
from tests.support.certs import TlsFiles, serving_tls
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace

SESSION = "00000000-0000-4000-8000-000000000001"


def tls_probe(files: TlsFiles, *, mutual: bool = False) -> AppFactory:
    """The probe app serving TLS with `files` (requiring client certificates when `mutual`)."""
    return serving_tls(probe.probe_app, files, mutual=mutual)


async def echo(server: RunningServer, space: TestSpace, tls: ClientTls | None) -> grpc.StatusCode:
    """Call the probe's Echo over a channel with `tls`; the status it ends with."""
    async with open_channel(server.address, key=space.key, tls=tls) as channel:
        try:
            reply = await probe.call(channel, probe.ECHO)(
                storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION), timeout=10
            )
        except grpc.aio.AioRpcError as err:
            return err.code()
    assert reply.session.id == SESSION
    return grpc.StatusCode.OK


@pytest.mark.sql
class TestServerTls:
    async def test_client_trusting_the_ca_is_answered(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles
    ) -> None:
        """A server with STELLO_TLS_CERT_FILE answers a client that trusts its CA, key and all."""
        server = await start_server(tls_probe(tls_files))
        assert await echo(server, space, tls_files.client()) == grpc.StatusCode.OK

    async def test_root_certificates_alone_still_work(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles
    ) -> None:
        """open_channel(root_certificates=...) keeps working as before `tls` existed."""
        server = await start_server(tls_probe(tls_files))
        roots = tls_files.ca.read_bytes()
        async with open_channel(server.address, key=space.key, root_certificates=roots) as channel:
            reply = await probe.call(channel, probe.ECHO)(
                storage_pb2.GetSessionRequest(space_id=space.sid, session_id=SESSION), timeout=10
            )
        assert reply.session.id == SESSION

    @pytest.mark.parametrize("client", ["plaintext", "other-ca"])
    async def test_untrusting_clients_are_unavailable(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles, client: str
    ) -> None:
        """A plaintext client, or one trusting another CA, cannot connect: UNAVAILABLE."""
        server = await start_server(tls_probe(tls_files))
        tls = None if client == "plaintext" else ClientTls.from_files(tls_files.other_ca)
        assert await echo(server, space, tls) == grpc.StatusCode.UNAVAILABLE

    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            pytest.param("localhost", grpc.StatusCode.OK, id="name-in-certificate"),
            pytest.param("wrong.example", grpc.StatusCode.UNAVAILABLE, id="other-name"),
        ],
    )
    async def test_server_name_override_is_checked(
        self,
        start_server: ServerStarter,
        space: TestSpace,
        tls_files: TlsFiles,
        name: str,
        expected: grpc.StatusCode,
    ) -> None:
        """With `server_name` the certificate must name it instead of the dialled host."""
        server = await start_server(tls_probe(tls_files))
        assert await echo(server, space, tls_files.client(server_name=name)) == expected

    async def test_plaintext_server_refuses_tls_clients(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles
    ) -> None:
        """Without STELLO_TLS_* the server is plaintext: a TLS client gets UNAVAILABLE."""
        server = await start_server(probe.probe_app)
        assert await echo(server, space, tls_files.client()) == grpc.StatusCode.UNAVAILABLE
        assert await echo(server, space, None) == grpc.StatusCode.OK


@pytest.mark.sql
class TestMutualTls:
    async def test_client_without_certificate_is_unavailable(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles
    ) -> None:
        """With STELLO_TLS_CLIENT_CA_FILE a client presenting no certificate cannot connect."""
        server = await start_server(tls_probe(tls_files, mutual=True))
        assert await echo(server, space, tls_files.client()) == grpc.StatusCode.UNAVAILABLE

    async def test_client_with_certificate_is_answered(
        self, start_server: ServerStarter, space: TestSpace, tls_files: TlsFiles
    ) -> None:
        """A client certificate the client CA signed gets through, and the key still applies."""
        server = await start_server(tls_probe(tls_files, mutual=True))
        assert await echo(server, space, tls_files.client(with_cert=True)) == grpc.StatusCode.OK


@pytest.mark.sql
class TestServerFiles:
    async def test_unreadable_certificate_is_named(
        self, settings: StelloSettings, pool: asyncpg.Pool, keys: KeyStore, tmp_path: Path
    ) -> None:
        """A certificate file that cannot be read fails create_server naming variable and file."""
        missing = tmp_path / "missing.pem"
        update = {"tls_cert_file": str(missing), "tls_key_file": str(missing)}
        app = probe.probe_app(settings.model_copy(update=update), pool, keys)
        with pytest.raises(FailedPrecondition, match=f"STELLO_TLS_CERT_FILE {missing}: No such"):
            await create_server(app, "127.0.0.1:0")


class TestServerSettings:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            pytest.param(
                {"tls_cert_file": "c.pem"},
                "STELLO_TLS_CERT_FILE is set but STELLO_TLS_KEY_FILE is not",
                id="cert-without-key",
            ),
            pytest.param(
                {"tls_key_file": "k.pem"},
                "STELLO_TLS_KEY_FILE is set but STELLO_TLS_CERT_FILE is not",
                id="key-without-cert",
            ),
            pytest.param(
                {"tls_client_ca_file": "ca.pem"},
                r"STELLO_TLS_CLIENT_CA_FILE \(mutual TLS\) needs TLS",
                id="client-ca-without-cert",
            ),
        ],
    )
    def test_half_a_tls_configuration_is_refused(
        self, values: dict[str, Any], message: str
    ) -> None:
        """Settings that would silently serve plaintext are refused, naming what is missing."""
        with pytest.raises(ValidationError, match=message):
            StelloSettings(**values)


class TestClientTls:
    def test_unreadable_file_is_named(self, tmp_path: Path) -> None:
        """A CA file that cannot be read is FailedPrecondition naming the file and why."""
        missing = tmp_path / "missing.pem"
        with pytest.raises(FailedPrecondition, match=f"cannot read the CA file {missing}: No such"):
            ClientTls.from_files(missing)

    def test_file_that_is_not_pem_is_named(self, tmp_path: Path, tls_files: TlsFiles) -> None:
        """A key file without a PEM block is refused before any connection is tried."""
        garbage = tmp_path / "key.der"
        garbage.write_bytes(b"\x30\x82binary")
        with pytest.raises(FailedPrecondition, match=f"the key file {garbage} is not PEM"):
            ClientTls.from_files(tls_files.ca, tls_files.client_cert, garbage)

    def test_certificate_needs_its_key(self, tls_files: TlsFiles) -> None:
        """A client certificate without its private key is refused."""
        with pytest.raises(ValueError, match="needs its private key"):
            ClientTls(tls_files.ca.read_bytes(), certificate_chain=b"-----BEGIN CERTIFICATE")
