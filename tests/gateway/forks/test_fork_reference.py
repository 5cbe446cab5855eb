"""Fork INHERIT by reference through the gateway (DESIGN §4.4): what a fork writes, what a
delete of its source leaves, forks racing deletes, and the reads built on records (a
COMPRESS fork of a child, Consolidate, a turn)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from tests.gateway.conftest import Stack, StackMaker, record
from tests.gateway.lineage_support import ids_left, records_rows
from tests.gateway.turns_support import SpyProvider, answer, send
from tests.support.fixtures import MakeSession
from tests.support.history import RowInserts, end_other_backends, seed_history
from tests.tree.conftest import erased
from tree_service.unit import TreeRepository

pytestmark = pytest.mark.sql

INHERIT = common_pb2.FORK_CONTEXT_INHERIT
COMPRESS = common_pb2.FORK_CONTEXT_COMPRESS


def shown(records: list[common_pb2.Record]) -> list[tuple[int, str, bool]]:
    return [(r.seq, r.content, r.inherited) for r in records]


async def delete(stack: Stack, session_id: str) -> None:
    await stack.tree.DeleteSubtree(
        tree_pb2.DeleteSubtreeRequest(space_id=stack.space.sid, session_id=session_id)
    )


async def delete_erased(stack: Stack, pool: asyncpg.Pool, session_id: str) -> None:
    """DeleteSubtree, then wait until the erasure job (DESIGN §4.8) has erased what it hid:
    the hand-over of the rows forks still read happens there, in the background."""
    await delete(stack, session_id)
    await erased(pool)


async def anchored_source(stack: Stack, count: int) -> tuple[str, str]:
    """A root (the topology anchor) and a child of it with `count` records (the source)."""
    root = await stack.root(label="anchor")
    source = await stack.fork(root.id, label="source")
    texts = [f"s{i}" for i in range(count)]
    await stack.append(
        source.id, *[record(("user", "assistant")[i % 2], t) for i, t in enumerate(texts)]
    )
    return root.id, source.id


class TestCost:
    @pytest.mark.slow
    @pytest.mark.plain_postgres(
        "counts the rows inserted in the statistics of the database it connects to; on Citus "
        "the coordinator inserts none, the workers' shards do"
    )
    async def test_a_fork_of_10000_records_inserts_only_its_own(
        self, stack: Stack, pool: asyncpg.Pool, direct_database_url: str
    ) -> None:
        """Counted in `n_tup_ins` of the records table: the opening record only, or none."""
        root = await stack.root(label="long")
        async with pool.acquire() as con:
            await seed_history(con, stack.space.id, uuid.UUID(root.id), 10_000)
        counter = await asyncpg.connect(direct_database_url)
        try:
            inserts = RowInserts(counter, "records")
            before = await inserts.count()
            opened = await stack.fork(root.id, "opened", context=INHERIT, prompt="hello")
            after_opened = await inserts.count()
            bare = await stack.fork(root.id, "bare", context=INHERIT, inherit_until_seq=5_000)
            after_bare = await inserts.count()
        finally:
            await counter.close()
        assert (after_opened - before, after_bare - after_opened) == (1, 0)
        newest = await stack.gw.ListRecords(
            agent_pb2.ListRecordsRequest(
                space_id=stack.space.sid, session_id=opened.id, limit=2, newest_first=True
            )
        )
        assert [(r.seq, r.inherited) for r in newest.records] == [(10_000, True), (10_001, False)]
        assert newest.records[1].content == "hello"
        oldest = await stack.gw.ListRecords(
            agent_pb2.ListRecordsRequest(space_id=stack.space.sid, session_id=bare.id, limit=1)
        )
        assert [(r.seq, r.inherited) for r in oldest.records] == [(1, True)]


class TestProgress:
    async def test_get_session_names_the_cut(self, stack: Stack) -> None:
        """GetSession's progress.inherited_until_seq is the fork's cut (its own records come
        after it), a fork of a fork's too; 0 for a session that inherits nothing."""
        _, source = await anchored_source(stack, 6)
        fork = await stack.fork(source, "fork", context=INHERIT, inherit_until_seq=4)
        await stack.append(fork.id, record("user", "own"))
        again = await stack.fork(fork.id, "again", context=INHERIT)
        sessions = (source, fork.id, again.id)
        cuts = [(await stack.view(s)).progress.inherited_until_seq for s in sessions]
        assert cuts == [0, 4, 5]
        assert [r.seq for r in await stack.records(fork.id) if not r.inherited] == [5]


class TestErasure:
    async def test_deleting_a_source_keeps_its_forks_records(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """Three surviving forks at different cuts: their records unchanged, no row carries
        the source's id, and the records table holds only what someone shows."""
        root, source = await anchored_source(stack, 12)
        forks = []
        for until in (3, 7, 10):
            fork = await stack.fork(
                source,
                f"cut {until}",
                context=INHERIT,
                inherit_until_seq=until,
                topology_parent_id=root,
            )
            await stack.append(fork.id, record("user", f"own of {until}"))
            forks.append(fork.id)
        before = {f: shown(await stack.records(f)) for f in forks}
        await delete_erased(stack, pool, source)
        assert {f: shown(await stack.records(f)) for f in forks} == before
        async with pool.acquire() as con:
            assert await ids_left(con, stack.space.id, [source]) == []
            assert await records_rows(con, stack.space.id) == 10 + 3

    async def test_rows_kept_for_another_fork_go_with_it(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """The heir keeps rows only another fork shows; once that fork is gone they go too."""
        root, source = await anchored_source(stack, 10)
        heir = await stack.fork(source, "heir", context=INHERIT, topology_parent_id=root)
        other = await stack.fork(
            source, "other", context=INHERIT, inherit_until_seq=5, topology_parent_id=root
        )
        await stack.storage.TrimRecords(
            storage_pb2.TrimRecordsRequest(
                space_id=stack.space.sid, session_id=heir.id, keep_recent=2
            )
        )
        await delete_erased(stack, pool, source)
        assert [r.seq for r in await stack.records(heir.id)] == [9, 10]
        assert [r.seq for r in await stack.records(other.id)] == [1, 2, 3, 4, 5]
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 7
        await delete_erased(stack, pool, other.id)
        assert [r.seq for r in await stack.records(heir.id)] == [9, 10]
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 2

    async def test_a_swept_provisional_heir_gives_up_what_it_held(
        self, stack: Stack, pool: asyncpg.Pool, make_session: MakeSession
    ) -> None:
        """Forks whose sagas never committed can be the only readers of a deleted source; the
        one that took its rows over is swept like any other, and nothing is left behind."""
        root, source = await anchored_source(stack, 4)
        held = []
        for until in (4, 2):
            # Provisional for an hour: only the explicit sweep below removes them.
            child = await make_session(parent=uuid.UUID(root), provisional=True)
            op = storage_pb2.Operation.InheritRecordsOp(
                session_id=str(child), source_id=source, until_seq=until
            )
            await stack.storage.Transact(
                storage_pb2.TransactRequest(
                    space_id=stack.space.sid,
                    operations=[storage_pb2.Operation(inherit_records=op)],
                )
            )
            held.append(child)
        await delete_erased(stack, pool, source)
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 4
        swept = await TreeRepository(pool).sweeps.sweep(0.001, 1000, wait=True)
        assert swept is not None and set(held) <= {s.id for s in swept}
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 0
            assert await ids_left(con, stack.space.id, [source, *held]) == []

    async def test_the_heir_is_the_fork_that_reaches_highest_even_provisional(
        self, stack: Stack, pool: asyncpg.Pool, make_session: MakeSession
    ) -> None:
        """A visible fork at a lower cut than a provisional one: the rows go to the one that
        reaches highest (they lie on its line only), then on to the visible one when it is
        swept; neither's records change on the way."""
        root, source = await anchored_source(stack, 10)
        low = await stack.fork(
            source, "low", context=INHERIT, inherit_until_seq=5, topology_parent_id=root
        )
        await stack.append(low.id, record("user", "own of low"))
        high = await make_session(parent=uuid.UUID(root), provisional=True)
        op = storage_pb2.Operation.InheritRecordsOp(session_id=str(high), source_id=source)
        await stack.storage.Transact(
            storage_pb2.TransactRequest(
                space_id=stack.space.sid, operations=[storage_pb2.Operation(inherit_records=op)]
            )
        )
        before = shown(await stack.records(low.id))
        await delete_erased(stack, pool, source)
        assert shown(await stack.records(low.id)) == before
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 10 + 1
        await TreeRepository(pool).sweeps.sweep(0.001, 1000, wait=True)
        assert shown(await stack.records(low.id)) == before
        async with pool.acquire() as con:
            assert await records_rows(con, stack.space.id) == 5 + 1
            assert await ids_left(con, stack.space.id, [source, high]) == []


@pytest.fixture(name="all_statements")
async def _all_statements(
    stack: Stack, pool: asyncpg.Pool, direct_database_url: str
) -> AsyncIterator[asyncpg.Connection]:
    """A connection on a database whose sessions record nested statements too
    (pg_stat_statements.track = all), reset afterwards."""
    con = await asyncpg.connect(direct_database_url)
    preload = await con.fetchval("SHOW shared_preload_libraries")
    if "pg_stat_statements" not in preload:
        await con.close()
        pytest.skip("this server does not preload pg_stat_statements (the embedded one does)")
    name = await con.fetchval("SELECT current_database()")
    await con.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await con.execute(f"ALTER DATABASE \"{name}\" SET pg_stat_statements.track = 'all'")
    await end_other_backends(con)
    try:
        yield con
    finally:
        await con.execute(f'ALTER DATABASE "{name}" RESET pg_stat_statements.track')
        await end_other_backends(con)
        await con.close()


# The statements run inside functions (the hand-over), without PostgreSQL's own
# referential-integrity checks and actions (`... FROM ONLY ...`, one per row a key
# change touches: they follow the rows moved, not the statements).
# The statements run inside others, but not the bodies of stello_search_grams (migration
# 0019) and stello_search_text (0042: no longer one expression, so PostgreSQL runs it as a
# statement of its own, not inlined): it runs them once per row it writes for the row's
# generated search_vector, so a hand-over that repoints rows runs them once per row moved,
# not per statement. Nor the body of stello_label_vector (0043: no longer inlined either),
# which the label index runs for each session row written: the forks that lose their
# source (UNSOURCE) are one row each.
NESTED_CALLS = """
SELECT COALESCE(sum(calls), 0)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND NOT toplevel
  AND query NOT LIKE '%FROM ONLY %' AND query NOT LIKE '%regexp_matches(content%'
  AND query NOT LIKE '%AS w(wide)%' AND query NOT LIKE '%AS s(searched)%'
"""


class TestStatements:
    @pytest.mark.plain_postgres(
        "counts the statements run inside stello_release_records in the coordinator's "
        "pg_stat_statements; on Citus the function runs on the space's worker"
    )
    async def test_a_delete_runs_as_many_statements_for_1_or_5_forks(
        self, stack: Stack, pool: asyncpg.Pool, all_statements: asyncpg.Connection
    ) -> None:
        """The hand-over is set-based: the statements inside it, run by the delete and the
        erasure job's batch that erases the source, do not grow with the number of forks
        that read the deleted source."""
        counts = []
        await erased(pool)  # what earlier tests left hidden goes before the counting
        for forks in (1, 5):
            root, source = await anchored_source(stack, 6)
            for i in range(forks):
                await stack.fork(
                    source,
                    f"f{i}",
                    context=INHERIT,
                    inherit_until_seq=2 + i % 4,
                    topology_parent_id=root,
                )
            # Leftover provisional sessions of earlier tests, swept now rather than by the
            # tree's periodic sweep (which runs the same hand-over) while this delete counts.
            await TreeRepository(pool).sweeps.sweep(0, 1000, wait=True)
            await all_statements.execute("SELECT pg_stat_statements_reset()")
            await delete_erased(stack, pool, source)
            counts.append(await all_statements.fetchval(NESTED_CALLS))
        assert counts[0] > 0
        assert counts[0] == counts[1], counts


async def fork_retrying(stack: Stack, source: str, label: str, **fields: Any) -> str:
    """Fork as a client should under load: a DEADLINE_EXCEEDED saga (nothing made visible)
    is retried with the same request_id; an ABORTED one (swept on every attempt) with a new
    one, as its message says."""
    request_id = uuid.uuid4().hex
    for attempt in range(4):
        try:
            fork = await stack.fork(source, label, request_id=request_id, **fields)
        except grpc.aio.AioRpcError as error:
            retried = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED)
            if error.code() not in retried or attempt == 3:
                raise
            if error.code() is grpc.StatusCode.ABORTED:
                request_id = uuid.uuid4().hex
        else:
            return fork.id
    raise AssertionError("unreachable")


class TestRaces:
    @pytest.mark.slow
    async def test_forks_appends_and_deletes_at_once(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """20 concurrent forks (of the source and of forks), appends and deletes on one
        lineage: a fork either sees the source and keeps its history, or is NOT_FOUND; no
        row dangles and none leaks."""
        _, source = await anchored_source(stack, 50)
        anchors = [(await stack.root(label=f"anchor {n}")).id for n in range(10)]
        history = shown(await stack.records(source))[:40]
        expected = [(seq, text, True) for seq, text, _ in history]
        made: dict[str, list[tuple[int, str, bool]]] = {}
        deleted: list[str] = []
        rng = random.Random(16)
        some_made = asyncio.Event()

        async def chain(n: int) -> None:
            await asyncio.sleep(rng.random() * 0.05)
            anchor = anchors[n]
            fork = await fork_retrying(
                stack,
                source,
                f"f{n}",
                context=INHERIT,
                inherit_until_seq=40,
                topology_parent_id=anchor,
            )
            own = f"own {n}"
            await stack.append(fork, record("user", own))
            made[fork] = [*expected, (41, own, False)]
            if len(made) >= 3:
                some_made.set()
            if n % 3 == 0:
                grand = await fork_retrying(
                    stack,
                    fork,
                    f"g{n}",
                    context=INHERIT,
                    inherit_until_seq=40,
                    topology_parent_id=anchor,
                )
                made[grand] = list(expected)
            if n % 4 == 1:
                await delete(stack, fork)
                deleted.append(fork)
                del made[fork]

        async def appends() -> None:
            for i in range(3):
                await asyncio.sleep(rng.random() * 0.05)
                await stack.append(source, record("user", f"late {i}"))

        async def delete_source() -> None:
            # Amid the forks: some made before it, the rest racing it.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(some_made.wait(), 10)
            await delete(stack, source)
            deleted.append(source)

        tasks = [chain(n) for n in range(10)] + [appends(), appends(), delete_source()]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in results:
            if isinstance(outcome, grpc.aio.AioRpcError):
                assert outcome.code() is grpc.StatusCode.NOT_FOUND, outcome.details()
            else:
                assert outcome is None, outcome
        assert source in deleted and made
        # The erasure job hands the rows over in the background (and backs off while rows
        # it needs are locked, migration 0023): what it leaves is judged once it is done.
        await erased(pool)
        for session, rows in made.items():
            assert shown(await stack.records(session)) == rows, session
        async with pool.acquire() as con:
            assert await ids_left(con, stack.space.id, deleted) == []
            distinct = {text for rows in made.values() for _, text, _ in rows}
            assert await records_rows(con, stack.space.id) == len(distinct)


class TestReads:
    async def test_compress_fork_and_consolidate_of_a_child_read_its_inherited_records(
        self, make_stack: StackMaker
    ) -> None:
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "one")
        await send(stack, root.id, "two")
        child = await stack.fork(root.id, "child", context=INHERIT, inherit_until_seq=2)
        await send(stack, child.id, "three")
        lines = ["user: one", "assistant: echo: one", "user: three", "assistant: echo: three"]
        spy.then_helper(answer("memory"))
        await stack.gw.Consolidate(
            agent_pb2.ConsolidateRequest(space_id=stack.space.sid, session_id=child.id)
        )
        assert spy.calls[-1].messages[1].content.splitlines()[1:] == lines
        await stack.fork(child.id, "digest", context=COMPRESS)
        assert stack.summarizer.calls[-1] == ["one", "echo: one", "three", "echo: three"]
