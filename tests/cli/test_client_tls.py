"""The client commands over TLS: --ca-file, --cert-file, --key-file and their variables.

Storage, tree and gateway run in-process, all serving TLS (mutual TLS in the second
variant), the gateway reaching the other two with its STELLO_GATEWAY_SERVICES_* settings;
the `stello` commands run as real processes (off the event loop, which serves them).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypedDict

import pytest

from agent_gateway.app import create_app as gateway_app
from agent_gateway.config import GatewaySettings
from storage_service.app import create_app as storage_app
from tests.cli.processes import private_env, run_cli
from tests.support.certs import TlsFiles, serving_tls
from tests.support.fixtures import ServerStarter, TestSpace
from tree_service.app import create_app as tree_app

pytestmark = pytest.mark.subprocess


class ServicesClientCert(TypedDict, total=False):
    """The gateway's client certificate for storage and tree (GatewaySettings fields)."""

    services_cert_file: Path
    services_key_file: Path


@dataclass(frozen=True, slots=True)
class Suite:
    """Addresses of servers that all serve TLS, and whether they want client certificates."""

    gateway: str
    tree: str
    mutual: bool


async def start_suite(start_server: ServerStarter, files: TlsFiles, *, mutual: bool) -> Suite:
    """Storage, tree and a gateway over them, every one serving TLS with `files`."""
    storage = await start_server(serving_tls(storage_app, files, mutual=mutual))
    tree = await start_server(serving_tls(tree_app, files, mutual=mutual))
    services = ServicesClientCert(
        services_cert_file=files.client_cert, services_key_file=files.client_key
    )
    config = GatewaySettings(
        storage_address=storage.address,
        tree_address=tree.address,
        services_ca_file=files.ca,
        **(services if mutual else ServicesClientCert()),
    )
    gateway_factory = partial(gateway_app, config=config)
    gateway = await start_server(serving_tls(gateway_factory, files, mutual=mutual))
    return Suite(gateway.address, tree.address, mutual)


@pytest.fixture(
    name="suite", params=[pytest.param(False, id="tls"), pytest.param(True, id="mutual-tls")]
)
async def _suite(
    request: pytest.FixtureRequest, start_server: ServerStarter, tls_files: TlsFiles
) -> Suite:
    return await start_suite(start_server, tls_files, mutual=request.param)


def gateway_env(home: Path, space: TestSpace, gateway: str) -> dict[str, str]:
    """A private environment naming the gateway, key and space (TLS left to each test)."""
    env = private_env(home)
    env.update(STELLO_GATEWAY=gateway, STELLO_KEY=space.key, STELLO_SPACE_ID=space.sid)
    return env


def tls_flags(files: TlsFiles, suite: Suite) -> list[str]:
    """--ca-file, and the client certificate when the suite wants one."""
    flags = ["--ca-file", str(files.ca)]
    if suite.mutual:
        flags += ["--cert-file", str(files.client_cert), "--key-file", str(files.client_key)]
    return flags


def not_utf8_copy(home: Path, path: str) -> str:
    """A copy of the file at `path` in `home`, its name ending in a byte that is not UTF-8
    (\\xff)."""
    name = os.fsdecode(os.fsencode(home) + b"/" + os.fsencode(Path(path).name) + b"\xff")
    Path(name).write_bytes(Path(path).read_bytes())
    return name


async def stello(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a `stello` command in a thread, so this loop keeps serving the servers."""
    return await asyncio.to_thread(run_cli, env, *args)


@pytest.mark.sql
class TestOverTls:
    async def test_root_and_tree_with_flags(
        self, suite: Suite, tls_files: TlsFiles, space: TestSpace, home: Path
    ) -> None:
        """`root` and `tree` with --ca-file (and the client certificate) reach a TLS gateway."""
        env = gateway_env(home, space, suite.gateway)
        flags = tls_flags(tls_files, suite)
        made = await stello(env, "root", "--label", "Secure", "--json", *flags)
        assert made.returncode == 0, made.stderr
        root = json.loads(made.stdout)
        tree = await stello(env, "tree", *flags)
        assert (tree.returncode, tree.stdout) == (
            0,
            f"Secure  [active, 0 turns]  {root['id'][:8]}\n",
        )

    async def test_variables_instead_of_flags(
        self, suite: Suite, tls_files: TlsFiles, space: TestSpace, home: Path
    ) -> None:
        """STELLO_CA_FILE, STELLO_CERT_FILE and STELLO_KEY_FILE work like the flags."""
        env = gateway_env(home, space, suite.gateway)
        env["STELLO_CA_FILE"] = str(tls_files.ca)
        if suite.mutual:
            env.update(STELLO_CERT_FILE=str(tls_files.client_cert))
            env.update(STELLO_KEY_FILE=str(tls_files.client_key))
        done = await stello(env, "digests", "--json")
        assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")

    async def test_file_names_that_are_not_utf8_are_read(
        self, suite: Suite, tls_files: TlsFiles, space: TestSpace, home: Path
    ) -> None:
        """--ca-file, --cert-file and --key-file (and `health`'s) take files whose names hold
        bytes that are not UTF-8 (Linux names files by bytes): each was refused ("--ca-file:
        is not valid UTF-8") though the file was there to read."""
        env = gateway_env(home, space, suite.gateway)
        flags = [
            not_utf8_copy(home, flag) if flag.startswith("/") else flag
            for flag in tls_flags(tls_files, suite)
        ]
        done = await stello(env, "digests", "--json", *flags)
        assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")
        done = await stello(env, *flags, "health", suite.tree)
        assert (done.returncode, done.stdout) == (0, f"{suite.tree}: SERVING\n")

    async def test_without_tls_material_is_unavailable(
        self, suite: Suite, tls_files: TlsFiles, space: TestSpace, home: Path
    ) -> None:
        """Without --ca-file (mutual TLS: without a certificate) a call fails on one line,
        with a hint about TLS."""
        env = gateway_env(home, space, suite.gateway)
        short = ["--ca-file", str(tls_files.ca)] if suite.mutual else []
        done = await stello(env, "tree", "--timeout", "5", *short)
        assert done.returncode == 1
        assert done.stderr.startswith(f"stello: cannot reach the gateway at {suite.gateway}: ")
        assert len(done.stderr.splitlines()) == 1
        # The hint points at TLS, not at starting a gateway (one is running).
        assert "--ca-file" in done.stderr and "stello up" not in done.stderr

    async def test_reconcile_reaches_the_tree(
        self, suite: Suite, tls_files: TlsFiles, admin_key: str, home: Path
    ) -> None:
        """`reconcile --ca-file` talks TLS to the tree service."""
        env = private_env(home)
        args = ["--tree", suite.tree, "--admin-key", admin_key, "--dry-run", "--json"]
        done = await stello(env, "reconcile", *args, *tls_flags(tls_files, suite))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["dry_run"] is True


@pytest.mark.sql
class TestHealthOverTls:
    async def test_health_with_the_tls_flags(
        self, suite: Suite, tls_files: TlsFiles, home: Path
    ) -> None:
        """`stello health --ca-file` (and the client certificate) reads a TLS server: SERVING."""
        done = await stello(private_env(home), "health", suite.tree, *tls_flags(tls_files, suite))
        assert (done.returncode, done.stdout) == (0, f"{suite.tree}: SERVING\n")
        flags = tls_flags(tls_files, suite)
        # --json before the command or after it
        for args in (("--json", "health", suite.tree), ("health", suite.tree, "--json")):
            done = await stello(private_env(home), *args, *flags)
            assert (done.returncode, json.loads(done.stdout)) == (
                0,
                {"address": suite.tree, "status": "SERVING"},
            )

    async def test_health_without_tls_is_unavailable(self, suite: Suite, home: Path) -> None:
        """Plaintext health against a TLS server: exit 1, UNAVAILABLE, with the hint about
        --ca-file the other commands give (on main: UNAVAILABLE alone)."""
        hint = (
            f"{suite.tree} closed the connection: if it serves TLS, pass --ca-file "
            "(and --cert-file/--key-file for mutual TLS)"
        )
        done = await stello(private_env(home), "health", suite.tree)
        assert (done.returncode, done.stderr) == (1, f"{suite.tree}: UNAVAILABLE ({hint})\n")
        done = await stello(private_env(home), "health", suite.tree, "--json")
        assert (done.returncode, json.loads(done.stdout)) == (
            1,
            {"address": suite.tree, "status": "UNAVAILABLE", "hint": hint},
        )

    async def test_server_name_is_checked(
        self, suite: Suite, tls_files: TlsFiles, home: Path
    ) -> None:
        """--server-name replaces the address's host in the certificate check: a name the
        certificate has passes, another fails, saying so (as a probe inside a container
        needs)."""
        flags = tls_flags(tls_files, suite)
        env = private_env(home)
        good = await stello(env, "health", suite.tree, *flags, "--server-name", "localhost")
        assert good.returncode == 0, good.stderr
        env["STELLO_SERVER_NAME"] = "not-in-the.certificate"
        bad = await stello(env, "health", suite.tree, *flags)
        assert (bad.returncode, bad.stderr) == (
            1,
            f"{suite.tree}: UNAVAILABLE (the certificate of {suite.tree} does not name that "
            "address (nor --server-name, if given): pass a name it holds with --server-name "
            "(STELLO_SERVER_NAME))\n",
        )


class TestTlsErrors:
    def test_server_name_without_ca_is_one_line(self, home: Path) -> None:
        """--server-name without --ca-file: one line saying what it needs, exit 1."""
        done = run_cli(private_env(home), "health", "127.0.0.1:1", "--server-name", "x")
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            "stello: --server-name: needs --ca-file (STELLO_CA_FILE): it is checked against "
            "the server's certificate\n"
        )

    def test_unreadable_ca_file_is_one_line(self, home: Path) -> None:
        """A --ca-file that cannot be read: one line naming it, exit 1, no traceback."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="k", STELLO_SPACE_ID="s")
        missing = home / "missing.pem"
        done = run_cli(env, "tree", "--ca-file", str(missing))
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            f"stello: --ca-file: cannot read the CA file {missing}: No such file or directory\n"
        )

    def test_unreadable_files_name_their_flag_or_variable(
        self, home: Path, tls_files: TlsFiles
    ) -> None:
        """A TLS file that cannot be read, or is not PEM, is one line naming the flag (or
        variable) that gave it and the file, bytes that are not UTF-8 shown as \\xff (they
        showed as \\udcff, and the line named neither flag nor variable), exit 1."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="k", STELLO_SPACE_ID="s")
        missing = os.fsdecode(os.fsencode(home) + b"/ca\xff.pem")
        done = run_cli(env, "tree", "--ca-file", missing)
        assert (done.returncode, done.stdout, done.stderr) == (
            1,
            "",
            f"stello: --ca-file: cannot read the CA file {home}/ca\\xff.pem: "
            "No such file or directory\n",
        )
        env.update(STELLO_CA_FILE=str(tls_files.ca), STELLO_CERT_FILE=str(tls_files.client_cert))
        garbage = home / "key.txt"
        garbage.write_text("not a key\n")
        env["STELLO_KEY_FILE"] = not_utf8_copy(home, str(garbage))
        done = run_cli(env, "health", "127.0.0.1:1")
        assert (done.returncode, done.stdout, done.stderr) == (
            1,
            "",
            f"stello: STELLO_KEY_FILE: the key file {home}/key.txt\\xff is not PEM "
            "(no -----BEGIN line)\n",
        )

    def test_certificate_without_key_is_one_line(self, home: Path, tls_files: TlsFiles) -> None:
        """STELLO_CERT_FILE without STELLO_KEY_FILE (or the other way round, or either
        without a CA file): one line naming the flag missing or refused first, exit 1."""
        env = private_env(home)
        env.update(STELLO_GATEWAY="127.0.0.1:1", STELLO_KEY="k", STELLO_SPACE_ID="s")
        env.update(STELLO_CA_FILE=str(tls_files.ca), STELLO_CERT_FILE=str(tls_files.client_cert))
        done = run_cli(env, "tree")
        assert (done.returncode, done.stderr) == (
            1,
            "stello: --key-file: required with --cert-file (a client certificate needs its "
            "private key): pass both (STELLO_KEY_FILE, STELLO_CERT_FILE), or neither\n",
        )
        del env["STELLO_CERT_FILE"]
        done = run_cli(env, "tree", "--key-file", str(tls_files.client_key))
        assert (done.returncode, done.stderr) == (
            1,
            "stello: --cert-file: required with --key-file (a private key goes with its "
            "client certificate): pass both (STELLO_CERT_FILE, STELLO_KEY_FILE), or neither\n",
        )
        del env["STELLO_CA_FILE"]
        cert = ("--cert-file", str(tls_files.client_cert), "--key-file", str(tls_files.client_key))
        done = run_cli(env, "tree", *cert)
        assert (done.returncode, done.stderr) == (
            1,
            "stello: --cert-file: needs --ca-file (STELLO_CA_FILE): the CA that verifies the "
            "server\n",
        )
