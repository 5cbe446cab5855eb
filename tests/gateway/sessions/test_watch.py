"""WatchSpace (DESIGN §4.6): the retained events after a cursor, then live ones, by commit order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncGenerator
from typing import cast
from uuid import UUID, uuid4

import asyncpg
import grpc
import pytest

from agent_gateway.clients import Caller, StorageClient
from agent_gateway.forks.faults import FAULT_POINTS
from agent_gateway.sessions import watch as watch_module
from agent_gateway.sessions.watch import Watchers, WatchInput
from stello import validation
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import WATCH_CURSOR_METADATA, open_channel
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.serving.server import shutdown
from stello.settings import StelloSettings
from stello.storage.v1 import storage_pb2
from stello.tree.v1 import tree_pb2
from storage_service.app import create_purger
from storage_service.config import StorageSettings
from tests.gateway.conftest import (
    Backends,
    FakeSummarizer,
    GatewayStarter,
    Stack,
    StackMaker,
    close_stack,
    gateway_clients,
    new_id,
    open_stack,
    record,
    rpc_error,
)
from tests.gateway.probes import fork_request, seeded_source
from tests.gateway.processes import gateway_process
from tests.gateway.watching import Kind, Watch, kinds_of
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql


async def send(stack: Stack, session_id: str, content: str = "hi") -> None:
    """One echo turn."""
    await stack.gw.Send(
        agent_pb2.SendRequest(space_id=stack.space.sid, session_id=session_id, content=content)
    )


class TestStream:
    async def test_backlog_then_live_events(self, stack: Stack) -> None:
        """From cursor 0: the root's creation, then a turn's events as they commit."""
        root = await stack.root(label="r")
        watch = Watch(stack.gw, stack.space.sid, "0")
        try:
            assert kinds_of(await watch.take(1)) == [("EVENT_KIND_SESSION_COMMITTED", root.id)]
            await send(stack, root.id)
            events = await watch.take(2)
            assert kinds_of(events) == [
                ("EVENT_KIND_RECORDS_APPENDED", root.id),
                ("EVENT_KIND_TURN_COMMITTED", root.id),
            ]
            assert (events[0].first_seq, events[0].last_seq) == (1, 2)
            assert [int(e.cursor) for e in events] == [2, 3]
        finally:
            watch.close()

    async def test_unset_cursor_starts_at_the_present(self, stack: Stack) -> None:
        """Without a cursor only changes committed after the call started arrive."""
        old = await stack.root(label="old")
        watch = Watch(stack.gw, stack.space.sid)
        try:
            await asyncio.wait_for(watch.call.initial_metadata(), 10)  # its start is fixed
            new = await stack.root(label="new")
            assert kinds_of(await watch.take(1)) == [("EVENT_KIND_SESSION_COMMITTED", new.id)]
            assert old.id != new.id
        finally:
            watch.close()

    async def test_tree_writes_write_their_events(self, stack: Stack) -> None:
        """Fork, ref add/remove, label, config, pin, retention policy, archive, unarchive and
        delete, in order."""
        root = await stack.root(label="r")
        child = await stack.fork(root.id)
        other = await stack.root(label="other")
        ids = {"space_id": stack.space.sid}
        await stack.tree.AddRef(tree_pb2.AddRefRequest(**ids, from_id=other.id, to_id=child.id))
        await stack.tree.RemoveRef(
            tree_pb2.RemoveRefRequest(**ids, from_id=other.id, to_id=child.id)
        )
        await stack.tree.UpdateLabel(
            tree_pb2.UpdateLabelRequest(space_id=ids["space_id"], session_id=child.id, label="x")
        )
        await stack.tree.PutConfig(
            tree_pb2.PutConfigRequest(**ids, session_id=child.id, config=common_pb2.SessionConfig())
        )
        await stack.gw.PinSession(
            agent_pb2.PinSessionRequest(**ids, session_id=child.id, pinned=True)
        )
        await stack.gw.PutRetention(
            agent_pb2.PutRetentionRequest(
                **ids, policy=common_pb2.RetentionPolicy(archive_after_days=30)
            )
        )
        await stack.gw.Archive(agent_pb2.ArchiveRequest(**ids, session_id=child.id))
        await stack.gw.Archive(agent_pb2.ArchiveRequest(**ids, session_id=child.id))  # no-op
        await stack.gw.Unarchive(agent_pb2.UnarchiveRequest(**ids, session_id=child.id))
        await stack.gw.DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=stack.space.sid, session_id=root.id)
        )
        watch = Watch(stack.gw, stack.space.sid, "0")
        try:
            events = await watch.take(12)
        finally:
            watch.close()
        assert kinds_of(events) == [
            ("EVENT_KIND_SESSION_COMMITTED", root.id),
            ("EVENT_KIND_SESSION_COMMITTED", child.id),
            ("EVENT_KIND_SESSION_COMMITTED", other.id),
            ("EVENT_KIND_REF_ADDED", other.id),
            ("EVENT_KIND_REF_REMOVED", other.id),
            ("EVENT_KIND_SESSION_UPDATED", child.id),
            ("EVENT_KIND_CONFIG_PUT", child.id),
            ("EVENT_KIND_SESSION_UPDATED", child.id),
            ("EVENT_KIND_RETENTION_POLICY_PUT", ""),
            ("EVENT_KIND_SESSION_ARCHIVED", child.id),
            ("EVENT_KIND_SESSION_UNARCHIVED", child.id),
            ("EVENT_KIND_SUBTREE_DELETED", root.id),
        ]
        assert events[3].other_session_id == child.id
        assert list(events[-1].session_ids) == [root.id, child.id]

    async def test_resuming_loses_and_repeats_nothing(self, stack: Stack) -> None:
        """Cut after each event and resume with its cursor: the same events, each once."""
        root = await stack.root(label="r")
        for n in range(3):
            await send(stack, root.id, f"m{n}")
        everything = Watch(stack.gw, stack.space.sid, "0")
        try:
            expected = [e.cursor for e in await everything.take(7)]
        finally:
            everything.close()
        got: list[str] = []
        cursor = "0"
        while len(got) < len(expected):
            watch = Watch(stack.gw, stack.space.sid, cursor)
            try:
                event = await watch.next()
            finally:
                watch.close()
            got.append(event.cursor)
            cursor = event.cursor
        assert got == expected

    async def test_kinds_keep_only_those(self, stack: Stack) -> None:
        """`kinds` leaves the other kinds out; the cursor still passes them."""
        root = await stack.root(label="r")
        await send(stack, root.id)
        watch = Watch(stack.gw, stack.space.sid, "0", kinds=(Kind.EVENT_KIND_TURN_COMMITTED,))
        try:
            [event] = await watch.take(1)
        finally:
            watch.close()
        assert (Kind.Name(event.kind), event.cursor) == ("EVENT_KIND_TURN_COMMITTED", "3")


class TestStartCursor:
    async def test_the_initial_metadata_names_where_the_stream_starts(self, stack: Stack) -> None:
        """Before any event, `stello-watch-cursor` says the present (or the cursor given)."""
        await stack.root(label="before")
        now = Watch(stack.gw, stack.space.sid)
        given = Watch(stack.gw, stack.space.sid, "0")
        try:
            start = dict(await asyncio.wait_for(now.call.initial_metadata(), 10))
            assert start[WATCH_CURSOR_METADATA] == "1"
            assert dict(await given.call.initial_metadata())[WATCH_CURSOR_METADATA] == "0"
            after = await stack.root(label="after")  # no sleep: the start is known to be fixed
            assert kinds_of(await now.take(1)) == [("EVENT_KIND_SESSION_COMMITTED", after.id)]
            assert [e.cursor for e in await given.take(2)] == ["1", "2"]
        finally:
            now.close()
            given.close()

    async def test_a_refused_watch_names_no_start(self, stack: Stack) -> None:
        """A cursor beyond the space's newest event fails without a start cursor."""
        watch = Watch(stack.gw, stack.space.sid, "5")
        try:
            error = await watch.error()
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert WATCH_CURSOR_METADATA not in dict(await watch.call.initial_metadata())
        finally:
            watch.close()


class TestWake:
    async def test_a_write_through_the_gateway_wakes_the_poller(
        self, make_stack: StackMaker
    ) -> None:
        """With a 60 s poll interval, a CreateRoot through this gateway still arrives at once."""
        stack = await make_stack(watch_poll_interval_s=60)
        watch = Watch(stack.gw, stack.space.sid)
        try:
            await asyncio.wait_for(watch.call.initial_metadata(), 10)  # it joined the poller
            began = time.monotonic()
            root = await stack.root(label="r")
            [event] = await watch.take(1, within_s=20)
            assert event.session_id == root.id
            assert time.monotonic() - began < 10  # far below the interval
        finally:
            watch.close()


class TestRefusals:
    async def test_bad_cursor_and_kind_are_invalid(self, stack: Stack) -> None:
        """A cursor that is not one, or one beyond the space, and kind 0 name their fields."""
        for after, kinds, field in (
            ("x1", (), "after_cursor"),
            ("99", (), "after_cursor"),
            (None, (0,), "kinds[0]"),
        ):
            watch = Watch(stack.gw, stack.space.sid, after, kinds)
            error = await watch.error()
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert [v.field for v in field_violations(error)] == [field]

    async def test_an_unknown_kind_lists_the_kinds(self, stack: Stack) -> None:
        """A kind number no EventKind has (or 0) names the kinds (it said "must be a known
        EventKind"): all of them, in the message and in the field violation (whose
        description was cut at 200 bytes, before most kinds and "got 99")."""
        error = await Watch(stack.gw, stack.space.sid, None, (1, 99)).error()
        [violation] = field_violations(error)
        assert violation.field == "kinds[1]"
        listed = "must be one of session_committed, session_updated, session_archived, "
        assert violation.description.startswith(listed)
        assert violation.description.endswith(", metadata_changed, retention_policy_put, got 99")
        message = error.details() or ""
        assert message == f"kinds[1]: {violation.description}"

    async def test_many_unknown_kinds_list_the_kinds_once(self, stack: Stack) -> None:
        """Six unknown kinds list the kinds once, at the first, and the others point to it:
        each repeated the list, and six lists shared the detail's bytes, every one cut
        before most kinds and the number given."""
        error = await Watch(stack.gw, stack.space.sid, None, (1, 99, 98, 97, 96, 95, 94)).error()
        found = [(v.field, v.description) for v in field_violations(error)]
        assert found[0] == ("kinds[1]", validation.not_one_of(common_pb2.EventKind, 99))
        assert found[1:] == [
            (f"kinds[{i}]", f"must be one of the kinds listed for kinds[1], got {99 - i + 1}")
            for i in range(2, 7)
        ]

    @pytest.mark.parametrize(
        ("after", "description"),
        [
            pytest.param("", "set but empty: leave it unset to start at the present", id="empty"),
            pytest.param("x1", "leave it unset to start at the present", id="not-a-cursor"),
        ],
    )
    async def test_a_malformed_cursor_says_to_leave_it_unset(
        self, stack: Stack, after: str, description: str
    ) -> None:
        """An empty or malformed after_cursor is refused with a hint that unset means now."""
        error = await Watch(stack.gw, stack.space.sid, after).error()
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
        [violation] = field_violations(error)
        assert violation.field == "after_cursor"
        assert description in violation.description
        assert description in (error.details() or "")

    async def test_an_expired_cursor_is_refused(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """Once the purge passed a cursor, watching from it is FAILED_PRECONDITION."""
        root = await stack.root(label="r")
        await asyncio.sleep(0.05)
        await create_purger(pool, StorageSettings(event_retention_s=0.01)).run_once()
        await send(stack, root.id)
        error = await Watch(stack.gw, stack.space.sid, "0").error()
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "CURSOR_EXPIRED"
        watch = Watch(stack.gw, stack.space.sid, "1")
        try:
            assert [e.cursor for e in await watch.take(2)] == ["2", "3"]
        finally:
            watch.close()

    async def test_another_tenant_sees_nothing(
        self,
        stack: Stack,
        backends: Backends,
        other_space: TestSpace,
        summarizer: FakeSummarizer,
    ) -> None:
        """A watcher of another space gets none of this space's events, nor can it watch it."""
        other = await open_stack(backends, stack.gateway, other_space, summarizer)
        theirs = Watch(other.gw, other_space.sid, "0")
        try:
            root = await stack.root(label="mine")
            await send(stack, root.id)
            sentinel = await other.root(label="theirs")
            [first] = await theirs.take(1)
            assert first.session_id == sentinel.id
            error = await Watch(other.gw, stack.space.sid, "0").error()
            assert error.code() == grpc.StatusCode.NOT_FOUND
        finally:
            theirs.close()
            await close_stack(other)


class TestFailedSagas:
    @pytest.mark.parametrize("point", [p for p in FAULT_POINTS if p != "fork.after_commit"])
    async def test_a_fork_that_failed_writes_nothing(
        self,
        point: str,
        start_gateway: GatewayStarter,
        backends: Backends,
        space: TestSpace,
        summarizer: FakeSummarizer,
        stack: Stack,
    ) -> None:
        """A saga failing at each point before its commit leaves no event of its session."""

        class RaiseAt:
            async def hit(self, at: str) -> None:
                if at == point:
                    raise RuntimeError(f"injected fault at {at}")

        failing = await open_stack(
            backends, await start_gateway(faults=RaiseAt()), space, summarizer
        )
        try:
            source = await seeded_source(stack)
            await rpc_error(failing.gw.Fork(fork_request(stack, source, "rid")))
            sentinel = await stack.root(label="after")
        finally:
            await close_stack(failing)
        watch = Watch(stack.gw, space.sid, "0")
        try:
            events = await watch.take(3)
        finally:
            watch.close()
        assert kinds_of(events) == [
            ("EVENT_KIND_SESSION_COMMITTED", source),
            ("EVENT_KIND_RECORDS_APPENDED", source),
            ("EVENT_KIND_SESSION_COMMITTED", sentinel.id),
        ]


class TestSlowReaders:
    async def test_a_stalled_reader_neither_slows_writers_nor_misses_events(
        self, make_stack: StackMaker
    ) -> None:
        """While a reader stops reading, appends stay fast; later it gets every event in order."""
        stack = await make_stack(watch_ring_events=16)
        root = await stack.root(label="r")

        async def appends(count: int) -> float:
            began = time.perf_counter()
            for n in range(count):
                await stack.append(root.id, record("user", f"m{n}"))
            return (time.perf_counter() - began) / count

        alone = await appends(60)
        watch = Watch(stack.gw, stack.space.sid, "0")
        try:
            await watch.take(61)  # caught up, then it stops reading
            stalled = await appends(300)
            events = await watch.take(300, within_s=30)
        finally:
            watch.close()
        assert [int(e.cursor) for e in events] == list(range(62, 362))
        assert [e.first_seq for e in events] == list(range(61, 361))
        # Generous for a loaded 2-core box: a stalled reader costs writers nothing by design.
        assert stalled < alone * 3, (alone, stalled)


class TestAge:
    """A stream lives STELLO_GATEWAY_WATCH_MAX_AGE_S at most (explore15 F1: streams a client
    forgot without cancelling them kept the space's places of watches for good)."""

    async def test_a_stream_ends_unavailable_at_its_age(self, make_stack: StackMaker) -> None:
        """An idle stream ends UNAVAILABLE at its age, naming the setting and the resume."""
        stack = await make_stack(watch_max_age_s=1.0)
        await stack.root(label="r")
        watch = Watch(stack.gw, stack.space.sid, "0")
        began = time.monotonic()
        try:
            await watch.take(1)
            error = await watch.error()
        finally:
            watch.close()
        assert error.code() is grpc.StatusCode.UNAVAILABLE, error
        assert "STELLO_GATEWAY_WATCH_MAX_AGE_S" in (error.details() or "")
        assert "after_cursor" in (error.details() or "")
        assert time.monotonic() - began >= 1.0

    async def test_forgotten_streams_give_their_places_back(
        self, make_stack: StackMaker, settings: StelloSettings
    ) -> None:
        """The space's cap of watches filled by streams no one reads or cancels: a new watch
        is refused, then admitted once they reached their age."""
        stack = await make_stack(watch_max_age_s=1.0)
        forgotten = [
            Watch(stack.gw, stack.space.sid) for _ in range(settings.max_watches_per_space)
        ]
        try:
            for watch in forgotten:
                await asyncio.wait_for(watch.call.initial_metadata(), 10)
            refused = await Watch(stack.gw, stack.space.sid).error()
            assert error_info_reason(refused) == "SPACE_BUSY"
            await asyncio.sleep(1.0)
            admitted = Watch(stack.gw, stack.space.sid)
            deadline = time.monotonic() + 10
            while True:
                try:
                    await asyncio.wait_for(admitted.call.initial_metadata(), 10)
                    root = await stack.root(label="seen")
                    assert kinds_of(await admitted.take(1)) == [
                        ("EVENT_KIND_SESSION_COMMITTED", root.id)
                    ]
                    break
                except grpc.aio.AioRpcError as exc:  # not all of them had ended yet
                    assert error_info_reason(exc) == "SPACE_BUSY"
                    assert time.monotonic() < deadline, "the forgotten streams kept their places"
                    await asyncio.sleep(0.2)
                    admitted = Watch(stack.gw, stack.space.sid)
            admitted.close()
        finally:
            for watch in forgotten:
                watch.close()

    async def test_a_stream_whose_client_stopped_reading_is_ended(
        self,
        make_stack: StackMaker,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A stream whose sends wait on a client that reads nothing (its flow-control window
        full) cannot end at its age, being stuck in a send: the gateway stops serving it
        (its call cancelled, its place in the space's cap given back) once that send has
        waited BLOCKED_SEND_S past its age. The client is told nothing (it reads nothing;
        its connection's close ends the call). An idle stream ends UNAVAILABLE: above."""
        monkeypatch.setattr(watch_module, "BLOCKED_SEND_S", 0.5)
        caplog.set_level(logging.INFO)
        stack = await make_stack(watch_max_age_s=AGE_S)
        root = await stack.root(label="r")
        for _ in range(EVENTS // 50):  # written first: the stream starts behind them all
            await asyncio.gather(*(stack.append(root.id, record("user", "x")) for _ in range(50)))
        # No window growth (BDP probes): the stream's window stays at its first 64 KiB, which
        # about 900 events fill.
        options = [("grpc.http2.bdp_probe", 0)]
        async with grpc.aio.insecure_channel(stack.gateway.address, options=options) as channel:
            call = agent_pb2_grpc.AgentGatewayStub(channel).WatchSpace(
                agent_pb2.WatchSpaceRequest(space_id=stack.space.sid, after_cursor="0"),
                metadata=(("authorization", f"Bearer {stack.space.key}"),),
            )
            await asyncio.wait_for(call.initial_metadata(), 10)
            for _ in range(int((AGE_S + 10) / 0.1)):
                if ended(caplog):
                    break
                await asyncio.sleep(0.1)
            call.cancel()
        assert ended(caplog), [r.getMessage() for r in caplog.records]
        assert any("has not read for" in r.getMessage() for r in caplog.records)


def ended(caplog: pytest.LogCaptureFixture) -> bool:
    """Whether the gateway logged a WatchSpace call that ended CANCELLED (its access line)."""
    return any(
        "WatchSpace CANCELLED" in r.getMessage() for r in caplog.records if r.name == "stello.rpc"
    )


AGE_S = 2.0
EVENTS = 2_000


class TestRevocation:
    async def test_a_revoked_key_ends_its_stream_while_another_key_polls(
        self, stack: Stack, keys: KeyStore, admin_key: str
    ) -> None:
        """A stream fed from the poller's ring by another watcher's key (here an admin's,
        which joined last and so polls) gets no event after its own key is revoked: it ends
        UNAUTHENTICATED, and the other stream goes on."""
        root = await stack.root(label="before")
        mine = Watch(stack.gw, stack.space.sid, "0")
        async with stack.gateway.channel(admin_key) as channel:
            admin = Watch(agent_pb2_grpc.AgentGatewayStub(channel), stack.space.sid, "0")
            try:
                assert (await mine.next()).session_id == root.id
                assert (await admin.next()).session_id == root.id
                assert await keys.revoke(stack.space.key_id)
                later = await agent_pb2_grpc.AgentGatewayStub(channel).CreateRoot(
                    agent_pb2.CreateRootRequest(space_id=stack.space.sid, label="after")
                )
                assert (await admin.next()).session_id == later.session.id
                error = await mine.error()
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "revoked" in (error.details() or "")
            finally:
                mine.close()
                admin.close()

    async def test_the_only_watchers_revoked_key_is_named(
        self, stack: Stack, keys: KeyStore
    ) -> None:
        """The space's only watcher, whose key serves the poller's reads, has its key revoked:
        its stream ends UNAUTHENTICATED saying that its key was revoked and what to do, as a
        stream fed by another key's reads is told (it said "no key of a watcher of this space
        is valid")."""
        root = await stack.root(label="r")
        mine = Watch(stack.gw, stack.space.sid, "0")
        try:
            assert (await mine.next()).session_id == root.id
            assert await keys.revoke(stack.space.key_id)
            error = await mine.error()
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert error.details() == (
                "the API key of this stream was revoked; watch again with a live key "
                "(after_cursor = the last cursor received loses nothing)"
            )
        finally:
            mine.close()

    async def test_a_stream_of_a_deleted_space_ends_not_found(
        self, stack: Stack, keys: KeyStore, admin_key: str
    ) -> None:
        """An admin's stream of a space that `stello spaces delete` erases ends NOT_FOUND
        naming the space: it ended INVALID_ARGUMENT naming storage's after_position, no
        field of WatchSpace (a console relay restarts on INVALID_ARGUMENT, so it looped)."""
        made = await keys.create_key(space=f"doomed-{new_id()}", principal="test-admin")
        space = str(made.space_id)
        async with stack.gateway.channel(admin_key) as channel:
            gw = agent_pb2_grpc.AgentGatewayStub(channel)
            root = await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space, label="r"))
            watch = Watch(gw, space, "0")
            try:
                assert (await watch.next()).session_id == root.session.id
                assert await keys.delete_space(space) == made.space_id
                error = await watch.error(within_s=10.0)
                assert error.code() == grpc.StatusCode.NOT_FOUND, error
                assert space in (error.details() or "")
                assert error_info_reason(error) == "SPACE_NOT_FOUND"
            finally:
                watch.close()

    async def test_an_idle_stream_of_a_revoked_key_ends(
        self, stack: Stack, keys: KeyStore, admin_key: str
    ) -> None:
        """With no event to deliver, the stream still ends once its key is revoked."""
        async with stack.gateway.channel(admin_key) as channel:
            admin = Watch(agent_pb2_grpc.AgentGatewayStub(channel), stack.space.sid)
            mine = Watch(stack.gw, stack.space.sid)
            try:
                await asyncio.wait_for(mine.call.initial_metadata(), 10)
                await asyncio.wait_for(admin.call.initial_metadata(), 10)
                assert await keys.revoke(stack.space.key_id)
                error = await mine.error()
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            finally:
                mine.close()
                admin.close()


class TestShutdown:
    async def test_a_shutdown_ends_open_streams_at_once(self, make_stack: StackMaker) -> None:
        """A gateway shutting down ends an idle stream UNAVAILABLE at once, naming the resume,
        and stops without waiting for its grace (an open stream held all of it)."""
        stack = await make_stack()
        await stack.root(label="r")
        watch = Watch(stack.gw, stack.space.sid, "0")
        try:
            await watch.take(1)
            began = time.monotonic()
            await shutdown(stack.gateway.app, stack.gateway.server, 10)
            took = time.monotonic() - began
            error = await watch.error()
        finally:
            watch.close()
        assert took < 5, took
        assert error.code() is grpc.StatusCode.UNAVAILABLE, error
        assert "shutting down" in (error.details() or "")
        assert "after_cursor" in (error.details() or "")

    @pytest.mark.subprocess
    async def test_sigterm_with_a_watch_open_exits_without_the_grace(
        self, backends: Backends, database_env: dict[str, str], space: TestSpace
    ) -> None:
        """A gateway process with an idle watch open exits soon after SIGTERM, not after its
        whole STELLO_SHUTDOWN_GRACE_S (10 s), the stream ended UNAVAILABLE."""
        grace = {"STELLO_SHUTDOWN_GRACE_S": "10"}
        async with gateway_process(backends, database_env, "", **grace) as (process, address):
            async with grpc.aio.insecure_channel(address) as channel:
                call = agent_pb2_grpc.AgentGatewayStub(channel).WatchSpace(
                    agent_pb2.WatchSpaceRequest(space_id=space.sid),
                    metadata=(("authorization", f"Bearer {space.key}"),),
                )
                await asyncio.wait_for(call.initial_metadata(), 10)
                began = time.monotonic()
                process.send_signal(signal.SIGTERM)
                with pytest.raises(grpc.aio.AioRpcError) as ended:
                    await asyncio.wait_for(call.read(), 10)
                assert await asyncio.wait_for(process.wait(), 15) == 0
                took = time.monotonic() - began
        assert took < 6, took
        assert ended.value.code() is grpc.StatusCode.UNAVAILABLE, ended.value


class TestKeepalive:
    @pytest.mark.slow
    async def test_an_idle_watch_outlives_a_clients_keepalive_pings(self, stack: Stack) -> None:
        """A client pinging every 4.5 s (a load balancer's keepalive; grpc-js's users set
        5 s) keeps an idle WatchSpace: past its fourth ping (18 s) the stream is still open
        and still delivers. gRPC core's defaults counted every ping after the first as a
        strike and answered the third with GOAWAY too_many_pings, ending the healthy stream
        (explore6 F2)."""
        pings = [
            ("grpc.keepalive_time_ms", 4_500),
            ("grpc.keepalive_timeout_ms", 5_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.min_ping_interval_without_data_ms", 4_500),
        ]
        address = stack.gateway.address
        async with open_channel(address, key=stack.space.key, options=pings) as channel:
            watch = agent_pb2_grpc.AgentGatewayStub(channel).WatchSpace(
                agent_pb2.WatchSpaceRequest(space_id=stack.space.sid)
            )
            await asyncio.sleep(20)
            assert not watch.done()
            root = await stack.root()
            event = await asyncio.wait_for(watch.read(), 10)
            assert event.event.session_id == root.id
            watch.cancel()


class TestAFailedPoller:
    async def test_a_new_watcher_is_not_told_of_keys_revoked_before_it_came(
        self,
        backends: Backends,
        settings: StelloSettings,
        stack: Stack,
        keys: KeyStore,
        admin_key: str,
    ) -> None:
        """The only member of a space's poller, a turn waiting in line, has its key revoked:
        the poller fails, and stays registered while the turn waits out its timer. A watcher
        that comes then with a live key gets a poller of its own and the space's live events:
        after the backlog it was told that its key was revoked (the failed poller's error)."""
        clients = gateway_clients(backends.gateway_config(), backends, settings, False)
        watchers = Watchers(clients.storage, interval_s=0.05)
        space = stack.space.id
        root = await stack.root(label="r")
        ask = WatchInput(space, after=0, kinds=frozenset())
        try:
            async with watchers.session_changes(
                Caller(stack.space.key), space, UUID(root.id)
            ) as changes:
                await changes.ready(10)
                assert await keys.revoke(stack.space.key_id)
                await _failed(watchers, space)
                watch = watchers.watch(Caller(admin_key), ask)
                assert isinstance(watch, AsyncGenerator)
                assert (await asyncio.wait_for(anext(watch), 10)).session_id == root.id
                async with stack.gateway.channel(admin_key) as channel:
                    later = await agent_pb2_grpc.AgentGatewayStub(channel).CreateRoot(
                        agent_pb2.CreateRootRequest(space_id=stack.space.sid, label="later")
                    )
                assert (await asyncio.wait_for(anext(watch), 10)).session_id == later.session.id
                await watch.aclose()
        finally:
            await watchers.stop()


async def _failed(watchers: Watchers, space: UUID) -> None:
    """Wait until the space's poller failed (no RPC shows it while no watcher is in)."""
    for _ in range(200):
        poller = watchers._pollers.get(space)
        if poller is not None and poller.failure is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the poller did not fail within 10 s")


class _BrokenForOneSpace:
    """Storage's ReadEvents as a poller sees it: a bug (not a StelloError) for `broken`,
    no events for any other space."""

    def __init__(self, broken: UUID) -> None:
        self.broken = broken

    async def read_events(
        self, caller: Caller, space_id: UUID, after: int | None, limit: int
    ) -> storage_pb2.ReadEventsResponse:
        """Fail for the broken space; answer an empty page for the others."""
        if space_id == self.broken:
            raise RuntimeError("a bug in the poller's read")
        return storage_pb2.ReadEventsResponse(last_position=0)


def _polling(space: UUID) -> list[asyncio.Task[object]]:
    """The space's poller task while it runs."""
    return [t for t in asyncio.all_tasks() if t.get_name() == f"stello-watch-{space}"]


async def test_a_poller_ended_by_a_bug_leaves_no_other_poller_running() -> None:
    """A poller hit by a bug ends (its watchers told INTERNAL, test_poller_failure.py); the
    gateway's stop still stops every other poller (before, a poller whose task had ended
    with the error raised it from its stop and the ones after it were skipped: they kept
    polling a storage that was shutting down)."""
    broken, other = uuid4(), uuid4()
    watchers = Watchers(cast(StorageClient, _BrokenForOneSpace(broken)), interval_s=0.05)
    async with contextlib.AsyncExitStack() as inside:
        for space in (broken, other):
            await inside.enter_async_context(
                watchers.session_changes(Caller("key"), space, uuid4())
            )
        for _ in range(200):
            if all(t.done() for t in _polling(broken)):
                break
            await asyncio.sleep(0.01)
        assert _polling(other) and not any(t.done() for t in _polling(other))
        await watchers.stop()
        assert _polling(other) == []
