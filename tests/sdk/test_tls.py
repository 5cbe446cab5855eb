"""The SDK over TLS and mutual TLS: files named in the arguments, a wrong CA refused."""

from __future__ import annotations

import pytest

from stello_client import AsyncClient, ConfigurationError, Retry, TlsFiles
from stello_client.errors import rpc_error_line
from stello_client.exceptions import Unavailable
from tests.cli.test_client_tls import Suite, _suite  # noqa: F401 (a fixture used by name)
from tests.support.certs import TlsFiles as CertFiles
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql
ONCE = Retry(attempts=1)
ONCE_NOW = Retry(attempts=1, unavailable_for_s=0)


def files_for(suite: Suite, certs: CertFiles, ca: str | None = None) -> TlsFiles:
    """The TLS files a client of `suite` names (its certificate only when the suite wants one)."""
    return TlsFiles(
        ca_file=ca or str(certs.ca),
        cert_file=str(certs.client_cert) if suite.mutual else "",
        key_file=str(certs.client_key) if suite.mutual else "",
    )


async def test_calls_over_tls(suite: Suite, tls_files: CertFiles, space: TestSpace) -> None:
    """With the CA (and the client certificate for mutual TLS) a client creates and reads."""
    tls = files_for(suite, tls_files)
    async with AsyncClient(suite.gateway, space.key, space.sid, tls=tls) as client:
        root = await client.create_root(label="secure")
        assert [n.id for n in await client.get_tree()] == [root.id]


async def test_another_ca_or_plaintext_is_unavailable(
    suite: Suite, tls_files: CertFiles, space: TestSpace
) -> None:
    """A CA that did not sign the gateway's certificate, or no TLS, cannot reach it."""
    wrong = files_for(suite, tls_files, ca=str(tls_files.other_ca))
    for options in ({"tls": wrong}, {"plaintext": True}):
        async with AsyncClient(
            suite.gateway,
            space.key,
            space.sid,
            retry=ONCE,
            **options,
        ) as client:
            with pytest.raises(Unavailable):
                await client.get_tree()


def test_a_certificate_needs_its_key(tls_files: CertFiles) -> None:
    """A client certificate without its key is a ConfigurationError naming TLS."""
    tls = TlsFiles(ca_file=str(tls_files.ca), cert_file=str(tls_files.client_cert))
    with pytest.raises(ConfigurationError, match="needs its private key") as caught:
        AsyncClient("127.0.0.1:1", "key", "space", tls=tls)
    assert caught.value.setting == "tls"


async def test_a_certificate_naming_another_host_is_said(
    suite: Suite, tls_files: CertFiles, space: TestSpace
) -> None:
    """A certificate that does not name the address (or --server-name) is reported as that,
    with --server-name to fix it: not as a server that is not running."""
    tls = TlsFiles(
        ca_file=str(tls_files.ca),
        cert_file=str(tls_files.client_cert) if suite.mutual else "",
        key_file=str(tls_files.client_key) if suite.mutual else "",
        server_name="wrong.example",
    )
    async with AsyncClient(suite.gateway, space.key, space.sid, retry=ONCE, tls=tls) as client:
        with pytest.raises(Unavailable) as caught:
            await client.get_tree()
    assert caught.value.details.startswith(
        f"the certificate of {suite.gateway} does not name that address (nor "
        "TlsFiles.server_name, if given): pass a name it holds as TlsFiles.server_name "
        "(STELLO_SERVER_NAME); gRPC: "
    )
    line = rpc_error_line(caught.value, suite.gateway)
    assert line == (
        f"cannot reach the gateway at {suite.gateway}: the certificate of {suite.gateway} does "
        "not name that address (nor --server-name, if given): pass a name it holds with "
        "--server-name (STELLO_SERVER_NAME)"
    )


async def test_a_keyless_client_takes_tls_files(
    suite: Suite, tls_files: CertFiles, space: TestSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`keyless(gateway, tls=TlsFiles(...))` calls over TLS as the constructor's `tls=` does
    (files as given: no STELLO_*_FILE variable is read), and a file that cannot be used is a
    ConfigurationError when the client is made; keyless took ClientTls alone, and its first
    call raised AttributeError "'TlsFiles' object has no attribute 'credentials'" (sdk8)."""
    monkeypatch.setenv("STELLO_CA_FILE", str(tls_files.other_ca))
    async with AsyncClient.keyless(suite.gateway, tls=files_for(suite, tls_files)) as keyless:
        client = keyless.using(key=space.key, space=space.sid)
        root = await client.create_root(label="secure")
        assert [n.id for n in await client.get_tree()] == [root.id]
    with pytest.raises(ConfigurationError, match="cannot read the CA file") as caught:
        AsyncClient.keyless(suite.gateway, tls=TlsFiles(ca_file="/nowhere/ca.pem"))
    assert caught.value.setting == "tls"


async def test_a_tls_failure_says_what_to_check_in_the_sdk_s_words(
    suite: Suite, tls_files: CertFiles, space: TestSpace
) -> None:
    """A plaintext client of a TLS gateway, or a CA that did not sign its certificate, says
    what to check, naming the SDK's arguments and variables, then gRPC's words: it was
    gRPC's alone ("...: Socket closed", "...: Tls handshake failed ...")."""
    wrong = files_for(suite, tls_files, ca=str(tls_files.other_ca))
    said = {
        "plaintext": (
            f"{suite.gateway} closed the connection: if it serves TLS, pass "
            "tls=TlsFiles(ca_file=...) or set STELLO_CA_FILE (this client is plaintext); gRPC: "
        ),
        "tls": (
            f"the TLS handshake with {suite.gateway} failed: check the CA file "
            "(TlsFiles.ca_file or STELLO_CA_FILE), the server name, and the client certificate "
            "and key if the gateway wants one; gRPC: "
        ),
    }
    for name, options in (("tls", {"tls": wrong}), ("plaintext", {"plaintext": True})):
        async with AsyncClient(
            suite.gateway, space.key, space.sid, retry=ONCE_NOW, **options
        ) as client:
            with pytest.raises(Unavailable) as caught:
                await client.get_tree()
        assert caught.value.cause is not None
        assert caught.value.details == said[name] + str(caught.value.cause.details()), name
