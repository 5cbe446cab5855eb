"""grpc health following the database itself, over a connection of the monitor's own.

Readiness must not depend on the pool being free: one tenant's burst that holds
every pooled connection would read as a database out of reach and take every
replica out of rotation at once (explore11 F3). So the monitor pings over one
connection it opens as the pool opens its own (`stello.db.pool.connect_like`: the
same URL, through PgBouncer where the pool goes through it) and keeps; a pool
with no connection free is said in the log under its own name, and shown by
/metrics (`stello.telemetry.metrics.PoolCollector`), never as NOT_SERVING.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial

import asyncpg
from grpc_health.v1 import health, health_pb2

from stello.db.failures import REFUSALS, lacking
from stello.db.migrate import pending
from stello.db.pool import OUTAGE_LOG_EVERY_S, connect_like
from stello.db.tasks import cancel_and_wait
from stello.telemetry.log_every import WarnEvery

# The server factory's logger, as before the monitor had a module of its own (what operators
# grep for health lines).
log = logging.getLogger("stello.serving.server")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

# Whether the probe's transaction is read-only: on a standby (a failover onto one not yet
# promoted) and under default_transaction_read_only, where every write is refused.
READ_ONLY_PROBE = "SELECT current_setting('transaction_read_only') = 'on'"
UNREACHABLE = "the database is unreachable"
READ_ONLY = REFUSALS[asyncpg.ReadOnlySQLTransactionError]

PROBE_TIMEOUT_S = 5.0
"""Least time a probe (opening the connection included) gets before the database counts as
out of reach: an event loop busy with a burst of calls answers seconds late (explore11 F2)
without the database being at fault."""
RENEW_EVERY = 15
"""Checks over one connection before it is opened anew: a database's or role's setting
(``ALTER DATABASE ... SET default_transaction_read_only``) reaches new sessions only, as it
reaches the pool's connections as they are renewed."""

Connect = Callable[[], Awaitable[asyncpg.Connection]]


class HealthMonitor:
    """Keeps grpc health in step with the database: SERVING only while it answers, accepts
    writes and holds every migration this release has (each checked every interval, so a
    `stello migrate` or the end of a read-only spell needs no restart).

    It checks over a connection of its own (`connect`, by default one like the pool's),
    opened anew after a failure, while the database is read-only and every `RENEW_EVERY`
    checks; at the end of a read-only spell it has the pool's connections replaced. Every
    check also looks at the pool: all its connections in use is logged as the pool saturated
    (at most once per `OUTAGE_LOG_EVERY_S`), not as NOT_SERVING.
    """

    def __init__(
        self,
        servicer: health.aio.HealthServicer,
        services: tuple[str, ...],
        pool: asyncpg.Pool,
        interval_s: float,
        connect: Connect | None = None,
    ) -> None:
        self._servicer = servicer
        self._services = ("", *services)
        self._pool = pool
        self._interval = interval_s
        self._connect = connect or partial(connect_like, pool)
        self._con: asyncpg.Connection | None = None
        self._checks = 0
        """Checks made over `_con`."""
        self._saturation = WarnEvery(log, OUTAGE_LOG_EVERY_S)
        self._task: asyncio.Task[None] | None = None
        self.serving: bool | None = None
        self.condition: str | None = None
        """Why health is NOT_SERVING (None while SERVING)."""
        self.saturated = False
        """Whether every connection of the pool was in use at the last check."""

    def start(self) -> None:
        """Begin pinging in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="stello-health")

    async def stop(self) -> None:
        """Stop pinging, close the monitor's connection and report NOT_SERVING (shutdown)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self._close()
        await self._servicer.enter_graceful_shutdown()

    async def check_once(self) -> bool:
        """Probe the database now and publish the result."""
        condition = await self._probe()
        ok = condition is None
        if ok != self.serving or condition != self.condition:
            if self.condition == READ_ONLY and condition != READ_ONLY:
                # The pool's connections opened during the spell keep it (a database's
                # setting reaches new sessions only): every write on one would still be
                # refused. They are replaced as they are next acquired.
                await self._pool.expire_connections()
            if ok != self.serving:
                for name in self._services:
                    await self._servicer.set(name, SERVING if ok else NOT_SERVING)
            self.serving, self.condition = ok, condition
            if ok:
                log.info("health SERVING: the database answers")
            else:
                log.warning("health NOT_SERVING: %s", condition)
        self._look_at_pool()
        return ok

    def _look_at_pool(self) -> None:
        """Say so when every connection of the pool is in use (calls wait for one)."""
        pool = self._pool
        most = pool.get_max_size()
        saturated = pool.get_size() >= most and pool.get_idle_size() == 0
        if saturated:
            self._saturation.warning(
                "pool",
                "the database pool is saturated: all %d connections in use, calls wait for "
                "one (STELLO_DB_POOL_MAX_SIZE); not a health condition",
                most,
            )
        elif self.saturated:
            log.info("the database pool has idle connections again")
        self.saturated = saturated

    async def _probe(self) -> str | None:
        """Why the database cannot serve this service's calls now, or None."""
        try:
            async with asyncio.timeout(max(self._interval, PROBE_TIMEOUT_S)):
                con = await self._connection()
                if await con.fetchval(READ_ONLY_PROBE):
                    condition: str | None = READ_ONLY
                else:
                    missing = await pending(con)
                    condition = lacking(missing) if missing else None
        except Exception:  # any failure means "not ready"
            await self._close()
            return UNREACHABLE
        self._checks += 1
        if condition == READ_ONLY or self._checks >= RENEW_EVERY:
            await self._close()  # the next check sees what a new session sees
        return condition

    async def _connection(self) -> asyncpg.Connection:
        if self._con is None or self._con.is_closed():
            self._con = await self._connect()
            self._checks = 0
        return self._con

    async def _close(self) -> None:
        """Close the monitor's connection, if open (terminated when it does not close in
        time: it may be in the middle of a probe that timed out)."""
        con, self._con = self._con, None
        if con is None or con.is_closed():
            return
        try:
            await con.close(timeout=1.0)
        except Exception:  # closing a broken connection: drop it
            con.terminate()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.check_once()
