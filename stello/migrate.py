"""Ordered SQL migrations, applied once each and recorded in `schema_migrations`.

Each file runs in its own transaction that first takes a transaction-scoped
advisory lock, so concurrent `stello migrate` runs (four replicas starting at
once) apply every file exactly once. A file's statements are sent one at a
time: a Citus coordinator propagates some DDL to the workers as the text of
the whole query it came in, which a worker refuses when it holds several
statements ("cannot insert multiple commands into a prepared statement").
On a Citus coordinator, distribute the schema afterwards with
`stello.distribution.distribute`; later migrations keep working on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

from stello.db import connecting

LOCK_KEY = 0x5737_E110  # "stello" migrations

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""

CITUS_INSTALLED = "SELECT true FROM pg_extension WHERE extname = 'citus'"
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
            if not line.startswith("--") or not text:
                break
            words += text.split()
        sentence = " ".join(words)
        end = sentence.find(". ")
        sentence = sentence if end < 0 else sentence[: end + 1]
        if len(sentence) <= TITLE_MAX:
            return sentence
        return sentence[: TITLE_MAX - 1].rsplit(" ", 1)[0] + "…"

    @property
    def indexed_tables(self) -> list[str]:
        """The existing tables it builds an index on (not CONCURRENTLY; a table it creates
        is empty): writes to them wait while it runs, as long as a large table's build."""
        code = "\n".join(line.split("--", 1)[0] for line in self.sql.splitlines())
        return sorted(set(_INDEX_ON.findall(code)) - set(_CREATE_TABLE.findall(code)))


_INDEX_ON = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?\w+\s+ON\s+"
    r"(?:ONLY\s+)?(\w+)",
    re.IGNORECASE,
)
_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_DOLLAR_TAG = re.compile(r"\$(?:[^\W\d]\w*)?\$")
_WORD = re.compile(r"[^\W\d][\w$]*")
_ROUTINE = (["CREATE", "FUNCTION"], ["CREATE", "PROCEDURE"])


def split_statements(sql: str) -> list[str]:
    """The statements of a migration file, each without its final semicolon.

    Semicolons inside comments, quoted strings and identifiers, dollar-quoted
    bodies, and `BEGIN ATOMIC ... END` bodies of a CREATE FUNCTION or
    PROCEDURE do not end a statement (psql splits a script so). Statements made
    only of comments and blanks are left out.
    """
    statements: list[str] = []
    start = i = 0
    words: list[str] = []  # the current statement's first words, OR REPLACE left out
    depth = 0  # BEGIN / CASE ... END nesting in a routine's SQL body
    while i < len(sql):
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = _block_comment_end(sql, i)
        elif sql[i] in "'\"":
            i = _quoted_end(sql, i)
        elif sql[i] == "$" and not _after_word(sql, i) and (tag := _DOLLAR_TAG.match(sql, i)):
            end = sql.find(tag.group(0), tag.end())
            i = len(sql) if end < 0 else end + len(tag.group(0))
        elif not _after_word(sql, i) and (word := _WORD.match(sql, i)):
            i = word.end()
            keyword = word.group(0).upper()
            if len(words) < 2 and keyword not in ("OR", "REPLACE"):
                words.append(keyword)
            elif words in _ROUTINE and keyword in ("BEGIN", "CASE", "END"):
                depth += -1 if keyword == "END" else 1
        elif sql[i] == ";" and depth <= 0:
            statements.append(sql[start:i])
            start = i = i + 1
            words, depth = [], 0
        else:
            i += 1
    statements.append(sql[start:])
    return [text.strip() for text in statements if _has_code(text)]


def _after_word(sql: str, i: int) -> bool:
    """Whether sql[i] continues a word (a `$` there is no dollar quote, a letter no new word)."""
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")


def _block_comment_end(sql: str, i: int) -> int:
    """The index after the (nestable) /* comment */ that starts at i."""
    nesting, i = 1, i + 2
    while i < len(sql) and nesting:
        if sql.startswith("/*", i):
            nesting, i = nesting + 1, i + 2
        elif sql.startswith("*/", i):
            nesting, i = nesting - 1, i + 2
        else:
            i += 1
    return i


def _quoted_end(sql: str, i: int) -> int:
    """The index after the string or quoted identifier that starts at i (doubled quotes
    inside; backslash escapes in an E'' string)."""
    quote = sql[i]
    escapes = quote == "'" and i > 0 and sql[i - 1] in "eE" and not _after_word(sql, i - 1)
    i += 1
    while i < len(sql):
        if escapes and sql[i] == "\\":
            i += 2
        elif sql.startswith(quote * 2, i):
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    return i


def _has_code(text: str) -> bool:
    """Whether `text` holds more than blanks and `--` comments."""
    return any(line.strip() and not line.lstrip().startswith("--") for line in text.splitlines())


def load_migrations() -> list[Migration]:
    """Every packaged migration, in file-name order."""
    folder = resources.files("stello.migrations")
    files = sorted(
        (item for item in folder.iterdir() if item.name.endswith(".sql")),
        key=lambda item: item.name,
    )
    return [Migration(item.name.removesuffix(".sql"), item.read_text("utf-8")) for item in files]


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
    citus = bool(await con.fetchval(CITUS_INSTALLED))
    for migration in migrations:
        async with con.transaction():
            await con.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            await con.execute(CREATE_TABLE)
            done = await con.fetchval(
                "SELECT true FROM schema_migrations WHERE version = $1", migration.version
            )
            if done:
                continue
            if citus:
                # A function's propagation after DDL on shards (in one file)
                # needs one connection per worker for the whole transaction.
                await con.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
            for statement in split_statements(migration.sql):
                await con.execute(statement)
            await con.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)", migration.version
            )
            applied.append(migration.version)
    return applied


async def pending(con: asyncpg.Connection) -> list[str]:
    """The versions of the packaged migrations `con`'s database has not applied, in order
    (every one on a database never migrated)."""
    return [m.version for m in await pending_migrations(con)]


async def pending_migrations(con: asyncpg.Connection) -> list[Migration]:
    """The packaged migrations `con`'s database has not applied, in order."""
    applied: set[str] = set()
    if await con.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        rows = await con.fetch("SELECT version FROM schema_migrations")
        applied = {row["version"] for row in rows}
    return [m for m in load_migrations() if m.version not in applied]


async def pending_dsn(dsn: str) -> list[Migration]:
    """Connect to `dsn` and read which migrations it has not applied; apply none."""
    con = await connecting(asyncpg.connect(dsn, statement_cache_size=0), dsn)
    try:
        return await pending_migrations(con)
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
