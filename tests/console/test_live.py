"""The live relay (/api/events): WatchSpace as server-sent events, resumable by cursor."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from stello.agent.v1 import agent_pb2
from stello_console import Caller, ConsoleOptions, running_console
from storage_service.app import create_purger
from storage_service.config import StorageSettings
from tests.console.conftest import ConsoleStack, GatewayRestart
from tests.console.http import Event, EventStream, fetch, signed_headers
from tests.gateway.conftest import record
from tests.support.fixtures import TestSpace

# Not `sql`: the relay is what these test; the events' SQL runs in
# tests/gateway/sessions/test_watch.py
# and tests/storage on every PostgreSQL pass.


async def sign_in(console: ConsoleStack) -> dict[str, str]:
    """The headers the page sends once the launch token is exchanged (cookie, page key)."""
    assert console.console.launch is not None
    return signed_headers(await fetch(console.port, f"/?token={console.console.launch.token}"))


async def watch(console: ConsoleStack, query: str = "", **headers: str) -> EventStream:
    """A signed-in event stream (its `ready` not yet read)."""
    signed = await sign_in(console)
    stream = await EventStream.open(console.port, f"/api/events{query}", {**signed, **headers})
    assert stream.status == 200
    return stream


def changes(events: list[Event]) -> list[tuple[str, str]]:
    """(kind, session id) of each change event."""
    assert all(e.name == "change" for e in events), events
    return [(e.data["kind"], e.data["session_id"]) for e in events]


async def send(console: ConsoleStack, session_id: str, content: str = "hi") -> None:
    """One turn through the gateway, as another client."""
    await console.stack.gw.Send(
        agent_pb2.SendRequest(
            space_id=console.stack.space.sid, session_id=session_id, content=content
        )
    )


async def resume_when_ready(console: ConsoleStack, cursor: str) -> EventStream:
    """Resume after `cursor` as the page does: again while the relay answers "resume"."""
    for _ in range(100):
        stream = await watch(console, **{"Last-Event-ID": cursor})
        first = await stream.next()
        if first.name == "ready":
            assert first.data == {"cursor": cursor, "resumed": True}
            return stream
        assert (first.name, first.data["then"]) == ("error", "resume"), first
        await stream.close()
        await asyncio.sleep(0.2)  # the console's channel reconnects with a backoff
    raise AssertionError("the relay never became ready again")


class TestStream:
    async def test_ready_then_each_change_with_its_cursor_as_id(
        self, console: ConsoleStack
    ) -> None:
        """From now: `ready` names the present cursor, then each change carries its cursor."""
        await console.stack.root(label="before")
        stream = await watch(console)
        try:
            assert (
                stream.header(
                    "content-type",
                )
                == "text/event-stream; charset=utf-8"
            )
            assert "script-src 'self'" in (stream.header("content-security-policy") or "")
            ready = await stream.next()
            assert (ready.name, ready.id, ready.data) == (
                "ready",
                "1",
                {"cursor": "1", "resumed": False},
            )
            root = await console.stack.root(label="after")
            await send(console, root.id)
            events = await stream.take(3)
        finally:
            await stream.close()
        assert changes(events) == [
            ("session_committed", root.id),
            ("records_appended", root.id),
            ("turn_committed", root.id),
        ]
        assert [(e.id, e.data["cursor"]) for e in events] == [("2", "2"), ("3", "3"), ("4", "4")]
        assert (events[1].data["first_seq"], events[1].data["last_seq"]) == (1, 2)

    async def test_last_event_id_resumes_with_what_was_missed_once(
        self, console: ConsoleStack
    ) -> None:
        """Reconnecting with Last-Event-ID (or ?after=) gets exactly the events missed, in order."""
        stream = await watch(console)
        try:
            await stream.next()  # ready
            root = await console.stack.root(label="r")
            [seen] = await stream.take(1)
        finally:
            await stream.close()
        child = await console.stack.fork(root.id, "while away")
        await console.stack.gw.Archive(
            agent_pb2.ArchiveRequest(space_id=console.stack.space.sid, session_id=child.id)
        )
        missed = [("session_committed", child.id), ("session_archived", child.id)]
        for resumed in (
            await watch(console, **{"Last-Event-ID": str(seen.id)}),
            await watch(console, f"?after={seen.id}"),
        ):
            try:
                ready = await resumed.next()
                assert ready.data == {"cursor": seen.id, "resumed": True}
                assert changes(await resumed.take(2)) == missed
            finally:
                await resumed.close()
        everything = await watch(console, "?after=0")
        try:
            await everything.next()
            cursors = [e.id for e in await everything.take(3)]
        finally:
            await everything.close()
        assert seen.id is not None
        assert cursors == [seen.id, str(int(seen.id) + 1), str(int(seen.id) + 2)]

    async def test_the_page_leaving_ends_its_watch(self, console: ConsoleStack) -> None:
        """Closing the connection ends the WatchSpace call behind it (the gateway counts it)."""
        metrics = console.stack.gateway.app.metrics
        assert metrics is not None

        def finished() -> float:
            return sum(
                sample.value
                for family in metrics.registry.collect()
                for sample in family.samples
                if sample.name == "stello_rpc_calls_total"
                and sample.labels["method"].endswith("/WatchSpace")
            )

        stream = await watch(console)
        await stream.next()
        assert finished() == 0
        await stream.close()
        for _ in range(200):
            if finished() == 1:
                break
            await asyncio.sleep(0.05)
        assert finished() == 1

    async def test_an_idle_stream_carries_heartbeats(self, console: ConsoleStack) -> None:
        """With nothing to relay, the stream still sends a keep-alive comment each heartbeat."""
        options = ConsoleOptions(
            gateway=console.stack.gateway.address,
            port=0,
            caller=Caller(console.stack.space.key, console.stack.space.sid),
            heartbeat_s=0.1,
        )
        async with running_console(options) as beating:
            assert beating.launch is not None
            signed = signed_headers(await fetch(beating.port, f"/?token={beating.launch.token}"))
            stream = await EventStream.open(beating.port, "/api/events", signed)
            try:
                await stream.next()
                await asyncio.sleep(1.0)
                root = await console.stack.root(label="late")
                assert changes([await stream.next()]) == [("session_committed", root.id)]
            finally:
                await stream.close()
        assert stream.comments and set(stream.comments) == {"keep-alive"}

    async def test_a_stopping_console_ends_its_streams(
        self, space: TestSpace, console: ConsoleStack
    ) -> None:
        """When the console stops, an open stream ends properly (its last chunk), not cut off."""
        options = ConsoleOptions(
            gateway=console.stack.gateway.address, port=0, caller=Caller(space.key, space.sid)
        )
        async with running_console(options) as other:
            assert other.launch is not None
            signed = signed_headers(await fetch(other.port, f"/?token={other.launch.token}"))
            stream = await EventStream.open(other.port, "/api/events", signed)
            await stream.next()
        assert await stream.rest() == []
        assert stream.ended
        await stream.close()

    async def test_a_sign_out_ends_the_open_streams(self, console: ConsoleStack) -> None:
        """A sign-out of the local console ends every stream open then at once (a tab that led
        a shared stream, or a copied one, stops too); a stream opened after it runs on."""
        stream = await watch(console)
        try:
            await stream.next()
            own = {"Origin": f"http://127.0.0.1:{console.port}"}
            out = await fetch(console.port, "/api/sign-out", method="POST", headers=own)
            assert out.status == 200
            assert await stream.rest(within_s=5.0) == []
            assert stream.ended
        finally:
            await stream.close()
        after = await watch(console)
        try:
            assert (await after.next()).name == "ready"
            root = await console.stack.root(label="after the sign-out")
            assert changes([await after.next()]) == [("session_committed", root.id)]
        finally:
            await after.close()


class TestFailures:
    async def test_an_expired_cursor_says_restart(
        self, console: ConsoleStack, pool: asyncpg.Pool
    ) -> None:
        """A cursor whose events were purged ends at once: CURSOR_EXPIRED, then "restart"."""
        root = await console.stack.root(label="r")
        await send(console, root.id)
        await asyncio.sleep(0.05)
        await create_purger(pool, StorageSettings(event_retention_s=0.01)).run_once()
        await send(console, root.id)
        stream = await watch(console, **{"Last-Event-ID": "1"})
        events = await stream.rest()
        await stream.close()
        assert [(e.name, e.data["reason"], e.data["then"]) for e in events] == [
            ("error", "CURSOR_EXPIRED", "restart")
        ]
        assert events[0].data["code"] == "FAILED_PRECONDITION"

    async def test_a_cursor_beyond_the_space_says_restart(self, console: ConsoleStack) -> None:
        """A cursor this space never reached (another space's) is INVALID_ARGUMENT: restart."""
        stream = await watch(console, "?after=999")
        events = await stream.rest()
        await stream.close()
        assert [(e.name, e.data["code"], e.data["then"]) for e in events] == [
            ("error", "INVALID_ARGUMENT", "restart")
        ]

    @pytest.mark.parametrize(
        ("query", "headers", "field"),
        [
            pytest.param("", {"Last-Event-ID": "abc"}, "Last-Event-ID", id="header"),
            pytest.param("?after=-1", {}, "after", id="query"),
            pytest.param("?after=1234567890123456789", {}, "after", id="too-long"),
        ],
    )
    async def test_a_malformed_cursor_is_refused_naming_it(
        self, console: ConsoleStack, query: str, headers: dict[str, str], field: str
    ) -> None:
        """A cursor that is not one the console sent is 400 naming where it came from."""
        signed = await sign_in(console)
        reply = await fetch(console.port, f"/api/events{query}", headers={**signed, **headers})
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT" and error["message"].startswith(f"{field}:")

    async def test_a_gateway_restart_ends_the_stream_then_resume_loses_nothing(
        self, console: ConsoleStack, gateway_restart: GatewayRestart
    ) -> None:
        """The gateway stops: the stream ends saying "resume"; resuming on the new gateway with
        the last cursor brings what changed while it was down, once."""
        root = await console.stack.root(label="r")
        stream = await watch(console, "?after=0")
        try:
            await stream.next()  # ready
            [created] = await stream.take(1)
            await gateway_restart.stop()
            [end] = await stream.rest()
        finally:
            await stream.close()
        assert (end.name, end.data["then"]) == ("error", "resume")
        await console.stack.append(root.id, record("user", "while down"))  # straight to storage
        await gateway_restart.start()
        resumed = await resume_when_ready(console, str(created.id))
        try:
            [appended] = await resumed.take(1)
            await send(console, root.id)
            live = await resumed.take(2)
        finally:
            await resumed.close()
        assert changes([appended]) == [("records_appended", root.id)]
        assert (appended.data["first_seq"], appended.data["last_seq"]) == (1, 1)
        assert changes(live) == [("records_appended", root.id), ("turn_committed", root.id)]


class TestTenancy:
    async def test_another_spaces_events_never_arrive(
        self, key_console: ConsoleStack, other_space: TestSpace
    ) -> None:
        """A page signed in to one space gets its changes only, never another space's."""
        space = key_console.stack.space
        headers = {"Authorization": f"Bearer {space.key}", "X-Stello-Space": space.sid}
        stream = await EventStream.open(key_console.port, "/api/events", headers)
        theirs = {
            "Authorization": f"Bearer {other_space.key}",
            "X-Stello-Space": other_space.sid,
        }
        try:
            await stream.next()
            for label in ("theirs", "theirs too"):
                created = await fetch(
                    key_console.port,
                    "/api/roots",
                    method="POST",
                    headers={
                        **theirs,
                        "Origin": f"http://127.0.0.1:{key_console.port}",
                        "Content-Type": "application/json",
                    },
                    body={"label": label},
                )
                assert created.status == 200
            mine = await key_console.stack.root(label="mine")
            first = await stream.next()
        finally:
            await stream.close()
        assert changes([first]) == [("session_committed", mine.id)]

    async def test_a_key_cannot_watch_another_space(
        self, key_console: ConsoleStack, other_space: TestSpace
    ) -> None:
        """Another space's key naming this space: "stop", no event of it, and the page asked to
        sign in again as a call's refusal asks it (SIGN_IN; it said NOT_FOUND, and the page
        only turned its badge off)."""
        await key_console.stack.root(label="private")
        headers = {
            "Authorization": f"Bearer {other_space.key}",
            "X-Stello-Space": key_console.stack.space.sid,
        }
        stream = await EventStream.open(key_console.port, "/api/events?after=0", headers)
        events = await stream.rest()
        await stream.close()
        assert [(e.name, e.data["reason"], e.data["then"]) for e in events] == [
            ("error", "SIGN_IN", "stop")
        ]
        assert "Space id field" in events[0].data["message"]

    async def test_without_a_key_it_asks_to_sign_in(self, key_console: ConsoleStack) -> None:
        """The deployed console's relay needs the key like every endpoint: 401."""
        reply = await fetch(key_console.port, "/api/events")
        assert reply.status == 401 and reply.json()["error"]["code"] == "UNAUTHENTICATED"
