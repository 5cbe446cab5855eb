"""A real PgBouncer in transaction mode in front of the test PostgreSQL (DESIGN §3).

`STELLO_TEST_PGBOUNCER=1` makes the fixtures route every pool and every
service process through one (CI runs the SQL tests a third time so); tests of
PgBouncer itself start their own. Debian's package installs the binary
(`scripts/system_packages`); `STELLO_TEST_PGBOUNCER_BIN` may name another.

PgBouncer 1.21+ keeps protocol-level prepared statements per client
(`max_prepared_statements`), so asyncpg's statement cache stays on; older ones
(Debian 12 ships 1.18) cannot, and the pools run with a cache of 0.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.proxy import target_of

PREPARED_STATEMENTS_SINCE = (1, 21)
MAX_PREPARED_STATEMENTS = 1000
START_TIMEOUT_S = 10.0


def bouncer_requested() -> bool:
    """Whether this test run goes through PgBouncer (STELLO_TEST_PGBOUNCER=1)."""
    return os.environ.get("STELLO_TEST_PGBOUNCER", "") not in ("", "0")


def binary() -> str:
    """The pgbouncer executable: STELLO_TEST_PGBOUNCER_BIN, else the one on PATH."""
    configured = os.environ.get("STELLO_TEST_PGBOUNCER_BIN")
    found = configured or shutil.which("pgbouncer") or shutil.which("/usr/sbin/pgbouncer")
    if not found:
        raise RuntimeError(
            "pgbouncer is not installed: run scripts/system_packages (apt-get install pgbouncer)"
        )
    return found


def version(executable: str) -> tuple[int, int]:
    """(major, minor) of `pgbouncer --version`."""
    text = subprocess.run(
        [executable, "--version"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"PgBouncer (\d+)\.(\d+)", text)
    if match is None:
        raise RuntimeError(f"cannot read the version of {executable}: {text!r}")
    return int(match[1]), int(match[2])


@dataclass(frozen=True, slots=True)
class Bouncer:
    """A running PgBouncer: where it listens and what it supports."""

    port: int
    version: tuple[int, int]
    user: str
    folder: Path

    @property
    def prepared_statements(self) -> bool:
        """Whether clients may keep named prepared statements (asyncpg's cache)."""
        return self.version >= PREPARED_STATEMENTS_SINCE

    @property
    def statement_cache_size(self) -> int | None:
        """The asyncpg cache size pools need here: 0, or None to keep the configured one."""
        return None if self.prepared_statements else 0

    def dsn(self, database: str) -> str:
        """The DSN of `database` through this PgBouncer."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """PgBouncer's log so far (for failure messages)."""
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


def database_of(dsn: str) -> str:
    """The database name in a DSN (socket and TCP forms alike)."""
    return urlsplit(dsn).path.lstrip("/") or "postgres"


def _upstream(dsn: str) -> tuple[str, int]:
    """host (a socket directory or an address) and port of the server behind `dsn`."""
    target = target_of(dsn)
    if isinstance(target, str):  # a Unix socket file: <dir>/.s.PGSQL.<port>
        folder, _, name = target.rpartition("/")
        return folder, int(name.rpartition(".")[2])
    return target


def _run_as(host: str) -> str | None:
    """pgbouncer refuses to run as root: the user that may reach the upstream socket."""
    if os.geteuid() != 0:
        return None
    if host.startswith("/"):
        return pwd.getpwuid(os.stat(host).st_uid).pw_name
    return "nobody"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


CONFIG = """\
[databases]
* = host={host} port={upstream_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
admin_users = {user}
pool_mode = transaction
max_client_conn = 2000
default_pool_size = {pool_size}
ignore_startup_parameters = extra_float_digits
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
{prepared}
"""


def _write_config(
    folder: Path, upstream: str, user: str, port: int, prepared: bool, pool_size: int
) -> Path:
    host, upstream_port = _upstream(upstream)
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    path = folder / "pgbouncer.ini"
    path.write_text(
        CONFIG.format(
            host=host,
            upstream_port=upstream_port,
            port=port,
            folder=folder,
            user=user,
            pool_size=pool_size,
            prepared=f"max_prepared_statements = {MAX_PREPARED_STATEMENTS}" if prepared else "",
        )
    )
    return path


def _wait_listening(process: subprocess.Popen[bytes], port: int, bouncer: Bouncer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited with {process.returncode}:\n{bouncer.log()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"pgbouncer did not listen on {port} in {START_TIMEOUT_S}s")


@contextmanager
def pgbouncer(
    upstream_dsn: str, *, pool_size: int = 40, executable: str | None = None
) -> Iterator[Bouncer]:
    """Run a PgBouncer in transaction mode in front of the server of `upstream_dsn`.

    `pool_size` server connections serve each database (any number of clients);
    `executable` defaults to `binary()`.
    """
    executable = executable or binary()
    found = version(executable)
    user = urlsplit(upstream_dsn).username or "postgres"
    host, _ = _upstream(upstream_dsn)
    run_as = _run_as(host)
    folder = Path(tempfile.mkdtemp(prefix="stello-pgbouncer-"))
    port = _free_port()
    bouncer = Bouncer(port, found, user, folder)
    config = _write_config(folder, upstream_dsn, user, port, bouncer.prepared_statements, pool_size)
    command = [executable, str(config)]
    if run_as is not None:
        command[1:1] = ["-u", run_as]
        for path in (folder, *folder.iterdir()):
            shutil.chown(path, run_as)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait_listening(process, port, bouncer)
        yield bouncer
    finally:
        process.send_signal(signal.SIGTERM)  # immediate shutdown: the clients are gone
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
