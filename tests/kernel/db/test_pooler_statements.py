"""A PgBouncer in transaction mode that loses asyncpg's prepared statements (1.18, or 1.21+
with max_prepared_statements = 0) while the statement cache is on: the start names
STELLO_DB_STATEMENT_CACHE_SIZE=0, and so does a call that meets it (README: PgBouncer)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import cast

import asyncpg
import pytest

from stello.db.failures import STATEMENTS_LOST
from stello.db.pool import (
    StatementsLost,
    check_statements,
    create_pool,
    in_transaction,
    register_codecs,
)
from stello.errors import Unavailable
from stello.serving.boundary import client_error
from stello.settings import StelloSettings
from tests.support.bouncer import Bouncer, database_of, pgbouncer

pytestmark = pytest.mark.sql

SETTING = "STELLO_DB_STATEMENT_CACHE_SIZE=0"
CALLS = 12
"""Units of work run side by side: enough that two of them share a server connection."""


@pytest.fixture(name="forgetful", scope="module")
def _forgetful(admin_dsn: str) -> Iterator[Bouncer]:
    """A PgBouncer 1.21+ in transaction mode with max_prepared_statements = 0."""
    with pgbouncer(admin_dsn, pool_size=4, keep_statements=False) as running:
        yield running


@pytest.fixture(name="forgetful_dsn")
def _forgetful_dsn(forgetful: Bouncer, direct_database_url: str) -> str:
    return forgetful.dsn(database_of(direct_database_url))


@pytest.fixture(name="unchecked_pool")
async def _unchecked_pool(forgetful_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool with the statement cache on through the bouncer, opened without
    `create_pool`'s check: as a pool whose check passed by chance would be."""
    async with asyncpg.create_pool(
        forgetful_dsn, min_size=0, max_size=8, init=register_codecs
    ) as pool:
        yield pool


def numbered(number: int) -> Callable[[asyncpg.Connection], Awaitable[int]]:
    """A unit of work that answers `number` after a pause (so that the calls' statements
    interleave on the server connections)."""

    async def work(con: asyncpg.Connection) -> int:
        await asyncio.sleep(0.01)
        return int(await con.fetchval("SELECT $1::int", number))

    return work


async def test_opening_a_pool_names_the_setting(forgetful_dsn: str) -> None:
    """`create_pool` (every service's start, `stello up`, the admin commands) refuses the
    pool with the setting to change, not with asyncpg's DuplicatePreparedStatementError or
    InvalidSQLStatementNameError on the first call."""
    settings = StelloSettings(db_pool_min_size=0, db_pool_max_size=4)
    with pytest.raises(StatementsLost) as refused:
        async with create_pool(forgetful_dsn, settings):
            pass
    line = refused.value.naming("STELLO_DATABASE_URL")
    assert SETTING in line and "STELLO_DATABASE_URL" in line


async def test_without_the_cache_the_same_pooler_serves(forgetful_dsn: str) -> None:
    """With STELLO_DB_STATEMENT_CACHE_SIZE=0 the pool opens and calls side by side work."""
    settings = StelloSettings(db_pool_min_size=0, db_pool_max_size=8, db_statement_cache_size=0)
    async with create_pool(forgetful_dsn, settings) as pool:
        got = await asyncio.gather(*(in_transaction(pool, numbered(n)) for n in range(CALLS)))
    assert got == list(range(CALLS))


async def test_a_unit_of_work_names_the_setting(
    forgetful_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A call that meets a lost statement is UNAVAILABLE naming the setting, and the log
    says it once (rate-limited), not a traceback per call. The pool's one connection
    prepares its statement on one server connection; another client then holds that one
    (PgBouncer hands out its most recently used server connection, as the pool's probe
    relies on), so each call after runs the statement on another and loses it."""
    holder = await asyncpg.connect(forgetful_dsn, statement_cache_size=0)
    try:
        async with asyncpg.create_pool(
            forgetful_dsn, min_size=0, max_size=1, init=register_codecs
        ) as pool:
            assert await in_transaction(pool, numbered(0)) == 0
            async with holder.transaction():
                await holder.fetchval("SELECT 1")
                with caplog.at_level(logging.WARNING, logger="stello.db.pool"):
                    outcomes = [
                        await asyncio.gather(
                            in_transaction(pool, numbered(n)), return_exceptions=True
                        )
                        for n in range(1, 4)
                    ]
    finally:
        await holder.close()
    failures = [outcome[0] for outcome in outcomes if isinstance(outcome[0], BaseException)]
    assert len(failures) == 3, outcomes
    assert all(isinstance(failure, Unavailable) for failure in failures), failures
    assert all(SETTING in str(failure) for failure in failures)
    said = [record for record in caplog.records if SETTING in record.getMessage()]
    assert len(said) == 1


async def test_the_error_boundary_names_the_setting(unchecked_pool: asyncpg.Pool) -> None:
    """A lost statement that reaches the boundary unwrapped is UNAVAILABLE naming the
    setting, not INTERNAL. The statement is lost as the pool's probe loses it (prepared on
    one server connection, run again while another client holds that one): calls side by
    side lose one only when the pooler happens to hand them other connections."""
    raw: list[BaseException] = []
    try:
        await check_statements(unchecked_pool)
    except STATEMENTS_LOST as exc:
        raw.append(exc)
    assert all(isinstance(outcome, Exception) for outcome in raw)
    assert raw, "no statement was lost: the pooler kept them"
    answer = client_error(cast(Exception, raw[0]), "/test/Method")
    assert isinstance(answer, Unavailable) and SETTING in str(answer)


@pytest.mark.subprocess
def test_a_service_stops_at_start_with_one_line(forgetful_dsn: str) -> None:
    """`python -m tree_service` behind that pooler exits 1 with one ERROR line naming the
    setting and the database's variable, and no traceback."""
    env = {**os.environ, "STELLO_DATABASE_URL": forgetful_dsn}
    env.pop("STELLO_DB_STATEMENT_CACHE_SIZE", None)
    done = subprocess.run(
        [sys.executable, "-m", "tree_service", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and SETTING in errors[0] and "STELLO_DATABASE_URL" in errors[0]
