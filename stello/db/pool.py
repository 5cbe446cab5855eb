"""The asyncpg pool factory and the retrying transaction helpers.

A unit of work (`in_transaction`, `in_statement`, `fetch`) is retried on a
serialization failure or deadlock, and on a connection whose protocol is out
of step with the server. The last happens after a PostgreSQL restart: the
server's FATAL "terminating connection" reaches an idle pooled connection
before its socket closes, asyncpg's protocol is left consuming an error with no
caller, and the pool hands the connection out; the next statement fails in the
driver (``InternalClientError: cannot switch to state 15; another operation (2)
is in progress``) before anything is sent. Such a connection is terminated and
the work retried on another one. What cannot be retried surfaces as
`Unavailable` (UNAVAILABLE, retryable by the client), Citus's passing internal
errors included (a worker restarted, a shard being moved:
`stello.db.failures.CITUS_TRANSIENT`), and
so does a database that refuses work for a while (read-only, disk full, out of memory:
`stello.db.failures.REFUSALS`) or lacks migrations (`unmigrated`), each message naming the
condition (a connection a write was refused on as read-only is terminated, never back to the pool: a
database's ``default_transaction_read_only`` reaches new sessions only, so one opened
during a read-only spell would refuse every write after it ended);
a conflict that outlives `MAX_ATTEMPTS` as `Aborted` (ABORTED, CONCURRENT_MODIFICATION: nothing was
applied, retry the call), never as an internal error.

A pooler that loses asyncpg's prepared statements (PgBouncer in transaction mode, older than
1.21 or with ``max_prepared_statements = 0``, while STELLO_DB_STATEMENT_CACHE_SIZE is not 0)
is found as the pool opens (`check_statements`: `StatementsLost`, one line at start naming
that setting), and a call that meets one anyway is `Unavailable` naming it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import asyncpg

from stello.db.failures import (
    CONNECTION_ERRORS,
    REFUSED,
    STATEMENTS_LOST,
    STATEMENTS_LOST_MESSAGE,
    UNDEFINED,
    lacking,
    refusal,
    statements_lost,
    transient,
    unavailable,
)
from stello.db.tasks import cancel_and_wait
from stello.errors import Aborted, Unavailable
from stello.reasons import CONCURRENT_MODIFICATION
from stello.settings import StelloSettings
from stello.telemetry.log_every import WarnEvery

T = TypeVar("T")
log = logging.getLogger(__name__)

OUTAGE_LOG_EVERY_S = 10.0
"""How often a process says the database is out of reach or refuses work, per condition
(each failed statement counted between: an outage fails every call the same way)."""
outages = WarnEvery(log, OUTAGE_LOG_EVERY_S)

RETRYABLE = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)
MAX_ATTEMPTS = 5


# The services' connections are named so (unless their URL names them otherwise): on
# Citus, the database default citus.show_shards_for_app_name_prefixes names it, so
# their catalogue reads (asyncpg's type introspection) skip the shard filter Citus
# adds to every query of pg_class (stello.distribution.plan, docs/scaling.md).
APPLICATION_NAME = "stello"


CONFLICT_MESSAGE = (
    "the call kept meeting concurrent changes to the same rows; nothing was applied: retry the call"
)


class DatabaseUnreachable(ConnectionError):
    """No connection to the database could be opened: where it was sought (never the
    password) and why, in one line a person can act on."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"cannot connect to the database at {address}: {reason}")
        self.address = address
        self.reason = reason

    def naming(self, variable: str) -> str:
        """The line naming the setting the URL came from (`STELLO_DATABASE_URL`)."""
        return f"cannot connect to the database at {self.address} ({variable}): {self.reason}"


def database_address(dsn: str) -> str:
    """host:port/database of a PostgreSQL URL, without its user or password."""
    parts = urlsplit(dsn)
    host = parts.hostname or parse_qs(parts.query).get("host", ["localhost"])[0]
    return f"{host}:{parts.port or 5432}{parts.path or '/'}"


class StatementsLost(DatabaseUnreachable):
    """The database is reached through a pooler that loses asyncpg's prepared statements
    (`STATEMENTS_LOST_MESSAGE`): found as the pool opened, before any call is served."""

    def __init__(self, address: str, detail: str) -> None:
        ConnectionError.__init__(self, f"the database at {address}: {STATEMENTS_LOST_MESSAGE}")
        self.address = address
        self.reason = f"{STATEMENTS_LOST_MESSAGE}; asyncpg said: {detail}"

    def naming(self, variable: str) -> str:
        """The line naming the setting the URL came from (`STELLO_DATABASE_URL`)."""
        return f"the database at {self.address} ({variable}): {STATEMENTS_LOST_MESSAGE}"


async def connecting(opening: Awaitable[T], dsn: str) -> T:
    """Await a connection or pool being opened to `dsn`; a socket's failure (refused,
    unknown host, timed out) or the server's refusal (no such role or database, a wrong
    password, too many connections) raises `DatabaseUnreachable` naming the database, and
    a pooler that loses prepared statements `StatementsLost`."""
    try:
        return await opening
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        if statements_lost(exc):
            raise StatementsLost(database_address(dsn), first_line(exc)) from exc
        raise DatabaseUnreachable(database_address(dsn), str(exc)) from exc


def first_line(exc: BaseException) -> str:
    """The first line of `exc`'s text (asyncpg adds a long HINT to some)."""
    return str(exc).partition("\n")[0]


class _Desynchronised(Exception):
    """A connection's protocol was out of step with the server; nothing was sent on it."""


async def unmigrated(pool: asyncpg.Pool, exc: BaseException) -> Unavailable | None:
    """`Unavailable` naming `stello migrate` when `exc` (an `UNDEFINED` error) comes of
    migrations the database lacks, logged as one WARNING line; None when it lacks none (a
    bug). Asked only after such an error, so a call pays nothing for it otherwise."""
    from stello.db.migrate import pending  # stello.db.migrate imports this module

    try:
        async with pool.acquire() as con:
            missing = await pending(cast(asyncpg.Connection, con))
    except Exception:  # the check itself failed: report the original error
        return None
    if not missing:
        return None
    message = lacking(missing)
    log.warning("%s (%s: %s)", message, type(exc).__name__, exc)
    return Unavailable(message)


async def register_codecs(con: asyncpg.Connection) -> None:
    """Decode json/jsonb columns to Python values once per connection."""
    for name in ("json", "jsonb"):
        await con.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


CLOSE_TIMEOUT_S = 10.0
"""How long closing a pool waits for its connections in use to be given back."""


@asynccontextmanager
async def create_pool(
    dsn: str, settings: StelloSettings | None = None, *, close_timeout_s: float = CLOSE_TIMEOUT_S
) -> AsyncIterator[asyncpg.Pool]:
    """Open a pool for `dsn`, sized and cached as `settings` say, and close it on exit
    (`close_pool`: never an error, so a shutdown goes on).

    Raises:
        DatabaseUnreachable: no connection could be opened (refused, unknown host).
        StatementsLost: a pooler between loses prepared statements while the statement
            cache is on (`check_statements`).

    The pool's reset query on release is a plain ``RESET ALL``-free no-op:
    we keep no session state in connections (PgBouncer transaction mode works),
    and the default reset costs more than the insert itself (DESIGN §9).
    """
    settings = settings or StelloSettings()
    opening = asyncpg.create_pool(
        dsn,
        min_size=settings.db_pool_min_size,
        max_size=settings.db_pool_max_size,
        statement_cache_size=settings.db_statement_cache_size,
        init=register_codecs,
        reset=_no_reset,
        server_settings=server_settings(dsn),
    )
    pool = await connecting(opening, dsn)
    try:
        if settings.db_statement_cache_size:
            await connecting(check_statements(pool), dsn)
        yield pool
    finally:
        await close_pool(pool, close_timeout_s)


async def close_pool(pool: asyncpg.Pool, within_s: float) -> None:
    """Close `pool`, waiting up to `within_s` for the connections in use to be given back;
    any still in use then (a holder that hangs) are terminated with the rest and a WARNING
    says how many. A close that fails otherwise is logged too: neither is raised, so the
    shutdown this ends goes on. A cancellation of the caller cuts the close short (asyncpg
    then terminates the connections) and is raised."""
    closing = asyncio.ensure_future(pool.close())
    try:
        done, _ = await asyncio.wait({closing}, timeout=within_s)
    except asyncio.CancelledError:
        closing.cancel()
        raise
    if not done:
        busy = pool.get_size() - pool.get_idle_size()
        await cancel_and_wait(closing)  # asyncpg's close, cut, terminates every connection
        log.warning(
            "closing the database pool: %s still in use after %g s; terminated %s with the others",
            "1 connection was" if busy == 1 else f"{busy} connections were",
            within_s,
            "it" if busy == 1 else "them",
        )
        return
    if (failed := closing.exception()) is not None:
        pool.terminate()
        log.warning("closing the database pool failed (%s); terminated its connections", failed)


BACKEND_PID = "SELECT pg_backend_pid()"
PROBE = "SELECT 'stello: are prepared statements kept?'"
PROBE_TIMEOUT_S = 1.0
"""How long the probe's last statement may wait for a second server connection: a pooler
with one per database (or all of them busy) makes it wait for the first, and then the probe
cannot tell and lets the start go on (a call that meets a lost statement still names the
setting). The start waits that long only then."""


async def check_statements(pool: asyncpg.Pool) -> None:
    """Raise a `STATEMENTS_LOST` error now when a pooler between loses asyncpg's prepared
    statements, which would otherwise fail calls at random once they run side by side.

    Without a pooler (the server's pid is the one the connection was given) nothing more
    is sent. Behind one, a statement is prepared on the first of two connections, the
    second begins a transaction (PgBouncer hands out its most recently used server
    connection: the one that holds the statement), and the first runs the statement
    again, on another server connection: a pooler that keeps statements per client
    prepares it there, one that does not answers that it does not exist.
    """
    if pool.get_max_size() < 2:
        return
    async with pool.acquire() as first:
        if first.get_server_pid() == await first.fetchval(BACKEND_PID):
            return
        await first.fetchval(PROBE)
        async with pool.acquire() as second, second.transaction():
            try:
                await first.fetchval(PROBE, timeout=PROBE_TIMEOUT_S)
            except TimeoutError:
                first.terminate()  # its statement may still wait in the pooler


async def connect_like(pool: asyncpg.Pool) -> asyncpg.Connection:
    """One connection outside `pool`, opened as the pool opens its own: the same URL (through
    PgBouncer where the pool goes through it), statement cache and session settings; no
    codecs. What the health monitor pings with (`stello.serving.health`).

    asyncpg has no public reader of a pool's connection arguments: they are the ones
    `create_pool` or `Pool.set_connect_args` gave it, kept on the pool as they were given.
    """
    args: tuple[Any, ...] = tuple(getattr(pool, "_connect_args"))  # noqa: B009
    kwargs: dict[str, Any] = dict(getattr(pool, "_connect_kwargs"))  # noqa: B009
    con: asyncpg.Connection = await asyncpg.connect(*args, **kwargs)
    return con


def server_settings(dsn: str) -> dict[str, str]:
    """The pool's session settings: application_name `stello`, unless `dsn` sets its own
    (asyncpg lets explicit server_settings override the URL's)."""
    if "application_name" in parse_qs(urlsplit(dsn).query):
        return {}
    return {"application_name": APPLICATION_NAME}


async def _no_reset(con: asyncpg.Connection) -> None:
    """Skip asyncpg's per-release reset: transactions always end before release."""


async def in_transaction(
    pool: asyncpg.Pool,
    work: Callable[[asyncpg.Connection], Awaitable[T]],
    *,
    isolation: Literal["read_committed", "repeatable_read", "serializable"] = "read_committed",
) -> T:
    """Run `work` in one transaction, retried on serialization failure or deadlock.

    Connection failures surface as `Unavailable` so callers answer UNAVAILABLE.
    """

    async def attempt() -> T:
        async with pool.acquire() as con:
            try:
                async with con.transaction(isolation=isolation):
                    return await work(cast(asyncpg.Connection, con))
            except TERMINATED as exc:
                _terminate(con, exc)
                raise

    return await _retried(pool, attempt)


async def in_statement(pool: asyncpg.Pool, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """Run `work`, one self-contained statement, outside an explicit transaction.

    A statement that lost a deadlock or serialization conflict was rolled back
    whole, so it is retried like a transaction; connection failures surface as
    `Unavailable`.
    """

    async def attempt() -> T:
        async with pool.acquire() as con:
            try:
                return await work(cast(asyncpg.Connection, con))
            except TERMINATED as exc:
                _terminate(con, exc)
                raise

    return await _retried(pool, attempt)


TERMINATED: tuple[type[BaseException], ...] = (
    asyncpg.InternalClientError,  # its protocol is out of step with the server
    asyncpg.ReadOnlySQLTransactionError,  # its session may stay read-only (module docstring)
)
"""What ends the connection a statement failed on: it never goes back to the pool."""


def _terminate(con: Any, exc: BaseException) -> None:
    """Terminate `con` (never back to the pool), on which a statement failed so
    (`TERMINATED`); `_Desynchronised` (retried) when the driver's state machine refused it
    before it was written, else the caller re-raises `exc`.

    Called from an ``except`` at each use, not a context manager: a generator-based one
    costs every statement of every call about 2 us.
    """
    con.terminate()
    if isinstance(exc, asyncpg.InternalClientError) and str(exc).startswith(
        "cannot switch to state"
    ):
        raise _Desynchronised(str(exc)) from exc


async def _retried(pool: asyncpg.Pool, attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt` again after a serialization failure or deadlock (up to MAX_ATTEMPTS), and
    after a connection out of step with the server: that connection is gone (terminated), so
    one more try per connection the pool may hold, since after a server restart or ended
    backends every idle one may be out of step."""
    conflicts = 0
    desynchronised = 0
    while True:
        try:
            return await attempt()
        except RETRYABLE as exc:
            conflicts += 1
            if conflicts == MAX_ATTEMPTS:
                log.warning(
                    "gave up after %d conflicts: %s: %s", conflicts, type(exc).__name__, exc
                )
                raise Aborted(CONFLICT_MESSAGE, reason=CONCURRENT_MODIFICATION) from exc
            await asyncio.sleep(0.005 * conflicts)
        except _Desynchronised as exc:
            log.warning("database connection out of step with the server (%s); retrying", exc)
            desynchronised += 1
            if desynchronised > pool.get_max_size():
                raise unavailable(exc) from exc
        except (*CONNECTION_ERRORS, *REFUSED) as exc:
            said = refusal(exc) or "database unavailable"
            outages.warning(said, "%s: %s: %s", said, exc.__class__.__name__, exc)
            raise unavailable(exc) from exc
        except UNDEFINED as exc:
            lacks = await unmigrated(pool, exc)
            if lacks is None:
                raise
            raise lacks from exc
        except asyncpg.InternalServerError as exc:
            if not transient(exc):
                raise
            outages.warning("node", "a database node is out of reach for the moment: %s", exc)
            raise unavailable(exc) from exc
        except STATEMENTS_LOST as exc:
            if not statements_lost(exc):
                raise
            raise lost_statements(exc) from exc


def lost_statements(exc: BaseException) -> Unavailable:
    """What a call is told when a pooler lost a prepared statement (`statements_lost`),
    after one WARNING line naming the setting (at most every `OUTAGE_LOG_EVERY_S`)."""
    outages.warning(
        "statements", "%s (%s: %s)", STATEMENTS_LOST_MESSAGE, type(exc).__name__, first_line(exc)
    )
    return Unavailable(STATEMENTS_LOST_MESSAGE)


async def fetch(pool: asyncpg.Pool, query: str, *args: Any) -> list[asyncpg.Record]:
    """Run a read-only query outside an explicit transaction."""

    async def work(con: asyncpg.Connection) -> list[asyncpg.Record]:
        return list(await con.fetch(query, *args))

    return await in_statement(pool, work)
