"""A TCP proxy in front of PostgreSQL that a test can cut and restore (a real outage)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

# asyncpg's own DSN parser (libpq forms, PG* variables); private, so asyncpg-stubs omit it.
from asyncpg.connect_utils import _parse_connect_dsn_and_args  # type: ignore[attr-defined]


def target_of(dsn: str) -> tuple[str, int] | str:
    """(host, port) of the server behind `dsn`, or the path of its Unix socket."""
    addrs, _ = _parse_connect_dsn_and_args(
        dsn=dsn,
        host=None,
        port=None,
        user=None,
        password=None,
        passfile=None,
        database=None,
        ssl=None,
        service=None,
        servicefile=None,
        direct_tls=None,
        server_settings=None,
        target_session_attrs=None,
        krbsrvname=None,
        gsslib=None,
    )
    first = addrs[0]
    return first if isinstance(first, str) else (str(first[0]), int(first[1]))


class PgProxy:
    """Forwards 127.0.0.1:<port> to the server of `dsn` while open.

    `linger_s` keeps a client's socket open that long after the server closed
    its side, as a slow network does: what the server said last (a FATAL
    "terminating connection") reaches the client well before the close.
    """

    def __init__(self, dsn: str, *, linger_s: float = 0.0) -> None:
        self._target = target_of(dsn)
        self._linger_s = linger_s
        self._dsn = dsn
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def dsn(self) -> str:
        """The DSN that reaches the database through this proxy."""
        parts = urlsplit(self._dsn)
        user = parts.username or "postgres"
        return f"postgresql://{user}@127.0.0.1:{self.port}{parts.path}"

    async def open(self) -> None:
        """Start (or restart) accepting connections on the same port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop accepting and drop every live connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # Abort the sockets rather than cancel the handlers: the pumps end on
        # their own, as they would when a real network drops.
        for writer in list(self._writers):
            writer.transport.abort()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            if isinstance(self._target, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self._target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self._target)
            self._writers.update((writer, up_writer))
            try:
                await asyncio.gather(
                    _pump(reader, up_writer), _pump(up_reader, writer, self._linger_s)
                )
            finally:
                up_writer.close()
                self._writers.discard(up_writer)
        finally:
            writer.close()
            self._writers.discard(writer)
            self._pipes.discard(task)


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, linger_s: float = 0.0
) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    if linger_s:
        await asyncio.sleep(linger_s)
    with contextlib.suppress(OSError):
        writer.write_eof()
