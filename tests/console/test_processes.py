"""`stello up` serves the console and prints its URL; `python -m stello_console` in a deployment."""

from __future__ import annotations

import asyncio
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from stello_console.__main__ import build_parser
from tests.cli.processes import (
    FREE_PORTS,
    StelloUp,
    copy_cluster,
    postgres_processes,
    private_env,
    run_cli,
)
from tests.console.conftest import ConsoleStack
from tests.console.http import fetch, signed_headers
from tests.support.ports import free_port

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(180)]


async def exchange(url: str) -> tuple[int, dict[str, str]]:
    """Open the printed URL: its port, and what the page then sends (cookie, page key)."""
    address, _, query = url.removeprefix("http://").partition("/")
    port = int(address.rsplit(":", 1)[1])
    reply = await fetch(port, "/" + query)
    assert reply.status == 200, reply.text
    assert reply.header("set-cookie") is not None
    return port, signed_headers(reply)


class TestStelloUp:
    async def test_up_prints_the_console_url_and_serves_the_space(self, home: Path) -> None:
        """The `console:` line has a token; its cookie opens the local space; Ctrl-C stops it."""
        up = await asyncio.to_thread(StelloUp.start, private_env(home))
        try:
            url = up.lines["console"]
            assert url.startswith("http://127.0.0.1:") and "?token=" in url
            port, signed = await exchange(url)
            config = await fetch(port, "/api/config", headers=signed)
            assert config.json()["space_id"] == up.lines["space_id"]
            assert (await fetch(port, "/api/tree", headers=signed)).json() == {"nodes": []}
            assert (await fetch(port, "/api/tree")).status == 403
            code, rest = await asyncio.to_thread(up.interrupt)
            assert (code, rest[-1:]) == (0, ["stopped"])
        finally:
            await asyncio.to_thread(up.kill)

    async def test_a_restart_keeps_the_console_signed_in(
        self, home: Path, cluster_template: Path
    ) -> None:
        """A restart prints the same URL and the tab's cookie still opens the space; the secret
        is kept beside the credentials, readable by the user only."""
        env = private_env(home)
        copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
        port = free_port()
        first = await asyncio.to_thread(StelloUp.start, env, "--console-port", str(port))
        try:
            _, signed = await exchange(first.lines["console"])
            await asyncio.to_thread(first.interrupt)
        finally:
            await asyncio.to_thread(first.kill)
        again = await asyncio.to_thread(StelloUp.start, env, "--console-port", str(port))
        try:
            assert again.lines["console"] == first.lines["console"]
            tree = await fetch(port, "/api/tree", headers=signed)
            assert (tree.status, tree.json()) == (200, {"nodes": []})
        finally:
            await asyncio.to_thread(again.kill)
        secret = Path(env["STELLO_CONFIG_DIR"]) / "console-secret.json"
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600

    async def test_a_new_console_token_signs_old_tabs_out(
        self, home: Path, cluster_template: Path
    ) -> None:
        """--new-console-token prints a new URL; the old cookie and URL are refused, the API
        saying so in JSON (CONSOLE_SIGNED_OUT) so the open page can tell what to do."""
        env = private_env(home)
        copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
        port = free_port()
        first = await asyncio.to_thread(StelloUp.start, env, "--console-port", str(port))
        try:
            _, signed = await exchange(first.lines["console"])
            await asyncio.to_thread(first.interrupt)
        finally:
            await asyncio.to_thread(first.kill)
        args = ("--console-port", str(port), "--new-console-token")
        renewed = await asyncio.to_thread(StelloUp.start, env, *args)
        try:
            assert renewed.lines["console"] != first.lines["console"]
            refused = await fetch(port, "/api/tree", headers=signed)
            assert refused.status == 403
            assert refused.json()["error"]["reason"] == "CONSOLE_SIGNED_OUT"
            assert "--new-console-token" in refused.json()["error"]["message"]
            old_token = "/?" + first.lines["console"].partition("/?")[2]
            assert (await fetch(port, old_token)).status == 403
            _, fresh = await exchange(renewed.lines["console"])
            assert (await fetch(port, "/api/tree", headers=fresh)).status == 200
        finally:
            await asyncio.to_thread(renewed.kill)

    async def test_no_console_says_it_is_off(self, home: Path, cluster_template: Path) -> None:
        """--no-console serves nothing and says so on the console line."""
        env = private_env(home)
        copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
        up = await asyncio.to_thread(StelloUp.start, env, "--no-console")
        try:
            assert up.lines["console"] == "off (--no-console)"
        finally:
            await asyncio.to_thread(up.kill)

    def test_a_taken_console_port_is_one_line_and_leaves_nothing(
        self, home: Path, cluster_template: Path
    ) -> None:
        """The console's port in use: one line naming --console-port, exit 1, nothing left."""
        env = private_env(home)
        copy_cluster(cluster_template, env["STELLO_DATA_DIR"])
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            done = run_cli(env, "up", *FREE_PORTS, "--console-port", port)
        assert done.returncode == 1
        last = done.stderr.splitlines()[-1]
        assert last.startswith(f"stello: the console cannot listen on 127.0.0.1:{port} ")
        assert "--console-port" in last and "Traceback" not in done.stderr
        assert postgres_processes(Path(env["STELLO_DATA_DIR"])) == []


class TestDeployment:
    def test_the_gateway_address_is_required(self, home: Path) -> None:
        """Without --gateway or STELLO_GATEWAY: one line on stderr naming both, exit 1."""
        done = subprocess.run(
            [sys.executable, "-m", "stello_console"],
            env=private_env(home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1
        assert "--gateway" in done.stderr and "STELLO_GATEWAY" in done.stderr

    def test_a_flag_it_does_not_have_is_refused_not_read_as_a_longer_one(self, home: Path) -> None:
        """`--key KEY` (the CLI's flag; the console takes a key per tab, and TLS files) is
        an unknown flag, exit 2: argparse read it as `--key-file`, and the console went on to
        read a file named as the key."""
        done = subprocess.run(
            [sys.executable, "-m", "stello_console", "--key", "sk-a-key", "--gateway", "x:1"],
            env=private_env(home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "unrecognized arguments: --key sk-a-key" in done.stderr

    @pytest.mark.parametrize("given", ["99999", "-1", "http"])
    def test_a_port_out_of_range_is_the_flags_error(
        self, given: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--port 99999` was an OverflowError's traceback from the socket's bind; now the
        flag's error, as `stello up --console-port` says it, exit 2."""
        with pytest.raises(SystemExit) as ended:
            build_parser().parse_args(["--gateway", "x:1", "--port", given])
        assert ended.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            "python -m stello_console: error: argument --port: expected a port from 0 to "
            f"65535, got '{given}'"
        )

    async def test_it_serves_the_page_for_a_key(
        self, key_console: ConsoleStack, home: Path
    ) -> None:
        """`python -m stello_console --gateway ADDR --port 0` prints its URL (no token) and
        answers API calls made with a key."""
        gateway = key_console.stack.gateway.address
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stello_console", "--gateway", gateway, "--port", "0",
            env=private_env(home), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
            assert line.startswith("console: http://127.0.0.1:") and "token" not in line
            port = int(line.rsplit(":", 1)[1].rstrip("/"))
            space = key_console.stack.space
            root = await key_console.stack.root(label="Deployed")
            reply = await fetch(
                port,
                "/api/tree",
                headers={"Authorization": f"Bearer {space.key}", "X-Stello-Space": space.sid},
            )
            assert [node["id"] for node in reply.json()["nodes"]] == [root.id]
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)
        assert process.returncode == 0
