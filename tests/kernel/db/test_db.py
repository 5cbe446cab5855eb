"""The pool and transaction helpers against a real server that drops connections."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import pytest

from stello.db.pool import MAX_ATTEMPTS, create_pool, in_statement, in_transaction
from stello.errors import Aborted, Unavailable
from stello.reasons import CONCURRENT_MODIFICATION
from stello.serving.boundary import client_error
from stello.settings import StelloSettings
from tests.support.bouncer import bouncer_requested
from tests.support.proxy import PgProxy

pytestmark = pytest.mark.sql


async def _pid(con: asyncpg.Connection) -> int:
    return int(await con.fetchval("SELECT pg_backend_pid()"))


def _client(con: asyncpg.Connection) -> int:
    """Which client connection this is: the backend key the server sent it (through
    PgBouncer, one PgBouncer makes for each client connection, while pg_backend_pid() may
    name a server connection another client used before)."""
    return con.get_server_pid()


async def _client_of(con: asyncpg.Connection) -> int:
    return _client(con)


async def _one(con: asyncpg.Connection) -> int:
    return int(await con.fetchval("SELECT 1"))


class TestTerminatedBackend:
    """A backend the server terminated (as on a restart) whose socket has not closed yet."""

    @pytest.mark.parametrize("helper", [in_transaction, in_statement], ids=["tx", "statement"])
    async def test_next_unit_of_work_gets_a_good_connection(
        self, settings: StelloSettings, direct_database_url: str, pool: asyncpg.Pool, helper: object
    ) -> None:
        """The server's FATAL on an idle pooled connection does not fail the next caller
        (reached directly: the FATAL is PostgreSQL's own, PgBouncer would answer for it)."""
        proxy = PgProxy(direct_database_url, linger_s=2.0)
        await proxy.open()
        one = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 1})
        try:
            async with create_pool(proxy.dsn, one) as small:
                pid = await in_statement(small, _pid)
                await pool.execute("SELECT pg_terminate_backend($1::int)", pid)
                await asyncio.sleep(0.3)  # the FATAL has arrived; the socket lingers open
                run = in_transaction if helper is in_transaction else in_statement
                assert await run(small, _one) == 1
        finally:
            await proxy.cut()


class TestRefusedByTheDriver:
    """A statement the driver's protocol refused: its connection never goes back to the pool."""

    @pytest.mark.parametrize("helper", [in_transaction, in_statement], ids=["tx", "statement"])
    async def test_out_of_step_is_retried_on_another_connection(
        self, settings: StelloSettings, database_url: str, helper: object
    ) -> None:
        """Refused before it was written ("cannot switch to state"): the connection is
        terminated and the work runs again on a fresh one."""
        one = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 1})
        pids: list[int] = []

        async def work(con: asyncpg.Connection) -> int:
            pids.append(_client(con))
            if len(pids) == 1:
                raise asyncpg.InternalClientError("cannot switch to state 15; another operation")
            return await _one(con)

        run = in_transaction if helper is in_transaction else in_statement
        async with create_pool(database_url, one) as small:
            assert await run(small, work) == 1
        assert len(pids) == 2 and pids[0] != pids[1]  # the pool's only connection was replaced

    async def test_every_idle_connection_out_of_step_is_survived(
        self, settings: StelloSettings, database_url: str
    ) -> None:
        """After ended backends every idle connection may be out of step: the work is tried
        once per connection the pool may hold, so it succeeds on the first fresh one; past
        that it is Unavailable (the pool keeps making bad ones: a real outage)."""
        eight = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 8})
        refusal = "cannot switch to state 15; another operation"
        tries: list[int] = []

        async def bad_eight_times(con: asyncpg.Connection) -> int:
            tries.append(_client(con))
            if len(tries) <= 8:
                raise asyncpg.InternalClientError(refusal)
            return await _one(con)

        async def always_bad(con: asyncpg.Connection) -> int:
            tries.append(_client(con))
            raise asyncpg.InternalClientError(refusal)

        async with create_pool(database_url, eight) as pool:
            assert await in_statement(pool, bad_eight_times) == 1
            assert len(tries) == 9
            tries.clear()
            with pytest.raises(Unavailable):
                await in_transaction(pool, always_bad)
            assert len(tries) == 9  # one per connection the pool may hold, and one more

    @pytest.mark.parametrize("helper", [in_transaction, in_statement], ids=["tx", "statement"])
    async def test_other_refusals_are_unavailable(
        self, settings: StelloSettings, database_url: str, helper: object
    ) -> None:
        """Any other InternalClientError: the connection terminated, not retried, Unavailable
        (a lost database, as the driver's other connection errors)."""
        one = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 1})
        pids: list[int] = []
        refusal = asyncpg.InternalClientError("the driver refused")

        async def work(con: asyncpg.Connection) -> int:
            pids.append(_client(con))
            raise refusal

        run = in_transaction if helper is in_transaction else in_statement
        async with create_pool(database_url, one) as small:
            with pytest.raises(Unavailable) as raised:
                await run(small, work)
            assert raised.value.__cause__ is refusal
            assert len(pids) == 1  # not retried
            assert await in_statement(small, _client_of) != pids[0]  # the connection was replaced


class TestConflicts:
    @pytest.mark.parametrize("helper", [in_transaction, in_statement], ids=["tx", "statement"])
    async def test_a_deadlock_that_outlives_the_retries_answers_aborted(
        self, pool: asyncpg.Pool, helper: Any
    ) -> None:
        """Every attempt loses a deadlock (raised here after a real statement): retried
        MAX_ATTEMPTS times, then ABORTED with CONCURRENT_MODIFICATION, never the driver's
        error (which a servicer would answer INTERNAL)."""
        attempts = 0

        async def work(con: asyncpg.Connection) -> None:
            nonlocal attempts
            attempts += 1
            await _one(con)
            raise asyncpg.DeadlockDetectedError("deadlock detected")

        with pytest.raises(Aborted) as caught:
            await helper(pool, work)
        assert caught.value.reason == CONCURRENT_MODIFICATION
        assert attempts == MAX_ATTEMPTS


RAISE_INTERNAL = """
DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = {message}; END $$
"""


class TestCitusPassingErrors:
    """Citus reports a node or a shard out of reach for the moment (a worker restarted, a
    shard being moved) as an internal ERROR (XX000): UNAVAILABLE, not INTERNAL (explore5
    F5). Raised here by the server with Citus's own words, over a real connection."""

    @pytest.mark.parametrize(
        "message",
        [
            "failure on connection marked as essential: 127.0.0.1:5604",
            "could not find valid entry for shard 102050",
            "shard for the given value does not exist",
        ],
    )
    @pytest.mark.parametrize("helper", [in_transaction, in_statement], ids=["tx", "statement"])
    async def test_unavailable(self, pool: asyncpg.Pool, helper: Any, message: str) -> None:
        async def work(con: asyncpg.Connection) -> None:
            await con.execute(RAISE_INTERNAL.format(message=f"'{message}'"))

        with pytest.raises(Unavailable):
            await helper(pool, work)

    async def test_any_other_internal_error_stays_one(self, pool: asyncpg.Pool) -> None:
        """An internal ERROR that is not one of those is not hidden as an outage."""

        async def work(con: asyncpg.Connection) -> None:
            await con.execute(RAISE_INTERNAL.format(message="'cache lookup failed'"))

        with pytest.raises(asyncpg.InternalServerError):
            await in_transaction(pool, work)
        caught = asyncpg.InternalServerError("failure on connection marked as essential: x")
        assert isinstance(client_error(caught, "M"), Unavailable)
        other = client_error(asyncpg.InternalServerError("cache lookup failed"), "M")
        assert not isinstance(other, Unavailable)


class TestApplicationName:
    """The services' connections are named `stello` (on Citus, the database's defaults
    show them the catalogue without the shard filter: stello.distribution.plan)."""

    async def test_the_pool_names_its_connections_stello(
        self, settings: StelloSettings, database_url: str
    ) -> None:
        async with create_pool(database_url, settings) as pool:
            assert await pool.fetchval("SHOW application_name") == "stello"

    async def test_the_urls_own_name_wins(
        self, settings: StelloSettings, database_url: str
    ) -> None:
        separator = "&" if "?" in database_url else "?"
        async with create_pool(f"{database_url}{separator}application_name=mine", settings) as pool:
            assert await pool.fetchval("SHOW application_name") == "mine"


BACKEND_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"


class TestClose:
    async def test_a_connection_never_given_back_is_terminated_not_raised(
        self, settings: StelloSettings, database_url: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A connection still in use when the pool closes (its holder hangs) is waited for
        `close_timeout_s`, then terminated with the rest: the close ends without an error
        (a shutdown goes on), and one WARNING says how many were still busy."""
        with caplog.at_level(logging.WARNING, logger="stello.db.pool"):
            async with create_pool(database_url, settings, close_timeout_s=0.2) as pool:
                held = await pool.acquire()
                backend = await held.fetchval("SELECT pg_backend_pid()")
                await pool.fetchval("SELECT 1")  # another connection, given back
        said = [r.getMessage() for r in caplog.records if r.name == "stello.db.pool"]
        assert said == [
            "closing the database pool: 1 connection was still in use after 0.2 s; "
            "terminated it with the others"
        ]
        if bouncer_requested():
            return  # the backend is PgBouncer's, kept for its other clients
        con = await asyncpg.connect(database_url)
        try:
            for _ in range(500):  # its backend ends once it reads the termination
                if not await con.fetchval(BACKEND_ALIVE, backend):
                    break
                await asyncio.sleep(0.01)
            assert not await con.fetchval(BACKEND_ALIVE, backend)
        finally:
            await con.close()
