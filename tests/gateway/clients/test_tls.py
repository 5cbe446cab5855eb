"""The gateway over storage and tree that serve TLS or mutual TLS (STELLO_GATEWAY_SERVICES_*)."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from pydantic import ValidationError

from agent_gateway.app import GatewayClients, create_app
from agent_gateway.config import GatewaySettings
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.errors import FailedPrecondition, Unavailable
from stello.settings import StelloSettings
from stello_cli.admin.reconcile import reconcile
from storage_service.app import create_app as storage_app
from tests.gateway.conftest import TTL_S, Backends, FakeSummarizer, row_counts, rpc_error
from tests.support.certs import TlsFiles, serving_tls
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tree_service.app import create_app as tree_app
from tree_service.config import TreeSettings

RPC_LOGGER = "agent_gateway.clients.rpc"


async def start_backends(start_server: ServerStarter, files: TlsFiles, *, mutual: bool) -> Backends:
    """Storage and tree serving TLS with the test CA's certificate (client certificates too)."""
    tree_config = TreeSettings(provisioning_ttl_s=TTL_S)
    storage = await start_server(serving_tls(storage_app, files, mutual=mutual))
    tree = await start_server(
        serving_tls(partial(tree_app, config=tree_config), files, mutual=mutual)
    )
    return Backends(storage, tree, tree_config)


@pytest.fixture(
    name="tls_backends",
    params=[pytest.param(False, id="tls"), pytest.param(True, id="mutual-tls")],
)
async def _tls_backends(
    request: pytest.FixtureRequest, start_server: ServerStarter, tls_files: TlsFiles
) -> Backends:
    """Storage and tree serving TLS, then the same requiring client certificates."""
    return await start_backends(start_server, tls_files, mutual=request.param)


@pytest.fixture(name="mutual_backends")
async def _mutual_backends(start_server: ServerStarter, tls_files: TlsFiles) -> Backends:
    """Storage and tree requiring client certificates."""
    return await start_backends(start_server, tls_files, mutual=True)


def is_mutual(backends: Backends) -> bool:
    """Whether the backends require client certificates."""
    return backends.storage.app.settings.tls_client_ca_file is not None


def services_tls(files: TlsFiles, *, client_cert: bool) -> dict[str, Path]:
    """Gateway settings for TLS to the services (with the client certificate if asked)."""
    values = {"services_ca_file": files.ca}
    if client_cert:
        values |= {"services_cert_file": files.client_cert, "services_key_file": files.client_key}
    return values


async def start_gateway(
    start_server: ServerStarter, backends: Backends, **overrides: Any
) -> RunningServer:
    """A plaintext gateway over `backends`; keyword overrides go to GatewaySettings."""
    config = backends.gateway_config(**overrides)
    return await start_server(partial(create_app, config=config, summarizer=FakeSummarizer()))


async def create_root(gateway: RunningServer, space: TestSpace) -> Any:
    """CreateRoot through the gateway; its reply."""
    async with gateway.channel(space.key) as channel:
        stub = agent_pb2_grpc.AgentGatewayStub(channel)
        return await stub.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid), timeout=10)


@pytest.mark.sql
class TestGatewayOverTls:
    async def test_create_root_and_fork(
        self,
        start_server: ServerStarter,
        tls_backends: Backends,
        tls_files: TlsFiles,
        space: TestSpace,
    ) -> None:
        """With the CA (and its client certificate for mutual TLS) CreateRoot and Fork work."""
        tls = services_tls(tls_files, client_cert=is_mutual(tls_backends))
        gateway = await start_gateway(start_server, tls_backends, **tls)
        root = (await create_root(gateway, space)).session
        async with gateway.channel(space.key) as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            child = (
                await stub.Fork(
                    agent_pb2.ForkRequest(
                        space_id=space.sid, source_session_id=root.id, label="child"
                    ),
                    timeout=10,
                )
            ).session
            view = await stub.GetSession(
                agent_pb2.GetSessionRequest(space_id=space.sid, session_id=child.id), timeout=10
            )
        assert child.parent_id == root.id
        assert (view.session.node.label, view.session.node.parent_id) == ("child", root.id)

    async def test_gateway_without_the_ca_writes_nothing(
        self,
        start_server: ServerStarter,
        tls_backends: Backends,
        pool: asyncpg.Pool,
        space: TestSpace,
    ) -> None:
        """A plaintext gateway cannot reach TLS services: CreateRoot is UNAVAILABLE, no row."""
        gateway = await start_gateway(start_server, tls_backends)
        err = await rpc_error(create_root(gateway, space))
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert await row_counts(pool, space) == {
            "sessions": 0,
            "records": 0,
            "slots": 0,
            "configs": 0,
            "metadata": 0,
        }

    async def test_several_addresses_with_server_name(
        self,
        start_server: ServerStarter,
        tls_backends: Backends,
        tls_files: TlsFiles,
        space: TestSpace,
    ) -> None:
        """Round robin over a list of addresses works over TLS given the certificates' name."""
        tls = services_tls(tls_files, client_cert=is_mutual(tls_backends))
        storage = tls_backends.storage.address
        gateway = await start_gateway(
            start_server,
            tls_backends,
            storage_address=f"{storage},{storage}",
            services_server_name="localhost",
            **tls,
        )
        reply = await create_root(gateway, space)
        assert reply.session.id


@pytest.mark.sql
class TestNameMismatch:
    async def test_the_cause_is_logged_once_naming_the_address(
        self,
        start_server: ServerStarter,
        tls_files: TlsFiles,
        space: TestSpace,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Services whose certificate does not name what the gateway checks: each call is
        UNAVAILABLE, and the gateway's log says why, once, with the service's address."""
        backends = await start_backends(start_server, tls_files, mutual=False)
        tls = services_tls(tls_files, client_cert=False)
        gateway = await start_gateway(
            start_server, backends, services_server_name="wrong.example", **tls
        )
        with caplog.at_level(logging.WARNING, logger=RPC_LOGGER):
            for _ in range(2):
                err = await rpc_error(create_root(gateway, space))
                assert err.code() == grpc.StatusCode.UNAVAILABLE
        lines = [r.getMessage() for r in caplog.records if r.name == RPC_LOGGER]
        assert len(lines) == 1, lines
        starts = (
            f"cannot reach SessionStorage at {backends.storage.address}: ",
            f"cannot reach SessionTree at {backends.tree.address}: ",
        )
        assert lines[0].startswith(starts), lines[0]
        assert "Hostname Verification Check failed" in lines[0]


@pytest.mark.sql
class TestMutualTls:
    async def test_gateway_without_client_certificate_writes_nothing(
        self,
        start_server: ServerStarter,
        mutual_backends: Backends,
        tls_files: TlsFiles,
        pool: asyncpg.Pool,
        space: TestSpace,
    ) -> None:
        """Trusting the CA is not enough when the services want a client certificate."""
        tls = services_tls(tls_files, client_cert=False)
        gateway = await start_gateway(start_server, mutual_backends, **tls)
        err = await rpc_error(create_root(gateway, space))
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert (await row_counts(pool, space))["sessions"] == 0

    async def test_reconcile_over_mutual_tls(
        self, mutual_backends: Backends, tls_files: TlsFiles, admin_key: str
    ) -> None:
        """`reconcile` reaches a mutual-TLS tree with the client certificate, and not without."""
        address = mutual_backends.tree.address
        removed = await reconcile(
            address, admin_key, dry_run=True, tls=tls_files.client(with_cert=True)
        )
        assert isinstance(removed, list)
        with pytest.raises(Unavailable):
            await reconcile(address, admin_key, dry_run=True, timeout_s=5, tls=tls_files.client())


class TestServicesTlsSettings:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            pytest.param(
                {"services_ca_file": "ca.pem", "services_cert_file": "c.pem"},
                "STELLO_GATEWAY_SERVICES_CERT_FILE is set but STELLO_GATEWAY_SERVICES_KEY_FILE "
                "is not: the gateway's client certificate",
                id="cert-without-key",
            ),
            pytest.param(
                {"services_ca_file": "ca.pem", "services_key_file": "k.pem"},
                "STELLO_GATEWAY_SERVICES_KEY_FILE is set but STELLO_GATEWAY_SERVICES_CERT_FILE "
                "is not",
                id="key-without-cert",
            ),
            pytest.param(
                {"services_cert_file": "c.pem", "services_key_file": "k.pem"},
                "STELLO_GATEWAY_SERVICES_CERT_FILE needs STELLO_GATEWAY_SERVICES_CA_FILE",
                id="cert-without-ca",
            ),
            pytest.param(
                {"services_server_name": "storage.internal"},
                "STELLO_GATEWAY_SERVICES_SERVER_NAME needs STELLO_GATEWAY_SERVICES_CA_FILE",
                id="server-name-without-ca",
            ),
            pytest.param(
                {"services_ca_file": "ca.pem", "tree_address": "a:1,b:1"},
                "several storage or tree addresses, set STELLO_GATEWAY_SERVICES_SERVER_NAME",
                id="several-addresses-without-name",
            ),
        ],
    )
    def test_incomplete_tls_is_refused(self, values: dict[str, Any], message: str) -> None:
        """TLS settings that cannot work or would be ignored fail, naming what to set."""
        with pytest.raises(ValidationError, match=message):
            GatewaySettings(**values)

    def test_from_environment(self, monkeypatch: pytest.MonkeyPatch, tls_files: TlsFiles) -> None:
        """The STELLO_GATEWAY_SERVICES_* variables are read; plaintext stays the default."""
        for name in ("CA_FILE", "CERT_FILE", "KEY_FILE", "SERVER_NAME"):
            monkeypatch.delenv(f"STELLO_GATEWAY_SERVICES_{name}", raising=False)
        assert GatewaySettings().services_ca_file is None
        monkeypatch.setenv("STELLO_GATEWAY_SERVICES_CA_FILE", str(tls_files.ca))
        monkeypatch.setenv("STELLO_GATEWAY_SERVICES_CERT_FILE", str(tls_files.client_cert))
        monkeypatch.setenv("STELLO_GATEWAY_SERVICES_KEY_FILE", str(tls_files.client_key))
        monkeypatch.setenv("STELLO_GATEWAY_SERVICES_SERVER_NAME", "localhost")
        config = GatewaySettings()
        assert (config.services_ca_file, config.services_server_name) == (tls_files.ca, "localhost")
        assert (config.services_cert_file, config.services_key_file) == (
            tls_files.client_cert,
            tls_files.client_key,
        )

    def test_unreadable_ca_file_is_named(self, tmp_path: Path) -> None:
        """A CA file that cannot be read stops the gateway at start, naming its variable and
        the file."""
        missing = tmp_path / "missing.pem"
        config = GatewaySettings(services_ca_file=missing)
        with pytest.raises(
            FailedPrecondition, match=f"cannot read the STELLO_GATEWAY_SERVICES_CA_FILE {missing}"
        ):
            GatewayClients.connect(config, StelloSettings())
