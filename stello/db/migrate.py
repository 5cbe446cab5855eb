"""Ordered SQL migrations, applied once each and recorded in `schema_migrations`.

Each file runs in its own transaction that first takes a transaction-scoped
advisory lock (tried, not waited for: `_apply`), so concurrent `stello migrate`
runs (four replicas starting at once) apply every file exactly once. A file that
says `OUTSIDE` on a line of its own (an index built CONCURRENTLY on a large
table, which no transaction may hold) runs its statements on a second
connection, each its own transaction, while the first holds that lock in its
open transaction; such a file's statements must be safe to run again from the
start, as a crash may stop it halfway.

A file's statements are sent one at a time: a Citus coordinator propagates some
DDL to the workers as the text of the whole query it came in, which a worker
refuses when it holds several statements ("cannot insert multiple commands into
a prepared statement").
On a Citus coordinator, distribute the schema afterwards with
`stello.distribution.apply.distribute`; later migrations keep working on it.
"""

from __future__ import annotations

import asyncio
import functools
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg
from asyncpg import connect_utils

from stello.db.pool import connecting
from stello.db.sql_script import split_statements

LOCK_KEY = 0x5737_E110  # "stello" migrations

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""

CITUS_INSTALLED = "SELECT true FROM pg_extension WHERE extname = 'citus'"
DONE = "SELECT true FROM schema_migrations WHERE version = $1"
TRY_LOCK = "SELECT pg_try_advisory_xact_lock($1)"
LOCK_RETRY_S = 0.05
"""How long a run waits between tries of the lock another run holds."""
OUTSIDE = "-- stello: outside a transaction"
"""The line that makes a migration run outside a transaction (`Migration.transactional`)."""
TITLE_MAX = 120


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file: its version (file stem) and text."""

    version: str
    sql: str

    @property
    def title(self) -> str:
        """What the file says it does: the first sentence of its opening comment, at most
        TITLE_MAX characters ("" without one)."""
        words: list[str] = []
        for line in self.sql.splitlines():
            text = line.removeprefix("--").strip()
            if not line.startswith("--") or not text or line.strip() == OUTSIDE:
                break
            words += text.split()
        sentence = " ".join(words)
        end = sentence.find(". ")
        sentence = sentence if end < 0 else sentence[: end + 1]
        if len(sentence) <= TITLE_MAX:
            return sentence
        return sentence[: TITLE_MAX - 1].rsplit(" ", 1)[0] + "…"

    @property
    def transactional(self) -> bool:
        """Whether the file runs in one transaction (all of it or nothing); False for one
        that says `OUTSIDE` on a line of its own: each statement commits on its own
        (CREATE INDEX CONCURRENTLY cannot run in a transaction)."""
        return not any(line.strip() == OUTSIDE for line in self.sql.splitlines())

    @property
    def _code(self) -> str:
        """The file without its comments."""
        return "\n".join(line.split("--", 1)[0] for line in self.sql.splitlines())

    @property
    def indexed_tables(self) -> list[str]:
        """The existing tables it builds an index on (not CONCURRENTLY; a table it creates
        is empty): writes to them wait while it runs, as long as a large table's build."""
        code = self._code
        indexed = {table for _index, table in _INDEX_NAMED.findall(code)}
        return sorted(indexed - set(_CREATE_TABLE.findall(code)))

    @property
    def locked_tables(self) -> list[str]:
        """The existing tables it takes an ACCESS EXCLUSIVE lock on: those it alters (ALTER
        TABLE; adding a stored generated column, or changing a type, rewrites the table
        meanwhile), those it drops an index of (not CONCURRENTLY) that it builds again,
        those it drops a trigger of, and those it locks (LOCK TABLE, whose default mode is
        ACCESS EXCLUSIVE). Reads of them wait too, while it runs: in a transaction the
        lock lasts to its end (a backfill or an index build after it included)."""
        code = self._code
        tables = set(_ALTER_TABLE.findall(code)) | set(_DROP_TRIGGER.findall(code))
        built = dict(_INDEX_NAMED.findall(code))
        tables |= {built[index] for index in _DROP_INDEX.findall(code) if index in built}
        tables |= {table for table, mode in _locks(code) if mode == "ACCESS EXCLUSIVE"}
        return sorted(tables - set(_CREATE_TABLE.findall(code)))

    @property
    def write_locked_tables(self) -> list[str]:
        """The existing tables whose writes (not reads) wait while it runs, besides those
        it builds indexes on: a trigger created on them (SHARE ROW EXCLUSIVE), or a LOCK
        TABLE in a mode that conflicts with writes but not with reads."""
        code = self._code
        tables = set(_CREATE_TRIGGER.findall(code))
        tables |= {table for table, mode in _locks(code) if mode in _WRITE_BLOCKING}
        return sorted(tables - set(_CREATE_TABLE.findall(code)))


def _locks(code: str) -> list[tuple[str, str]]:
    """Each table a LOCK statement of `code` names, with its mode (upper case, one space
    between words; ACCESS EXCLUSIVE when the statement names none)."""
    found = []
    for tables, mode in _LOCK_TABLE.findall(code):
        named = " ".join(mode.upper().split()) or "ACCESS EXCLUSIVE"
        for table in tables.split(","):
            found.append((table.split()[-1], named))
    return found


# An index built in the transaction (not CONCURRENTLY): its name and its table.
_INDEX_NAMED = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+"
    r"(?:ONLY\s+)?(\w+)",
    re.IGNORECASE,
)
_DROP_INDEX = re.compile(r"DROP\s+INDEX\s+(?!CONCURRENTLY)(?:IF\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_ALTER_TABLE = re.compile(r"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(\w+)", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CREATE_TRIGGER = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?TRIGGER\s+\w+\s[^;]*?\bON\s+(?:ONLY\s+)?(\w+)",
    re.IGNORECASE,
)
_DROP_TRIGGER = re.compile(
    r"DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?\w+\s+ON\s+(?:ONLY\s+)?(\w+)", re.IGNORECASE
)
# LOCK [TABLE] [ONLY] name [, ...] [IN mode MODE] [NOWAIT]
_LOCK_TABLE = re.compile(
    r"\bLOCK\s+(?:TABLE\s+)?((?:ONLY\s+)?\w+(?:\s*,\s*(?:ONLY\s+)?\w+)*)"
    r"(?:\s+IN\s+((?:ACCESS|ROW|SHARE|UPDATE|EXCLUSIVE)(?:\s+(?:ROW|SHARE|UPDATE|EXCLUSIVE))*)"
    r"\s+MODE)?",
    re.IGNORECASE,
)
_WRITE_BLOCKING = {"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE"}
"""The LOCK modes that make writes wait and not reads (ACCESS EXCLUSIVE makes both wait)."""


@functools.cache
def packaged_versions() -> tuple[str, ...]:
    """The versions (file stems) of the packaged migrations, in file-name order: listed once
    per process, as health asks which are pending at every interval."""
    folder = resources.files("stello.migrations")
    return tuple(
        sorted(
            item.name.removesuffix(".sql")
            for item in folder.iterdir()
            if item.name.endswith(".sql")
        )
    )


def load_migrations() -> list[Migration]:
    """Every packaged migration, in file-name order."""
    folder = resources.files("stello.migrations")
    return [
        Migration(version, (folder / f"{version}.sql").read_text("utf-8"))
        for version in packaged_versions()
    ]


async def migrate(con: asyncpg.Connection, *, until: str | None = None) -> list[str]:
    """Apply the pending migrations on `con`; return the versions applied now.

    `until` stops after that version (its file stem, e.g. ``0009_lineage``): a
    schema of an older release, for tests of the later migrations.
    """
    applied: list[str] = []
    migrations = load_migrations()
    if until is not None:
        versions = [m.version for m in migrations]
        if until not in versions:
            raise ValueError(f"no migration {until!r} (known: {', '.join(versions)})")
        migrations = migrations[: versions.index(until) + 1]
    # One read of what was applied: an up-to-date schema is read once, not probed per file
    # (each still pending is probed again under the lock, as another run may apply it).
    done = await _applied(con)
    migrations = [m for m in migrations if m.version not in done]
    if not migrations:
        return applied
    citus = bool(await con.fetchval(CITUS_INSTALLED))
    for migration in migrations:
        if await _apply(con, migration, citus):
            applied.append(migration.version)
    return applied


async def _apply(con: asyncpg.Connection, migration: Migration, citus: bool) -> bool:
    """Apply `migration` unless it was; whether it was applied now.

    The lock is tried, not waited for, each try in a transaction of its own: a run that
    waits in a statement holds a snapshot, and a CREATE INDEX CONCURRENTLY of the run
    holding the lock (`_outside`) would wait for the waiter's transaction to end, while
    the waiter waits for the lock: neither would ever go on (no lock cycle PostgreSQL
    can see).
    """
    while True:
        async with con.transaction():
            if await con.fetchval(TRY_LOCK, LOCK_KEY):
                return await _apply_locked(con, migration, citus)
        await asyncio.sleep(LOCK_RETRY_S)


async def _apply_locked(con: asyncpg.Connection, migration: Migration, citus: bool) -> bool:
    """`_apply` in the transaction that holds the lock."""
    await con.execute(CREATE_TABLE)
    if await con.fetchval(DONE, migration.version):
        return False
    if not migration.transactional:
        await _outside(con, migration)
    else:
        if citus:
            # A function's propagation after DDL on shards (in one file)
            # needs one connection per worker for the whole transaction.
            await con.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        for statement in split_statements(migration.sql):
            await con.execute(statement)
    await con.execute("INSERT INTO schema_migrations (version) VALUES ($1)", migration.version)
    return True


async def _outside(con: asyncpg.Connection, migration: Migration) -> None:
    """Run `migration`'s statements on a second connection, each its own transaction.

    `con`'s transaction keeps the migrations' lock meanwhile: a transaction-scoped
    lock, which a PgBouncer in transaction mode keeps on the one server connection the
    transaction holds (a session lock would stay behind on whichever server connection
    took it). That transaction holds no snapshot between its statements (READ
    COMMITTED) and no lock on the tables migrated, so a CREATE INDEX CONCURRENTLY does
    not wait for it.
    """
    # The statements before left their (unnamed) portal open, and the portal its
    # snapshot, which a CREATE INDEX CONCURRENTLY waits for: one of the simple protocol
    # drops it.
    await con.execute("SELECT 1")
    second = await _connect_like(con)
    try:
        for statement in split_statements(migration.sql):
            await second.execute(statement)
    finally:
        await second.close()


async def _connect_like(con: asyncpg.Connection) -> asyncpg.Connection:
    """A new connection opened as `con` was: its server's address and its parameters
    (user, database, TLS mode, server settings, statement cache: none through a
    PgBouncer), with asyncpg's own opener.

    asyncpg keeps those, and opens its cancellation connections with them, though not as
    public API (asyncpg is pinned in requirements.lock; tests/kernel/db/test_migrate.py
    opens one, tests/deploy/test_pgbouncer.py through PgBouncer).
    """
    opened: asyncpg.Connection = await connect_utils._connect_addr(  # type: ignore[attr-defined]
        addr=con._addr,  # type: ignore[attr-defined]
        loop=asyncio.get_running_loop(),
        params=con._params,  # type: ignore[attr-defined]
        config=con._config,  # type: ignore[attr-defined]
        connection_class=_connection_class(con),
        record_class=con._protocol.get_record_class(),  # type: ignore[attr-defined]
    )
    return opened


def _connection_class(con: asyncpg.Connection) -> type[asyncpg.Connection]:
    """`con`'s class, or asyncpg's own when `con` is a pool's proxy of a connection (a
    class that wraps one, and takes none of a connection's arguments)."""
    kind = type(con)
    return kind if issubclass(kind, asyncpg.Connection) else asyncpg.Connection


async def pending(con: asyncpg.Connection) -> list[str]:
    """The versions of the packaged migrations `con`'s database has not applied, in order
    (every one on a database never migrated); no migration's text is read."""
    return (await pending_and_unknown(con))[0]


async def pending_and_unknown(con: asyncpg.Connection) -> tuple[list[str], list[str]]:
    """`pending`, and the versions `con`'s database records as applied that this release
    does not have, in order: a newer release migrated it (after an upgrade was rolled back,
    this older code runs on a schema it was not written for); one read of
    `schema_migrations`."""
    applied = await _applied(con)
    return _pending_of(applied), _unknown_of(applied)


def _pending_of(applied: set[str]) -> list[str]:
    """The packaged versions not in `applied`, in order."""
    return [version for version in packaged_versions() if version not in applied]


def _unknown_of(applied: set[str]) -> list[str]:
    """The versions of `applied` this release does not have, in order."""
    packaged = set(packaged_versions())
    return sorted(version for version in applied if version not in packaged)


def newer_line(versions: list[str]) -> str:
    """What an operator is told of the versions this release does not know
    (`pending_and_unknown`)."""
    named = versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"
    return (
        f"the database holds {len(versions)} migration{'s' if len(versions) > 1 else ''} "
        f"this release does not know ({named}): a newer release migrated it, and this one "
        "may fail on its schema; run that release (or a newer one) on this database"
    )


def _migrations_of(versions: list[str]) -> list[Migration]:
    """The packaged migrations of `versions`, in order."""
    wanted = set(versions)
    return [m for m in load_migrations() if m.version in wanted]


async def _applied(con: asyncpg.Connection) -> set[str]:
    """The versions `con`'s database records as applied (none before its first migration)."""
    if not await con.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        return set()
    return {row["version"] for row in await con.fetch("SELECT version FROM schema_migrations")}


async def pending_dsn(dsn: str) -> tuple[list[Migration], list[str]]:
    """Connect to `dsn` and read which migrations it has not applied, and which it has
    that this release does not know (`pending_and_unknown`); apply none."""
    con = await connecting(asyncpg.connect(dsn, statement_cache_size=0), dsn)
    try:
        waiting, newer = await pending_and_unknown(con)
        return _migrations_of(waiting), newer
    finally:
        await con.close()


async def migrate_dsn(dsn: str) -> list[str]:
    """Connect to `dsn`, apply pending migrations, disconnect.

    `dsn` is the direct URL (STELLO_DATABASE_DIRECT_URL) where one is set; the
    connection prepares no named statements, so a PgBouncer in transaction mode
    in front of the server works as well.
    """
    con = await connecting(asyncpg.connect(dsn, statement_cache_size=0), dsn)
    try:
        return await migrate(con)
    finally:
        await con.close()
