"""Retention (issue #38): a space's policy archives idle subtrees and deletes long-archived ones,
each root's subtree judged as a whole, in resumable batches, once per deployment.

Time moves through the database: tests write `last_active_at` and `archived_at` into the past
(the sweep reads the database's clock), never sleep.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import asyncpg
import grpc
import pytest

from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.tree.v1 import tree_pb2
from tests.support.fixtures import RunningServer, ServerStarter, TestSpace
from tests.support.history import seed_history
from tests.support.rows import space_rows
from tests.tree.conftest import TreeClient, erased, open_tree
from tree_service.app import create_app, create_retention
from tree_service.config import TreeSettings
from tree_service.retention.repository import Cursor
from tree_service.retention.wire import page_token

pytestmark = pytest.mark.sql

ARCHIVE = common_pb2.RetentionAction.KIND_ARCHIVE
DELETE = common_pb2.RetentionAction.KIND_DELETE

IDLE = """
UPDATE sessions SET last_active_at = now() - make_interval(days => $3)
WHERE space_id = $1 AND id = ANY ($2::uuid[])
"""
ARCHIVED_AGO = """
UPDATE sessions SET archived_at = now() - make_interval(days => $3)
WHERE space_id = $1 AND id = ANY ($2::uuid[])
"""
# A turn's lease ($4, its token) on a session, live for $3 seconds from now (negative:
# expired), as storage's BeginTurn takes it (the token a parameter: Citus refuses a
# volatile function in an UPDATE of a distributed table).
LEASE = """
UPDATE sessions SET turn_token = $4, turn_expires_at = now() + make_interval(secs => $3)
WHERE space_id = $1 AND id = $2
"""
CREATED = "SELECT created_at FROM sessions WHERE space_id = $1 AND id = $2"
STATUSES = "SELECT id, status FROM sessions WHERE space_id = $1 AND provisional_until IS NULL"
EVENTS = "SELECT kind, session_id FROM space_events WHERE space_id = $1 ORDER BY position"
CURSOR = "SELECT cursor_id FROM retention_policies WHERE space_id = $1"


async def idle(pool: asyncpg.Pool, space: TestSpace, days: int, *ids: str) -> None:
    """Make the sessions' last turn `days` ago."""
    await pool.execute(IDLE, space.id, [uuid.UUID(i) for i in ids], days)


async def archived_ago(pool: asyncpg.Pool, space: TestSpace, days: int, *ids: str) -> None:
    """Make the sessions' archival `days` ago."""
    await pool.execute(ARCHIVED_AGO, space.id, [uuid.UUID(i) for i in ids], days)


async def statuses(pool: asyncpg.Pool, space: TestSpace) -> dict[str, str]:
    """Every visible session's status, by id."""
    return {str(r["id"]): r["status"] for r in await pool.fetch(STATUSES, space.id)}


async def put_policy(tree: TreeClient, **days: int) -> common_pb2.RetentionPolicy:
    reply = await tree.stub.PutRetention(
        tree_pb2.PutRetentionRequest(
            space_id=tree.space.sid, policy=common_pb2.RetentionPolicy(**days)
        )
    )
    policy: common_pb2.RetentionPolicy = reply.policy
    return policy


async def apply(tree: TreeClient, **fields: Any) -> tree_pb2.ApplyRetentionResponse:
    reply: tree_pb2.ApplyRetentionResponse = await tree.stub.ApplyRetention(
        tree_pb2.ApplyRetentionRequest(space_id=tree.space.sid, **fields)
    )
    return reply


async def pin(tree: TreeClient, session_id: str, pinned: bool = True) -> bool:
    reply = await tree.stub.SetPinned(
        tree_pb2.SetPinnedRequest(space_id=tree.space.sid, session_id=session_id, pinned=pinned)
    )
    return bool(reply.pinned)


def kinds(reply: tree_pb2.ApplyRetentionResponse) -> list[tuple[str, int]]:
    """(root id, kind) of each action."""
    return [(a.root_id, a.kind) for a in reply.actions]


async def family(tree: TreeClient) -> tuple[str, str, str]:
    """A root, its child and grandchild: their ids."""
    root = await tree.create(label="root")
    child = await tree.child(root.id, label="child")
    grandchild = await tree.child(child.id, label="grandchild")
    return root.id, child.id, grandchild.id


class TestArchive:
    async def test_idle_subtrees_are_archived(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A subtree idle past archive_after_days has every session archived (with their
        SESSION_ARCHIVED events); a subtree used since stays active."""
        old = await family(tree)
        recent = await family(tree)
        await idle(pool, space, 40, *old)
        await idle(pool, space, 5, *recent)
        await put_policy(tree, archive_after_days=30)
        reply = await apply(tree)
        assert kinds(reply) == [(old[0], ARCHIVE)] and reply.done
        assert sorted(reply.actions[0].session_ids) == sorted(old)
        found = await statuses(pool, space)
        assert [found[i] for i in old] == ["archived"] * 3
        assert [found[i] for i in recent] == ["active"] * 3
        events = [(r["kind"], str(r["session_id"])) for r in await pool.fetch(EVENTS, space.id)]
        assert sorted(e for e in events if e[0] == "session_archived") == sorted(
            ("session_archived", i) for i in old
        )

    async def test_an_active_child_keeps_its_root(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A subtree is judged as a whole: a grandchild used yesterday keeps its idle root and
        child active."""
        root, child, grandchild = await family(tree)
        await idle(pool, space, 400, root, child)
        await idle(pool, space, 1, grandchild)
        await put_policy(tree, archive_after_days=30)
        assert kinds(await apply(tree)) == []
        assert set((await statuses(pool, space)).values()) == {"active"}

    async def test_a_pinned_session_keeps_its_subtree(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A pinned session exempts its whole subtree; unpinned, the subtree goes its way."""
        root, child, grandchild = await family(tree)
        await idle(pool, space, 400, root, child, grandchild)
        await put_policy(tree, archive_after_days=30)
        assert await pin(tree, child)
        assert kinds(await apply(tree)) == []
        assert not await pin(tree, child, pinned=False)
        assert kinds(await apply(tree)) == [(root, ARCHIVE)]

    async def test_a_turn_in_progress_keeps_its_session_active(
        self, one_at_a_time: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A session with a turn running in an idle subtree is left active (archived, the
        turn would fail SESSION_ARCHIVED and lose the user's message); the rest of the
        subtree is archived, batch after batch of one session: the leased one neither stops
        the subtree's archive at it nor takes a batch's place. A lease past its expiry is no
        turn. Judging the subtree stays a probe of its facts (a look for a lease in it
        would read every active session of it)."""
        running = await family(one_at_a_time)
        stale = await family(one_at_a_time)
        await idle(pool, space, 40, *running, *stale)
        await pool.execute(LEASE, space.id, uuid.UUID(running[1]), 60, uuid.uuid4())
        await pool.execute(LEASE, space.id, uuid.UUID(stale[1]), -60, uuid.uuid4())
        await put_policy(one_at_a_time, archive_after_days=30)
        assert (await apply(one_at_a_time)).done
        found = await statuses(pool, space)
        assert [found[i] for i in running] == ["archived", "active", "archived"]
        assert [found[i] for i in stale] == ["archived"] * 3


class TestEvents:
    async def test_a_pin_and_a_policy_write_their_events(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """SetPinned that changes the flag writes SESSION_UPDATED naming the session (a no-op
        writes none); PutRetention writes RETENTION_POLICY_PUT naming no session
        (explore2 finding 10)."""
        _, child, _ = await family(tree)
        before = len(await pool.fetch(EVENTS, space.id))

        async def since() -> list[tuple[str, str | None]]:
            rows = (await pool.fetch(EVENTS, space.id))[before:]
            return [(r["kind"], r["session_id"] and str(r["session_id"])) for r in rows]

        assert await pin(tree, child)
        assert await pin(tree, child)
        assert not await pin(tree, child, pinned=False)
        assert await since() == [("session_updated", child)] * 2
        await put_policy(tree, archive_after_days=30)
        assert (await since())[2:] == [("retention_policy_put", None)]


class TestUnarchive:
    async def test_unarchiving_restarts_the_idle_clock(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A subtree retention archived and the user unarchived is not archived again by the
        next pass: Unarchive counts as activity (explore2 finding 11); a no-op Unarchive of
        an active session moves nothing."""
        root, child, grandchild = await family(tree)
        await idle(pool, space, 40, root, child, grandchild)
        await put_policy(tree, archive_after_days=3, delete_after_days=3)
        assert kinds(await apply(tree)) == [(root, ARCHIVE)]
        await tree.stub.Unarchive(tree_pb2.UnarchiveRequest(space_id=space.sid, session_id=root))
        assert kinds(await apply(tree, dry_run=True)) == []
        assert kinds(await apply(tree)) == []
        found = await statuses(pool, space)
        assert (found[root], found[child]) == ("active", "archived")
        await idle(pool, space, 40, root)
        await tree.stub.Unarchive(tree_pb2.UnarchiveRequest(space_id=space.sid, session_id=root))
        assert kinds(await apply(tree, dry_run=True)) == [(root, ARCHIVE)]


class TestDelete:
    async def test_long_archived_subtrees_are_deleted(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A subtree archived past delete_after_days is deleted through DeleteSubtree's path:
        hidden at once with its SUBTREE_DELETED event, then erased (no row left); one
        archived recently stays."""
        old, recent = await family(tree), await family(tree)
        await idle(pool, space, 400, *old, *recent)
        await put_policy(tree, archive_after_days=30, delete_after_days=90)
        await apply(tree)
        await archived_ago(pool, space, 100, *old)
        await archived_ago(pool, space, 10, *recent)
        reply = await apply(tree)
        assert kinds(reply) == [(old[0], DELETE)]
        assert list(reply.actions[0].session_ids) == list(old)
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await tree.node(old[0])
        assert gone.value.code() is grpc.StatusCode.NOT_FOUND
        await erased(pool)
        remaining = await pool.fetch("SELECT id FROM sessions WHERE space_id = $1", space.id)
        assert sorted(str(r["id"]) for r in remaining) == sorted(recent)
        events = [(r["kind"], str(r["session_id"])) for r in await pool.fetch(EVENTS, space.id)]
        assert ("subtree_deleted", old[0]) in events

    async def test_a_deleted_subtree_leaves_no_row(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A subtree retention deletes leaves nothing of it in any table of the space (its
        records, slots and background jobs included) once erased; only events name its
        ids, and a subtree kept is whole."""
        old, kept = await family(tree), await family(tree)
        for session in (*old, *kept):
            async with pool.acquire() as con:
                await seed_history(con, space.id, uuid.UUID(session), 3)
            await pool.execute(
                "INSERT INTO session_slots (space_id, session_id, memory) VALUES ($1, $2, 'm')",
                space.id,
                uuid.UUID(session),
            )
            await pool.execute(
                "INSERT INTO background_jobs (space_id, session_id, kind, status)"
                " VALUES ($1, $2, 'fold', 'done')",
                space.id,
                uuid.UUID(session),
            )
        await idle(pool, space, 400, *old)
        await put_policy(tree, archive_after_days=30, delete_after_days=90)
        await apply(tree)
        await archived_ago(pool, space, 100, *old)
        assert kinds(await apply(tree)) == [(old[0], DELETE)]
        await erased(pool)
        rows = await space_rows(pool, space.id)
        left = {
            table: [row for row in found if any(i in row for i in old)]
            for table, found in rows.items()
            if table != "space_events"
        }
        assert {table: found for table, found in left.items() if found} == {}
        assert sum(any(i in row for i in kept) for row in rows["records"]) == 9
        assert sum(any(i in row for i in kept) for row in rows["session_slots"]) == 3

    async def test_an_active_child_keeps_an_archived_root(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A root archived long ago stays while a session of its subtree is active."""
        root, _, _ = await family(tree)
        await tree.stub.Archive(tree_pb2.ArchiveRequest(space_id=space.sid, session_id=root))
        await archived_ago(pool, space, 1000, root)
        await put_policy(tree, delete_after_days=90)
        assert kinds(await apply(tree)) == []
        assert (await tree.node(root)).status == common_pb2.SESSION_STATUS_ARCHIVED


class TestSweep:
    async def test_a_dry_run_changes_nothing(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A dry run lists what would be archived and deleted, by root (no session ids: it
        reads no subtree, as common.proto's RetentionAction says), and no row of the space
        changes (not even the sweep's cursor)."""
        to_archive, to_delete = await family(tree), await family(tree)
        await idle(pool, space, 400, *to_archive, *to_delete)
        await put_policy(tree, archive_after_days=30, delete_after_days=90)
        for session in to_delete:
            await tree.stub.Archive(tree_pb2.ArchiveRequest(space_id=space.sid, session_id=session))
        await archived_ago(pool, space, 100, *to_delete)
        before = await space_rows(pool, space.id)
        reply = await apply(tree, dry_run=True)
        assert kinds(reply) == [(to_archive[0], ARCHIVE), (to_delete[0], DELETE)]
        assert [a.label for a in reply.actions] == ["root", "root"]
        assert [list(a.session_ids) for a in reply.actions] == [[], []]
        assert await space_rows(pool, space.id) == before

    async def test_a_page_token_is_only_for_a_dry_run(
        self, tree: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A real run given a dry run's page token is INVALID_ARGUMENT naming page_token and
        changes nothing: it ignored the token and archived every root, those before the
        page the client meant included."""
        first, second = await family(tree), await family(tree)
        await idle(pool, space, 400, *first, *second)
        await put_policy(tree, archive_after_days=30)
        # The token of the page after the first root, as a dry run of more roots answers it.
        created = await pool.fetchval(CREATED, space.id, uuid.UUID(first[0]))
        token = page_token(Cursor(created, uuid.UUID(first[0])))
        before = await space_rows(pool, space.id)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await apply(tree, page_token=token)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == ["page_token"]
        assert "dry_run" in (caught.value.details() or "")
        assert await space_rows(pool, space.id) == before

    async def test_another_space_is_untouched(
        self,
        tree: TreeClient,
        other_tree: TreeClient,
        pool: asyncpg.Pool,
        space: TestSpace,
        other_space: TestSpace,
    ) -> None:
        """Applying one space's policy changes nothing of another space's idle sessions."""
        mine, theirs = await family(tree), await family(other_tree)
        await idle(pool, space, 400, *mine)
        await idle(pool, other_space, 400, *theirs)
        await put_policy(tree, archive_after_days=1)
        before = await space_rows(pool, other_space.id)
        assert kinds(await apply(tree)) == [(mine[0], ARCHIVE)]
        assert await space_rows(pool, other_space.id) == before

    async def test_without_a_policy(self, tree: TreeClient) -> None:
        """No policy: GetRetention answers none, ApplyRetention FAILED_PRECONDITION
        NO_RETENTION_POLICY; days out of range are INVALID_ARGUMENT naming the field."""
        reply = await tree.stub.GetRetention(tree_pb2.GetRetentionRequest(space_id=tree.space.sid))
        assert not reply.HasField("policy")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await apply(tree)
        assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(caught.value) == "NO_RETENTION_POLICY"
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await put_policy(tree, archive_after_days=0)
        assert [v.field for v in field_violations(bad.value)] == ["policy.archive_after_days"]

    async def test_an_unset_policy_is_refused(self, tree: TreeClient) -> None:
        """PutRetention without `policy` is INVALID_ARGUMENT naming it (PutConfig requires its
        config too) and stores nothing: it stored an empty policy, so GetRetention answered a
        set, empty policy the client never gave and ApplyRetention no longer said
        NO_RETENTION_POLICY."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await tree.stub.PutRetention(tree_pb2.PutRetentionRequest(space_id=tree.space.sid))
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(caught.value)] == ["policy"]
        reply = await tree.stub.GetRetention(tree_pb2.GetRetentionRequest(space_id=tree.space.sid))
        assert not reply.HasField("policy")
        with pytest.raises(grpc.aio.AioRpcError) as unset:
            await apply(tree)
        assert error_info_reason(unset.value) == "NO_RETENTION_POLICY"


@pytest.fixture(name="one_at_a_time")
async def _one_at_a_time(
    start_server: ServerStarter, space: TestSpace
) -> AsyncIterator[TreeClient]:
    """A tree server whose retention archives one session per batch."""
    config = TreeSettings(retention_batch_sessions=1)
    running: RunningServer = await start_server(partial(create_app, config=config))
    async for client in open_tree(running, space):
        yield client


# A root's subtree of $3 children, each active now (a seeded fixture, not RPCs).
@pytest.fixture(name="batched")
async def _batched(start_server: ServerStarter, space: TestSpace) -> AsyncIterator[TreeClient]:
    """A tree server whose retention judges 2 roots per batch."""
    config = TreeSettings(retention_batch=2)
    running: RunningServer = await start_server(partial(create_app, config=config))
    async for client in open_tree(running, space):
        yield client


class TestBatches:
    async def test_a_killed_sweep_resumes(
        self, batched: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """Each batch is its own transaction that saves where the sweep stands: a sweep
        stopped after its first batch (as a crash between batches leaves it) goes on from
        there — the next run judges only the roots after it — and the pass then ends."""
        roots = [(await batched.create(label=f"r{i}")).id for i in range(5)]
        await idle(pool, space, 400, *roots)
        await put_policy(batched, archive_after_days=30)
        first = await apply(batched, max_batches=1)
        assert [a.root_id for a in first.actions] == roots[:2] and not first.done
        assert str(await pool.fetchval(CURSOR, space.id)) == roots[1]
        rest = await apply(batched)
        assert [a.root_id for a in rest.actions] == roots[2:] and rest.done
        assert await pool.fetchval(CURSOR, space.id) is None
        assert set((await statuses(pool, space)).values()) == {"archived"}

    async def test_an_empty_policy_applies_nothing(
        self, batched: TreeClient, pool: asyncpg.Pool, space: TestSpace
    ) -> None:
        """A policy put with neither step (`stello retention set --none`) expires nothing:
        ApplyRetention, run or dry, reports no action and a finished pass at once, and no row
        of the space changes (on main it walked every root in batches, saving the sweep's
        cursor and last pass, and answered `done` false after `max_batches` batches)."""
        roots = [(await batched.create(label=f"r{i}")).id for i in range(5)]
        await idle(pool, space, 400, *roots)
        assert await put_policy(batched) == common_pb2.RetentionPolicy()
        before = await space_rows(pool, space.id)
        run = await apply(batched, max_batches=1)
        assert list(run.actions) == [] and run.done
        dry = await apply(batched, dry_run=True)
        assert list(dry.actions) == [] and dry.done and dry.next_page_token == ""
        assert await space_rows(pool, space.id) == before

    async def test_one_sweep_per_space_across_replicas(
        self, pool: asyncpg.Pool, batched: TreeClient, space: TestSpace
    ) -> None:
        """Two replicas' sweeps at once share the space's batches (the policy row is held
        per batch, another replica skips it): every idle root is archived exactly once."""
        roots = [(await batched.create(label=f"r{i}")).id for i in range(7)]
        await idle(pool, space, 400, *roots)
        await put_policy(batched, archive_after_days=30)
        config = TreeSettings(retention_batch=1)
        replicas = [create_retention(pool, config), create_retention(pool, config)]
        sweeps = (replica.sweep_space(space.id) for replica in replicas)
        changed = sum(await asyncio.gather(*sweeps))
        for replica in replicas:  # a replica that skipped a held batch comes round again
            changed += await replica.sweep_space(space.id)
        assert changed == len(roots)  # no root judged by both
        rows = await pool.fetch(EVENTS, space.id)
        archived = [str(r["session_id"]) for r in rows if r["kind"] == "session_archived"]
        assert sorted(archived) == sorted(roots)  # one SESSION_ARCHIVED each, none twice
