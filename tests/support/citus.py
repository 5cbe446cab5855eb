"""A real Citus cluster for the tests: a coordinator and two workers on loopback (DESIGN §4.7).

`citus_skip_reason()` runs `scripts/citus`, which builds and installs the
extension for PostgreSQL 15 when it is missing (cached per machine); where no
source is found it says why in one line, and the tests skip with that line.
`citus_cluster()` then starts the nodes with PostgreSQL 15's own binaries
(`/usr/lib/postgresql/15/bin`, or STELLO_TEST_CITUS_PG_BIN) in a temporary
folder, each on a free port with trust authentication, fsync off, and
`citus` (and `pg_stat_statements`) preloaded; it stops them and deletes the
folder at the end. Node metadata is per database: `CitusCluster.create_database`
makes a database on every node with the extension, and registers the workers
in the coordinator's copy.

initdb and postgres refuse to run as root: as root the nodes run as
STELLO_TEST_CITUS_USER (default `nobody`), started through `runuser` so this
process never forks into another user (gRPC's fork handlers, see
tests/support/database.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from tests.support.ports import free_port
from tests.support.reaper import reap_with_this_process

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "citus"
PG_BIN = Path(os.environ.get("STELLO_TEST_CITUS_PG_BIN", "/usr/lib/postgresql/15/bin"))
SKIPPED = 3  # scripts/citus: no Citus and no source to build it from
SUPERUSER = "postgres"
START_TIMEOUT_S = 60
START_ATTEMPTS = 3  # a picked free port may be taken before the node binds it

# Every node's settings: fast and throwaway (no durability), room for the
# connections Citus opens between nodes and for a maintenance daemon per database.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "'64MB'",
    "max_connections": "300",
    "max_worker_processes": "64",
    "max_prepared_transactions": "100",
    # Shard moves and tenant isolation copy shards with logical replication.
    "wal_level": "logical",
    "max_replication_slots": "16",
    "max_wal_senders": "16",
    "log_min_messages": "warning",
    "log_min_error_statement": "error",
    "log_line_prefix": "'%m [%p] %d '",
    "pg_stat_statements.max": "20000",
    "pg_stat_statements.track": "all",
    "citus.shard_replication_factor": "1",
    "citus.max_cached_conns_per_worker": "2",
}


def citus_skip_reason() -> str | None:
    """Make Citus available (scripts/citus); None when it is, else why the Citus pass skips.

    A failed build (not a missing source) raises: it must not pass as a skip.
    """
    done = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode == 0:
        return None
    if done.returncode == SKIPPED:
        lines = done.stderr.strip().splitlines()
        return lines[-1] if lines else "scripts/citus: Citus pass skipped"
    raise RuntimeError(f"scripts/citus failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def _run_as() -> str | None:
    """The user the nodes run as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    return os.environ.get("STELLO_TEST_CITUS_USER", "nobody")


@dataclass(frozen=True, slots=True)
class CitusNode:
    """One PostgreSQL of the cluster: its name, port and folder (data and log)."""

    name: str
    port: int
    folder: Path

    @property
    def data(self) -> Path:
        """The node's data directory."""
        return self.folder / "data"

    @property
    def log_file(self) -> Path:
        """The server log (pg_ctl -l)."""
        return self.folder / "postgres.log"

    def dsn(self, database: str = "postgres") -> str:
        """The superuser DSN of `database` on this node, without TLS (the nodes offer none):
        asyncpg asks for TLS first by default, and a connect abandoned in that exchange
        left a failed future no one read ("unexpected connection_lost() call"), which
        failed the test that was running (test_fork_lineage's teardown in a CI run's Citus
        pass; the PgBouncer's DSNs say the same for the same reason)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    def log(self) -> str:
        """The node's log so far."""
        path = self.log_file
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass(frozen=True, slots=True)
class CitusCluster:
    """A running coordinator and its workers."""

    coordinator: CitusNode
    workers: tuple[CitusNode, ...]

    @property
    def nodes(self) -> tuple[CitusNode, ...]:
        """The coordinator, then the workers."""
        return (self.coordinator, *self.workers)

    def dsn(self, database: str = "postgres") -> str:
        """The coordinator's DSN of `database` (where the services connect)."""
        return self.coordinator.dsn(database)

    def logs(self) -> str:
        """Every node's log, each under its name (for failure messages)."""
        return "\n".join(f"===== {n.name} (port {n.port})\n{n.log()}" for n in self.nodes)

    async def create_database(
        self, name: str | None = None, *, register_workers: bool = True
    ) -> str:
        """Create database `name` (default: a fresh one) on every node with `citus` in it.

        The coordinator's copy records itself and, with `register_workers`, each
        worker (`citus_add_node`); without, it has no worker (a refusal test).
        Returns the coordinator's DSN of it.
        """
        name = name or f"stello_citus_{uuid.uuid4().hex[:12]}"
        for node in self.nodes:
            admin = await asyncpg.connect(node.dsn())
            try:
                await admin.execute(f'CREATE DATABASE "{name}"')
            finally:
                await admin.close()
            con = await asyncpg.connect(node.dsn(name))
            try:
                await con.execute("CREATE EXTENSION citus")
            finally:
                await con.close()
        con = await asyncpg.connect(self.dsn(name))
        try:
            await con.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', $1)", self.coordinator.port
            )
            if register_workers:
                for worker in self.workers:
                    await con.execute("SELECT citus_add_node('127.0.0.1', $1)", worker.port)
        finally:
            await con.close()
        return self.dsn(name)

    async def drop_database(self, name: str) -> None:
        """Drop database `name` on every node (connections to it are closed)."""
        for node in reversed(self.nodes):
            admin = await asyncpg.connect(node.dsn())
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()


def argv_as(run_as: str | None, argv: list[str]) -> list[str]:
    """`argv` run as user `run_as` through runuser (no fork into another user here)."""
    return argv if run_as is None else ["runuser", "-u", run_as, "--", *argv]


def _run(run_as: str | None, argv: list[str], cwd: Path) -> None:
    done = subprocess.run(
        argv_as(run_as, argv), cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def _preload() -> str:
    """citus first (it must be), pg_stat_statements when PostgreSQL 15 has it."""
    lib = subprocess.run(
        [str(PG_BIN / "pg_config"), "--pkglibdir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return "citus,pg_stat_statements" if Path(lib, "pg_stat_statements.so").exists() else "citus"


def _init_template(folder: Path, run_as: str | None) -> Path:
    """One initdb; the nodes start from copies of it (a copy is faster than an initdb)."""
    template = folder / "template"
    _run(
        run_as,
        [
            str(PG_BIN / "initdb"),
            "-D",
            str(template),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "--no-instructions",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        folder,
    )
    settings = {**SETTINGS, "shared_preload_libraries": f"'{_preload()}'"}
    with (template / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("\n# tests/support/citus.py\n")
        conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
    return template


def _start(node: CitusNode, run_as: str | None) -> None:
    """Start `node` from its data directory; wait until it accepts connections."""
    _run(
        run_as,
        [
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(node.data),
            "-l",
            str(node.log_file),
            "-o",
            f"-p {node.port} -k {node.folder}",
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        ],
        node.folder,
    )


def _stop(node: CitusNode, run_as: str | None) -> None:
    """Stop `node` now (fast shutdown; immediate if that hangs)."""
    if not (node.data / "postmaster.pid").exists():
        return
    for mode in ("fast", "immediate"):
        done = subprocess.run(
            argv_as(
                run_as,
                [
                    str(PG_BIN / "pg_ctl"),
                    "-D",
                    str(node.data),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    "20",
                    "stop",
                ],
            ),
            cwd=node.folder,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0:
            return


def _start_node(name: str, folder: Path, template: Path, run_as: str | None) -> CitusNode:
    """A copy of the template started on a free port (another port if that one was taken)."""
    error: RuntimeError | None = None
    for _ in range(START_ATTEMPTS):
        node = CitusNode(name, free_port(), folder / name)
        try:
            # As the nodes' user, so the copy is theirs (PostgreSQL checks its owner).
            _run(run_as, ["mkdir", str(node.folder)], folder)
            _run(run_as, ["cp", "-a", str(template), str(node.data)], folder)
            _start(node, run_as)
            return node
        except RuntimeError as exc:
            error = RuntimeError(f"{exc}\n{node.name} log:\n{node.log()}")
            if "could not bind" not in node.log() and "in use" not in node.log():
                break
            shutil.rmtree(node.folder, ignore_errors=True)
    assert error is not None
    raise error


def stop_node(node: CitusNode) -> None:
    """Stop one node of a running cluster (an outage); `start_node` brings it back."""
    _stop(node, _run_as())


def start_node(node: CitusNode) -> None:
    """Start a node `stop_node` stopped, on its port, with its data."""
    _start(node, _run_as())


@contextmanager
def citus_cluster(workers: int = 2) -> Iterator[CitusCluster]:
    """A coordinator and `workers` workers, started; all stopped and deleted at the end.

    Call `citus_skip_reason()` first: the nodes need the extension installed.
    """
    run_as = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="stello-citus-"))
    reap_with_this_process(folder)
    if run_as is not None:
        shutil.chown(folder, run_as)
    started: list[CitusNode] = []
    try:
        template = _init_template(folder, run_as)
        for name in ("coordinator", *(f"worker{n}" for n in range(1, workers + 1))):
            started.append(_start_node(name, folder, template, run_as))
        shutil.rmtree(template, ignore_errors=True)
        yield CitusCluster(started[0], tuple(started[1:]))
    finally:
        for node in reversed(started):
            _stop(node, run_as)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class LoggedError:
    """An ERROR a node logged, with the statement it logged with it (log_min_error_statement)."""

    database: str
    message: str
    statement: str


_LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \w+ \[(?P<pid>\d+)\] (?P<db>\S*) ?"
    r"(?P<level>[A-Z]+):  (?P<text>.*)$"
)


def logged_errors(log: str) -> list[LoggedError]:
    """The ERRORs of a node's log (SETTINGS' log_line_prefix), each with its statement."""
    entries: list[list[str]] = []
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            entries.append([match["pid"], match["db"], match["level"], match["text"]])
        elif entries:
            entries[-1][3] += "\n" + line.removeprefix("\t")
    errors: list[LoggedError] = []
    open_errors: dict[str, int] = {}
    for pid, db, level, text in entries:
        if level == "ERROR":
            open_errors[pid] = len(errors)
            errors.append(LoggedError(db, text.partition("\n")[0], ""))
        elif level == "STATEMENT" and pid in open_errors:
            index = open_errors.pop(pid)
            errors[index] = LoggedError(errors[index].database, errors[index].message, text)
    return errors
