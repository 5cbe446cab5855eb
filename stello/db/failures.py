"""What the database's failures mean, beside `stello.db.pool`: which errors say it is out of reach
or refusing work for a while (UNAVAILABLE, the caller retries), which say it lacks
migrations or lost prepared statements, and what a client is told of each.
"""

from __future__ import annotations

import asyncpg

from stello.errors import Unavailable

# Connection-level failures: the database is unreachable, not the request wrong.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    TimeoutError,
)

# Citus's ERRORs (SQLSTATE XX000, "internal") that say a node or a shard was out of reach
# for the moment, not that the statement is wrong: its cached connection to a worker that
# restarted, a shard a tenant isolation or a split is moving, a worker that does not answer
# a new connection within citus.node_connection_timeout. They surface as UNAVAILABLE
# (the caller retries; a write with its request_id is answered once), never as INTERNAL.
CITUS_TRANSIENT = (
    "failure on connection marked as essential",
    "could not find valid entry for shard",
    "shard for the given value does not exist",
    "connection to the remote node",
    "could not establish any connections to the node",
)


def transient(exc: BaseException) -> bool:
    """Whether `exc` is one of Citus's passing internal ERRORs (CITUS_TRANSIENT)."""
    if not isinstance(exc, asyncpg.InternalServerError):
        return False
    message = str(exc)
    return any(words in message for words in CITUS_TRANSIENT)


RETRY = "; retry the call"
UNAVAILABLE_MESSAGE = "the database is unavailable" + RETRY

# SQLSTATEs by which a reachable database refuses work for a while, whatever the statement:
# read-only (25006: default_transaction_read_only, a standby after a failover), disk full
# (53100), out of memory (53200). Like a lost connection they are UNAVAILABLE, their
# message naming the condition (an operator's to fix, the caller's to retry), and one
# WARNING line in the log, never INTERNAL with a traceback. Shutdown and crash recovery
# (57P01-57P03) and too many connections (53300) are among CONNECTION_ERRORS.
REFUSALS: dict[type[BaseException], str] = {
    asyncpg.ReadOnlySQLTransactionError: "the database refuses writes (read-only)",
    asyncpg.DiskFullError: "the database is out of disk space",
    asyncpg.OutOfMemoryError: "the database is out of memory",
}
REFUSED: tuple[type[BaseException], ...] = tuple(REFUSALS)

# What a statement meets on a database that lacks migrations (42P01 undefined_table,
# 42883 undefined_function, 42703 undefined_column, 42704 undefined_object): then the
# caller is told to run `stello migrate` (`unmigrated`); else it is a bug (INTERNAL).
UNDEFINED: tuple[type[BaseException], ...] = (
    asyncpg.UndefinedTableError,
    asyncpg.UndefinedFunctionError,
    asyncpg.UndefinedColumnError,
    asyncpg.UndefinedObjectError,
)

# What a connection pooler that does not keep a client's prepared statements answers
# asyncpg's statement cache (PgBouncer in transaction mode older than 1.21, or with
# max_prepared_statements = 0): a statement prepared on one server connection is bound on
# another (26000, "prepared statement \"__asyncpg_stmt_1__\" does not exist"), or two clients'
# names meet on one (42P05, "... already exists"). The fix is the operator's: one setting.
STATEMENTS_LOST: tuple[type[BaseException], ...] = (
    asyncpg.InvalidSQLStatementNameError,
    asyncpg.DuplicatePreparedStatementError,
)
STATEMENTS_LOST_MESSAGE = (
    "the database's connection pooler loses prepared statements (PgBouncer in transaction "
    "mode, older than 1.21 or without max_prepared_statements): set "
    "STELLO_DB_STATEMENT_CACHE_SIZE=0, or max_prepared_statements in pgbouncer.ini "
    "(README: PgBouncer)"
)


def statements_lost(exc: BaseException) -> bool:
    """Whether `exc` says a pooler lost asyncpg's prepared statements (`STATEMENTS_LOST`,
    about a statement of asyncpg's naming: Stello prepares no statement of its own)."""
    return isinstance(exc, STATEMENTS_LOST) and "__asyncpg_" in str(exc)


def refusal(exc: BaseException) -> str | None:
    """The condition by which the database refused `exc`'s statement (`REFUSALS`), if so."""
    for kind, condition in REFUSALS.items():
        if isinstance(exc, kind):
            return condition
    return None


def unavailable(exc: BaseException) -> Unavailable:
    """The client-facing error of a lost or refusing database (the driver's text stays in
    the log): the condition named where the database named it (`REFUSALS`)."""
    condition = refusal(exc)
    return Unavailable(condition + RETRY if condition else UNAVAILABLE_MESSAGE)


def lacking(missing: list[str]) -> str:
    """What a client is told while the database lacks the migrations `missing`."""
    return f"the database lacks {len(missing)} of Stello's migrations: run `stello migrate`"
