"""A real PgBouncer in transaction mode in front of the test PostgreSQL (DESIGN §3).

`STELLO_TEST_PGBOUNCER=1` makes the fixtures route every pool and every
service process through one (CI runs the SQL tests a third time so); tests of
PgBouncer itself start their own. The binary is `STELLO_TEST_PGBOUNCER_BIN`, else
the 1.21+ that `scripts/system_packages` builds (`BUILT`), else Debian's on PATH.

PgBouncer 1.21+ keeps protocol-level prepared statements per client
(`max_prepared_statements`), so asyncpg's statement cache stays on; older ones
(Debian 12 ships 1.18) cannot, and the pools run with a cache of 0. The run's own
bouncer must be 1.21+ (`CANCEL_SAFE_SINCE`): 1.18 exits with a FATAL on races of
cancel requests (a client that drops while its cancel is in flight:
"disconnect_client(): bad client state: 0"; a server that answers while being
canceled: "server_proto: server in bad state: 11"), which the pass's cancelled
streams and stopped servers run into: one stopped a CI pass part-way.

A bouncer that exits on its own is evidence, not noise: each `Bouncer` keeps its
process, notes when it exited (and which test pytest was running then), and
`report()` names the exit code or signal with the tail of its log and stderr;
the hooks in tests/support/fixtures.py put that text under a failing test and in
the run's summary.
Its folder (config, log, stderr) lives until the bouncer is stopped, and stays
on disk when the bouncer had died first.
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
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.ports import free_port
from tests.support.proxy import target_of
from tests.support.reaper import reap_with_this_process

PREPARED_STATEMENTS_SINCE = (1, 21)
CANCEL_SAFE_SINCE = (1, 21)
"""The oldest PgBouncer the run's own bouncer may be (see the module's docstring)."""
BUILT = Path(os.environ.get("STELLO_PGBOUNCER_PREFIX", "/opt/stello-pgbouncer")) / "bin/pgbouncer"
"""Where scripts/system_packages builds a PgBouncer 1.21+ (bench/build_pgbouncer.sh)."""
MAX_PREPARED_STATEMENTS = 1000
START_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40
"""How much of a bouncer's log a report shows."""


def bouncer_requested() -> bool:
    """Whether this test run goes through PgBouncer (STELLO_TEST_PGBOUNCER=1)."""
    return os.environ.get("STELLO_TEST_PGBOUNCER", "") not in ("", "0")


def binary() -> str:
    """The pgbouncer executable: STELLO_TEST_PGBOUNCER_BIN, else `BUILT`, else the one on
    PATH (Debian's)."""
    configured = os.environ.get("STELLO_TEST_PGBOUNCER_BIN")
    built = str(BUILT) if os.access(BUILT, os.X_OK) else None
    found = configured or built or shutil.which("pgbouncer") or shutil.which("/usr/sbin/pgbouncer")
    if not found:
        raise RuntimeError("pgbouncer is not installed: run scripts/system_packages")
    return found


def check_cancel_safe(executable: str) -> None:
    """Refuse a PgBouncer older than `CANCEL_SAFE_SINCE` for the run's own bouncer."""
    found = version(executable)
    if found < CANCEL_SAFE_SINCE:
        raise RuntimeError(
            f"{executable} is PgBouncer {found[0]}.{found[1]}, which exits on cancel-request "
            "races (tests/support/bouncer.py); the PgBouncer pass needs "
            f"{CANCEL_SAFE_SINCE[0]}.{CANCEL_SAFE_SINCE[1]}+: run scripts/system_packages "
            f"(it builds one into {BUILT.parent.parent}) or set STELLO_TEST_PGBOUNCER_BIN"
        )


def version(executable: str) -> tuple[int, int]:
    """(major, minor) of `pgbouncer --version`."""
    text = subprocess.run(
        [executable, "--version"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"PgBouncer (\d+)\.(\d+)", text)
    if match is None:
        raise RuntimeError(f"cannot read the version of {executable}: {text!r}")
    return int(match[1]), int(match[2])


@dataclass(slots=True)
class Bouncer:
    """A PgBouncer started by `pgbouncer()`: where it listens, what it supports, its
    process, and how that process ended when it did."""

    port: int
    version: tuple[int, int]
    user: str
    folder: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ended_at: float | None = None
    """time.time() when the process exited (set by its watcher thread)."""
    ended_during: str | None = None
    """The test pytest was running when it exited (PYTEST_CURRENT_TEST), if any."""
    stopping: bool = False
    """Set as `pgbouncer()` stops it (still running then): the exit after is the planned one."""
    keeps_statements: bool = True
    """False: ``max_prepared_statements = 0`` even on 1.21+ (an operator's bouncer that loses
    asyncpg's statements, as 1.18 does)."""
    _watcher: threading.Thread | None = field(default=None, repr=False)

    @property
    def prepared_statements(self) -> bool:
        """Whether clients may keep named prepared statements (asyncpg's cache)."""
        return self.keeps_statements and self.version >= PREPARED_STATEMENTS_SINCE

    @property
    def statement_cache_size(self) -> int | None:
        """The asyncpg cache size pools need here: 0, or None to keep the configured one."""
        return None if self.prepared_statements else 0

    @property
    def address(self) -> str:
        """host:port it listens on (as a failed connect names it)."""
        return f"127.0.0.1:{self.port}"

    def dsn(self, database: str) -> str:
        """The DSN of `database` through this PgBouncer, without TLS (it offers none): by
        default asyncpg asks for TLS first, and a connect abandoned in that exchange left
        asyncpg a failed future no one read ("unexpected connection_lost() call"), which
        failed the test that was running (a PgBouncer pass in CI)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    @property
    def log_path(self) -> Path:
        """Its log file (`logfile` in its config)."""
        return self.folder / "pgbouncer.log"

    @property
    def output_path(self) -> Path:
        """Where its stdout and stderr go (a crash's last words, e.g. glibc's abort)."""
        return self.folder / "pgbouncer.out"

    def log(self) -> str:
        """PgBouncer's log so far (for failure messages)."""
        return _read(self.log_path)

    def watch(self, process: subprocess.Popen[bytes]) -> None:
        """Keep `process` and reap it on a thread that notes when it exits."""
        self.process = process
        self._watcher = threading.Thread(
            target=self._wait, name=f"pgbouncer-{process.pid}", daemon=True
        )
        self._watcher.start()

    def _wait(self) -> None:
        assert self.process is not None
        self.process.wait()
        self.ended_at = time.time()
        self.ended_during = os.environ.get("PYTEST_CURRENT_TEST")

    @property
    def returncode(self) -> int | None:
        """The process's exit status once it exited (negative: the signal), else None."""
        return None if self.process is None else self.process.poll()

    @property
    def died(self) -> bool:
        """Whether it exited before `pgbouncer()` began to stop it (however it exits then:
        1.18 answers SIGTERM with code 1)."""
        return self.returncode is not None and not self.stopping

    def exit_status(self) -> str:
        """How the process stands: running, or the exit code or signal that ended it."""
        code = self.returncode
        if code is None:
            return "is running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "an unknown signal"
            how = f"was killed by signal {-code} ({name})"
        else:
            how = f"exited with code {code}"
        if self.ended_at is not None:
            how += " at " + time.strftime("%H:%M:%S", time.localtime(self.ended_at))
        if self.ended_during:
            how += f" during {self.ended_during}"
        return how

    def report(self, lines: int = LOG_TAIL_LINES) -> str:
        """What a failure message needs: the process's status and the tail of its log (and
        of its stderr, for what the log does not hold)."""
        pid = "never started" if self.process is None else f"pid {self.process.pid}"
        major, minor = self.version
        head = f"PgBouncer {major}.{minor} ({pid}, {self.address}) {self.exit_status()}"
        log = self.log().splitlines()
        parts = [head, f"last {min(lines, len(log))} lines of {self.log_path}:"]
        parts += log[-lines:] or ["(empty)"]
        logged = set(log)
        extra = [line for line in _read(self.output_path).splitlines() if line not in logged]
        if extra:
            parts += [f"its stderr ({self.output_path}), lines not in the log:", *extra[-lines:]]
        return "\n".join(parts)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


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
    folder: Path, upstream: str, user: str, port: int, prepared: str, pool_size: int
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
            prepared=prepared,
        )
    )
    return path


def _prepared_line(bouncer: Bouncer) -> str:
    """The config's max_prepared_statements line (none for a PgBouncer that lacks it)."""
    if bouncer.version < PREPARED_STATEMENTS_SINCE:
        return ""
    kept = MAX_PREPARED_STATEMENTS if bouncer.keeps_statements else 0
    return f"max_prepared_statements = {kept}"


def _wait_listening(bouncer: Bouncer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if bouncer.returncode is not None:
            raise RuntimeError(f"pgbouncer did not start:\n{bouncer.report()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", bouncer.port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"pgbouncer did not listen in {START_TIMEOUT_S}s:\n{bouncer.report()}")


STARTED: list[Bouncer] = []
"""The bouncers `pgbouncer()` started in this process that run, or that died (failure
reports look them up); one it stopped leaves the list."""


@contextmanager
def pgbouncer(
    upstream_dsn: str,
    *,
    pool_size: int = 40,
    executable: str | None = None,
    keep_statements: bool = True,
) -> Iterator[Bouncer]:
    """Run a PgBouncer in transaction mode in front of the server of `upstream_dsn`.

    `pool_size` server connections serve each database (any number of clients);
    `executable` defaults to `binary()`; `keep_statements` False turns off the 1.21+
    keeping of prepared statements (``max_prepared_statements = 0``). Its folder is removed
    when the block ends, unless the bouncer had died before: then it stays for whoever reads
    the report, until the test run ends (tests/support/reaper.py).
    """
    executable = executable or binary()
    found = version(executable)
    user = urlsplit(upstream_dsn).username or "postgres"
    host, _ = _upstream(upstream_dsn)
    run_as = _run_as(host)
    folder = Path(tempfile.mkdtemp(prefix="stello-pgbouncer-"))
    bouncer = Bouncer(free_port(), found, user, folder, keeps_statements=keep_statements)
    config = _write_config(
        folder, upstream_dsn, user, bouncer.port, _prepared_line(bouncer), pool_size
    )
    command = [executable, str(config)]
    if run_as is not None:
        command[1:1] = ["-u", run_as]
        for path in (folder, *folder.iterdir()):
            shutil.chown(path, run_as)
    with bouncer.output_path.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    reap_with_this_process(folder, process.pid)
    bouncer.watch(process)
    STARTED.append(bouncer)
    try:
        _wait_listening(bouncer)
        yield bouncer
    finally:
        _stop(bouncer, process)
        if not bouncer.died:
            STARTED.remove(bouncer)
            shutil.rmtree(folder, ignore_errors=True)


def _stop(bouncer: Bouncer, process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (immediate shutdown: the clients are gone), SIGKILL after 10 s."""
    if process.poll() is not None:
        return
    bouncer.stopping = True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class FailureNotes:
    """What failed tests' reports say about the bouncers: a test that failed naming a
    bouncer's address, or after the run's own bouncer died, gets that bouncer's report (its
    status and the tail of its log); after `FULL_REPORTS` of them, or after the first one
    about a death, one line that points back to it (1,000 tests failing on a dead bouncer
    need its log once, not 1,000 times)."""

    FULL_REPORTS = 3

    def __init__(self) -> None:
        self._alive_shown: dict[int, list[str]] = {}
        self._death_shown: dict[int, str] = {}

    def section(
        self, nodeid: str, failure: str, session: Bouncer | None, started: list[Bouncer]
    ) -> str | None:
        """The text to add under the failed test `nodeid` (its failure text `failure`), or
        None when no bouncer is involved. `session` is the run's own bouncer, if any."""
        notes = []
        for bouncer in _unique([session, *started]):
            named = f"'127.0.0.1', {bouncer.port})" in failure or bouncer.address in failure
            if named or (bouncer is session and bouncer.died):
                notes.append(self._note(bouncer, nodeid, in_summary=bouncer is session))
        return "\n\n".join(notes) or None

    def _note(self, bouncer: Bouncer, nodeid: str, *, in_summary: bool) -> str:
        key = id(bouncer)
        if bouncer.died:
            first = self._death_shown.setdefault(key, nodeid)
            if first == nodeid:
                return bouncer.report()
            where = f"under {first}" + (" and in the run's summary" if in_summary else "")
            return _line(bouncer, f"its log is {where}")
        shown = self._alive_shown.setdefault(key, [])
        if len(shown) >= self.FULL_REPORTS:
            return _line(bouncer, f"its log is under {shown[0]}")
        shown.append(nodeid)
        return bouncer.report()


def _line(bouncer: Bouncer, where: str) -> str:
    major, minor = bouncer.version
    return f"PgBouncer {major}.{minor} ({bouncer.address}) {bouncer.exit_status()}; {where}"


def _unique(bouncers: list[Bouncer | None]) -> list[Bouncer]:
    seen: list[Bouncer] = []
    for bouncer in bouncers:
        if bouncer is not None and all(bouncer is not other for other in seen):
            seen.append(bouncer)
    return seen
