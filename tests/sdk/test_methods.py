"""Every SDK method against a real gateway, storage and tree: each RPC once, pages walked,
a stream, tool calls, a watch, and the sync client from another thread."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello_client import AsyncClient, Client
from stello_client.aio import RPC_METHODS
from stello_client.exceptions import (
    ConfigurationError,
    InvalidArgument,
    NoPendingToolCalls,
    NotFound,
    ResourceExhausted,
)
from stello_client.sync import Client as SyncClient
from stello_client.types import (
    SendResponse,
    SubmitToolResultsResponse,
    TextDelta,
    ToolCall,
    tool,
    tool_result,
)
from tests.gateway.conftest import Stack, record
from tests.sdk.conftest import client_of
from tests.support.fixtures import TestSpace

pytestmark = pytest.mark.sql
ROOT = Path(__file__).resolve().parents[2]
STREAMED_TOOLS = "<!-- streamed tools: tests/sdk/test_methods.py runs this block -->"


class TestSurface:
    def test_every_rpc_has_a_method(self) -> None:
        """Each AgentGateway RPC of the proto has its method on both clients (a new RPC fails
        here until the SDK has it)."""
        rpcs = {m.name for m in agent_pb2.DESCRIPTOR.services_by_name["AgentGateway"].methods}
        assert set(RPC_METHODS) == rpcs
        for name in RPC_METHODS.values():
            assert callable(getattr(AsyncClient, name)), name
            assert callable(getattr(SyncClient, name)), name

    def test_every_public_method_has_a_docstring(self) -> None:
        """Every public method of both clients says what it does."""
        for cls in (AsyncClient, Client):
            for name, member in inspect.getmembers(cls, callable):
                if not name.startswith("_"):
                    assert inspect.getdoc(member), f"{cls.__name__}.{name}"


class TestSessions:
    async def test_create_fork_read_rename_archive_delete(
        self, client: AsyncClient, stack: Stack
    ) -> None:
        """CreateRoot, Fork (inherit up to a seq), GetSession, UpdateLabel, Archive,
        Unarchive, DeleteSession, each once through the SDK's keyword arguments."""
        root = await client.create_root(label="Research", system_prompt="Be brief.", skills=[])
        assert (root.label, root.status) == ("Research", common_pb2.SESSION_STATUS_ACTIVE)
        await stack.append(root.id, record("user", "a"), record("assistant", "b"))
        child = await client.fork(root.id, "Branch", context="inherit", inherit_until_seq=1)
        view = await client.get_session(child.id)
        assert (view.node.parent_id, view.system_prompt) == (root.id, "Be brief.")
        assert [r.content for r in await stack.records(child.id)] == ["a"]
        renamed = await client.update_label(child.id, "Renamed")
        assert renamed.label == "Renamed"
        archived = await client.archive(child.id)
        assert archived.status == common_pb2.SESSION_STATUS_ARCHIVED
        assert (await client.unarchive(child.id)).status == common_pb2.SESSION_STATUS_ACTIVE
        assert await client.delete_session(root.id) == [root.id, child.id]
        other = await client.create_root()
        await client.fork(other.id, "Branch")
        assert await client.delete_session_counted(other.id) == 2
        with pytest.raises(NotFound):
            await client.get_session(other.id)

    async def test_a_delete_sends_the_clients_own_message_limit(
        self, stack: Stack, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A client whose STELLO_MAX_MESSAGE_BYTES could not receive the ids is refused
        before anything is deleted (not told of a failure after the delete); counted, it
        erases them."""
        root = await client.create_root()
        for _ in range(30):  # 31 ids of 38 bytes: past 1,024
            await client.fork(root.id, "Branch")
        monkeypatch.setenv("STELLO_MAX_MESSAGE_BYTES", "1024")
        async with client_of(stack) as small:
            with pytest.raises(ResourceExhausted, match="31 sessions"):
                await small.delete_session(root.id)
            assert (await client.get_session(root.id)).node.id == root.id
            assert await small.delete_session_counted(root.id) == 31

    async def test_a_reply_past_the_clients_limit_says_what_to_do(
        self, stack: Stack, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A reply larger than the client's STELLO_MAX_MESSAGE_BYTES raises in words that
        name the limit and what to ask instead, not gRPC's text about its own client."""
        root = await client.create_root()
        for _ in range(30):
            await client.fork(root.id, "Branch")
        monkeypatch.setenv("STELLO_MAX_MESSAGE_BYTES", "1024")
        async with client_of(stack) as small:
            with pytest.raises(ResourceExhausted) as raised:
                await small.get_tree(root_id=root.id)
        assert "STELLO_MAX_MESSAGE_BYTES" in str(raised.value), raised.value
        assert "Received message" not in str(raised.value), raised.value

    async def test_slots_consolidate_prefix_and_import(self, client: AsyncClient) -> None:
        """PutInsight, PutMemory, Consolidate, ResolveSessionPrefix and ImportSession."""
        root = await client.create_root()
        await client.put_insight(root.id, "note")
        await client.put_memory(root.id, "kept")
        view = await client.get_session(root.id)
        assert (view.insight, view.memory) == ("note", "kept")
        assert (await client.consolidate(root.id)).HasField("memory")
        [found] = await client.resolve_session_prefix(root.id[:12])
        assert found.id == root.id
        imported = await client.import_session(
            "Imported",
            parent_id=root.id,
            records=[record("user", "q"), record("assistant", "a")],
            status="archived",
            memory="m",
            turn_count=1,
        )
        view = await client.get_session(imported.id)
        assert (view.node.parent_id, view.memory, view.turn_count) == (root.id, "m", 1)
        assert imported.status == common_pb2.SESSION_STATUS_ARCHIVED


class TestRetention:
    async def test_policy_apply_and_pin(self, client: AsyncClient) -> None:
        """get_retention, put_retention, apply_retention (dry run and not), pin_session, each
        once through the SDK's keyword arguments."""
        assert await client.get_retention() is None
        root = await client.create_root()
        policy = await client.put_retention(archive_after_days=30)
        assert policy.archive_after_days == 30
        assert (await client.get_retention()) == policy
        assert await client.pin_session(root.id)
        assert (await client.get_session(root.id)).pinned
        assert [d.pinned async for d in client.digests()] == [True]
        dry = await client.apply_retention(dry_run=True)
        assert list(dry.actions) == [] and dry.done
        assert (await client.apply_retention()).done

    async def test_a_policy_with_no_steps_reads_as_none(self, client: AsyncClient) -> None:
        """After put_retention() with no steps (the CLI's `set --none`), get_retention
        answers None, as for a space that never had a policy: one shape for "nothing
        expires" (it was an empty RetentionPolicy)."""
        await client.put_retention(archive_after_days=30)
        assert await client.put_retention() == common_pb2.RetentionPolicy()
        assert await client.get_retention() is None
        assert (await client.apply_retention()).done

    async def test_only_a_dry_run_is_retried(
        self, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """apply_retention is retried only as a dry run: a repeat of a real run after a lost
        answer would list only what was left, not what the first attempt archived or
        deleted, so the caller must see the failure instead."""
        await client.put_retention(archive_after_days=30)
        sent: list[tuple[str, bool]] = []
        unary = client._unary

        async def spy(method: str, request: Any, *, safe: bool, **options: Any) -> Any:
            sent.append((method, safe))
            return await unary(method, request, safe=safe, **options)

        monkeypatch.setattr(client, "_unary", spy)
        await client.apply_retention(dry_run=True)
        await client.apply_retention()
        assert sent == [("ApplyRetention", True), ("ApplyRetention", False)]


class TestReads:
    async def test_pages_are_walked(self, client: AsyncClient, stack: Stack) -> None:
        """records(), digests() and lineage() walk every page of pages smaller than the whole;
        list_records and get_lineage answer one page and the token of the next; a listing's
        and a search's status "all" (the CLI's `--status all`) is both, as None."""
        roots = [await client.create_root(label=f"r{i}") for i in range(5)]
        chain = [roots[0]]
        for depth in range(4):
            chain.append(await client.fork(chain[-1].id, f"d{depth}"))
        await stack.append(roots[1].id, *(record("user", f"m{i}") for i in range(7)))
        walked = [r.content async for r in client.records(roots[1].id, page_size=2)]
        assert walked == [f"m{i}" for i in range(7)]
        newest = [r.seq async for r in client.records(roots[1].id, newest_first=True, limit=3)]
        assert newest == [7, 6, 5]
        page = await client.list_records(roots[1].id, limit=2)
        assert [r.seq for r in page.records] == [1, 2] and page.next_page_token
        for bound in ("after_seq", "before_seq"):  # both were read as 0
            with pytest.raises(InvalidArgument) as caught:
                bounds: dict[str, Any] = {bound: -1}
                await client.list_records(roots[1].id, **bounds)
            assert caught.value.field == bound
        labels = [d.label async for d in client.digests(page_size=2)]
        assert labels == ["r0", "r1", "r2", "r3", "r4", "d0", "d1", "d2", "d3"]  # creation order
        one = await client.list_session_digests(status="archived")
        assert list(one.digests) == []
        every = [d.label async for d in client.digests(status="all")]
        assert every == labels
        assert (await client.list_session_digests(status="all")).digests
        found = await client.search_sessions("r0", status="all")
        assert [s.label for s in found.sessions] == ["r0"]
        with pytest.raises(ValueError, match="status: must be one of active, archived, all"):
            await client.list_session_digests(status="both")  # type: ignore[arg-type]
        ancestors = [d.label async for d in client.lineage(chain[-1].id, page_size=2)]
        assert ancestors == ["d2", "d1", "d0", "r0"]
        first = await client.get_lineage(chain[-1].id, page_size=1)
        assert [d.label for d in first.ancestors] == ["d2"] and first.next_page_token

    async def test_records_page_size_0_is_the_default_and_its_bound_names_it(
        self, client: AsyncClient, stack: Stack
    ) -> None:
        """records(page_size=0) is the default page, as every page_size 0 (it was sent as
        ListRecords' limit 0, "none": the session looked empty); a page_size past 1000, a
        negative one or a negative limit is a ValueError naming the keyword before anything
        is sent (past 1000 was InvalidArgument naming `limit`, not the caller's keyword)."""
        root = await client.create_root()
        await stack.append(root.id, *(record("user", f"m{i}") for i in range(3)))
        assert [r.content async for r in client.records(root.id, page_size=0)] == [
            "m0",
            "m1",
            "m2",
        ]
        assert [r.seq async for r in client.records(root.id, page_size=0, limit=2)] == [1, 2]
        for size in (5000, -1):
            with pytest.raises(ValueError, match=r"^page_size: must be 1\.\.1000 \(0: the"):
                [r async for r in client.records(root.id, page_size=size)]
        with pytest.raises(TypeError, match=r"^page_size: not a value this field holds"):
            [r async for r in client.records(root.id, page_size="2")]  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^limit: must not be negative, got -1$"):
            [r async for r in client.records(root.id, limit=-1)]
        # A limit not a whole number was a TypeError naming nothing ("'<' not supported
        # between instances of 'int' and 'str'"), or refused by the first page's request.
        for wrong in ("2", 2.0, True):
            with pytest.raises(TypeError, match=r"^limit: not a value this field holds, got "):
                [r async for r in client.records(root.id, limit=wrong)]  # type: ignore[arg-type]

    async def test_the_iterators_take_a_timeout_per_page(self, client: AsyncClient) -> None:
        """records(), digests(), lineage() and shared_memory() take `timeout=` as every
        method does (each page's call gets it: a timeout no call could meet is refused,
        naming it); they had none, each page got the client's default."""
        root = await client.create_root()
        child = await client.fork(root.id, "child")
        await client.upsert_shared_memory_entry("a", summary="s", body="b")
        walks: list[tuple[Callable[..., AsyncIterator[Any]], tuple[str, ...]]] = [
            (client.records, (root.id,)),
            (client.digests, ()),
            (client.lineage, (child.id,)),
            (client.shared_memory, ()),
        ]
        for walk, args in walks:
            with pytest.raises(ValueError, match=r"^timeout: expected a number of seconds"):
                [item async for item in walk(*args, timeout=0)]
        assert [r.seq async for r in client.records(root.id, timeout=5)] == []
        assert len([d async for d in client.digests(timeout=5)]) == 2
        assert [d.id async for d in client.lineage(child.id, timeout=None)] == [root.id]
        assert [e.slug async for e in client.shared_memory(timeout=5)] == ["a"]

    async def test_search_records_and_sessions(self, client: AsyncClient, stack: Stack) -> None:
        """SearchRecords end to end: an inherited record is one hit (its owner's, read by
        two sessions), scopes, a deleted subtree never found; SearchSessions by label."""
        root = await client.create_root(label="Search root")
        await stack.append(root.id, record("user", "the needle in 草堆里找针"))
        child = await client.fork(root.id, "Kid", context="inherit")
        await stack.append(child.id, record("user", "another needle"))
        grandchild = await client.fork(child.id, "Grandkid")
        await stack.append(grandchild.id, record("user", "deep needle"))
        hits = (await client.search_records("needle")).hits
        assert sorted((h.session_id, h.reader_count) for h in hits) == sorted(
            [(root.id, 2), (child.id, 1), (grandchild.id, 1)]
        )
        cjk = (await client.search_records("找针")).hits
        assert [(h.session_id, h.snippet[h.matches[0].start : h.matches[0].end]) for h in cjk] == [
            (root.id, "找针")
        ]
        in_child = await client.search_records("needle", session_id=child.id)
        assert {h.session_id for h in in_child.hits} == {root.id, child.id}
        page = await client.search_records("needle", page_size=2, order="relevance")
        assert len(page.hits) == 2 and page.next_page_token
        found = await client.search_sessions("kid")
        assert [s.id for s in found.sessions] == [child.id]
        await client.delete_session(child.id)
        assert [h.session_id for h in (await client.search_records("needle")).hits] == [root.id]
        assert list((await client.search_sessions("grandk")).sessions) == []

    async def test_tree_profiles_skills_and_who(self, client: AsyncClient, stack: Stack) -> None:
        """GetTree (whole and narrowed), ListProfiles, ListSkills, WhoAmI."""
        root = await client.create_root(label="top")
        await client.fork(root.id, "under")
        assert [n.label for n in await client.get_tree()] == ["top", "under"]
        assert [n.label for n in await client.get_tree(root_id=root.id, max_depth=0)] == ["top"]
        assert "research" in [p.name for p in await client.list_profiles()]
        assert await client.list_skills(session_id=root.id) == []
        who = await client.who_am_i()
        assert [s.id for s in who.spaces] == [stack.space.sid]


class TestSharedMemory:
    async def test_upsert_list_get_remove(self, client: AsyncClient) -> None:
        """Upsert, List (every page), Get and Remove a shared memory entry."""
        for slug in ("a", "b", "c"):
            made = await client.upsert_shared_memory_entry(slug, summary=f"{slug}!", body="x")
            assert made.created
        again = await client.upsert_shared_memory_entry("a", summary="A", body="y")
        assert not again.created
        assert [e.slug async for e in client.shared_memory(page_size=2)] == ["a", "b", "c"]
        assert (await client.list_shared_memory(page_size=1)).total_count == 3
        assert (await client.get_shared_memory_entry("a")).body == "y"
        assert await client.remove_shared_memory_entry("a") is True
        assert await client.remove_shared_memory_entry("a") is False


class TestTurns:
    async def test_send_and_stream(self, client: AsyncClient) -> None:
        """send() answers the stored turn; stream() yields text deltas, then the turn."""
        root = await client.create_root()
        sent = await client.send(root.id, "hello")
        assert sent.assistant.content == "echo: hello"
        events = [event async for event in client.stream(root.id, "again")]
        assert isinstance(events[-1], SendResponse)
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text == events[-1].assistant.content == "echo: again"
        assert (await client.get_session(root.id)).turn_count == 2

    async def test_client_tools_round_trip(self, client: AsyncClient) -> None:
        """A stream yields the model's tool call; submit_tool_results continues the turn."""
        root = await client.create_root()
        clock = tool("clock", "the time", {"type": "object", "properties": {}})
        events = [e async for e in client.stream(root.id, "/tool clock {}", tools=[clock])]
        [call] = [e for e in events if isinstance(e, ToolCall)]
        done = events[-1]
        assert isinstance(done, SendResponse) and [c.id for c in done.pending_tool_calls] == [
            call.id
        ]
        reply = await client.submit_tool_results(root.id, [tool_result(call.id, "noon")])
        assert reply.assistant.content == "tool results: clock: noon"
        assert not reply.pending_tool_calls

    async def test_client_tools_streamed(self, client: AsyncClient) -> None:
        """submit_tool_results_stream yields the continuation's text deltas, then the
        SubmitToolResultsResponse; retried with its request_id, just that response."""
        root = await client.create_root()
        clock = tool("clock", "the time")
        sent = await client.send(root.id, "/tool clock {}", tools=[clock])
        results = [tool_result(sent.pending_tool_calls[0].id, "noon")]
        stream = client.submit_tool_results_stream(root.id, results, request_id="rs-1")
        events = [e async for e in stream]
        done = events[-1]
        assert isinstance(done, SubmitToolResultsResponse)
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text == done.assistant.content == "tool results: clock: noon"
        again = client.submit_tool_results_stream(root.id, results, request_id="rs-1")
        assert [e async for e in again] == [done]
        with pytest.raises(NoPendingToolCalls):
            await anext(client.submit_tool_results_stream(root.id, results))

    async def test_the_docs_streamed_tools(
        self, client: AsyncClient, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """docs/python.md's streamed client tools run as written: the tool answered, the
        continuation printed as it streams."""
        text = (ROOT / "docs" / "python.md").read_text().partition(STREAMED_TOOLS)[2]
        found = re.search(r"```python\n(.*?)```", text, flags=re.DOTALL)
        assert found, "docs/python.md lost its streamed client tools"
        names: dict[str, Any] = {}
        exec(found.group(1), names)
        root = await client.create_root()
        await names["turn"](client, root.id, "/tool clock {}")
        assert capsys.readouterr().out == "tool results: clock: 12:00 UTC"

    async def test_the_busy_policy(self, client: AsyncClient, stack: Stack) -> None:
        """`busy` takes the policy's short name: "interrupt" takes over a turn's lease (here
        one taken straight on storage), "enqueue" runs on a free session; an unknown name
        is a ValueError naming the argument, before any call."""
        root = await client.create_root()
        await stack.storage.BeginTurn(
            storage_pb2.BeginTurnRequest(space_id=stack.space.sid, session_id=root.id, ttl_s=60)
        )
        taken = await client.send(root.id, "mine now", busy="interrupt")
        assert taken.assistant.content == "echo: mine now"
        queued = await client.send(root.id, "in line", busy="enqueue")
        assert queued.assistant.content == "echo: in line"
        with pytest.raises(ValueError, match=r"^busy: must be one of reject, enqueue"):
            await client.send(root.id, "x", busy="sideways")  # type: ignore[arg-type]


class TestWatch:
    async def test_watch_from_now_and_after_a_cursor(self, client: AsyncClient) -> None:
        """watch() starts after the cursor start() answers; after_cursor resumes exactly."""
        async with client.watch(kinds=["session_committed"]) as watch:
            start = await watch.start()
            assert start is not None
            first = await client.create_root(label="one")
            second = await client.create_root(label="two")
            seen = [await asyncio.wait_for(anext(watch), 10) for _ in range(2)]
        assert [e.session_id for e in seen] == [first.id, second.id]
        async with client.watch(after_cursor=seen[0].cursor, kinds=["session_committed"]) as again:
            assert (await asyncio.wait_for(anext(again), 10)).session_id == second.id


class TestCallers:
    async def test_one_channel_many_callers(self, stack: Stack, other_space: TestSpace) -> None:
        """A keyless client calls as each user through `using` (one channel, as the console
        does); a call on it directly has no key and is a ConfigurationError naming it."""
        async with AsyncClient.keyless(stack.gateway.address) as shared:
            mine = shared.using(key=stack.space.key, space=stack.space.sid)
            theirs = shared.using(key=other_space.key, space=other_space.sid)
            made = await mine.create_root(label="mine")
            await theirs.create_root(label="theirs")
            assert [n.id for n in await mine.get_tree()] == [made.id]
            assert [n.label for n in await theirs.get_tree()] == ["theirs"]
            await theirs.close()  # closes nothing: the channel is the keyless client's
            assert [n.label for n in await mine.get_tree()] == ["mine"]
            with pytest.raises(ConfigurationError, match="no API key"):
                await shared.who_am_i()

    async def test_another_key_without_a_space_acts_in_its_own(
        self, stack: Stack, other_space: TestSpace
    ) -> None:
        """`client.using(key=OTHER)` with no space acts in the one space the other key reaches,
        as a client made with that key would; it called with this client's space and
        failed SpaceNotFound. The same key with no space keeps this client's space."""
        async with AsyncClient(stack.gateway.address, stack.space.key, stack.space.sid) as client:
            theirs = client.using(key=other_space.key)
            assert await theirs.space_id() == other_space.sid
            made = await theirs.create_root(label="theirs")
            assert [n.id for n in await theirs.get_tree()] == [made.id]
            assert await client.get_tree() == []
            assert await client.using(key=stack.space.key).space_id() == stack.space.sid


class TestLoops:
    async def test_a_client_used_again_on_a_new_loop(self, stack: Stack) -> None:
        """An AsyncClient used in two `asyncio.run`s (a module-level client, a loop per
        test) opens a new channel on the second loop: it raised a bare "RuntimeError: Event
        loop is closed". A `using` client shares the reopened channel."""

        def work() -> tuple[str, str, list[str]]:
            client = client_of(stack)
            made = asyncio.run(client.create_root(label="loop1"))
            seen = asyncio.run(client.get_session(made.id))

            async def third() -> list[str]:
                async with client:
                    other = client.using(space=stack.space.sid)
                    return [node.label for node in await other.get_tree()]

            return made.id, seen.node.id, asyncio.run(third())

        made, seen, labels = await asyncio.to_thread(work)
        assert seen == made
        assert labels == ["loop1"]

    async def test_a_client_used_on_a_second_open_loop_is_told_to_make_one_per_loop(
        self, stack: Stack
    ) -> None:
        """A client whose channel is open on a loop that still runs, called from another
        loop, raises ConfigurationError (setting "loop") saying to make one client per
        loop, and still works on its own loop."""
        client = client_of(stack)
        await client.create_root(label="here")

        def elsewhere() -> None:
            asyncio.run(client.get_tree())

        with pytest.raises(ConfigurationError, match="one client per loop") as caught:
            await asyncio.to_thread(elsewhere)
        assert caught.value.setting == "loop"
        assert [node.label for node in await client.get_tree()] == ["here"]
        await client.close()


class TestSyncClient:
    async def test_one_channel_many_callers(self, stack: Stack, other_space: TestSpace) -> None:
        """The sync client's keyless form and `using`, as the async client's: one channel,
        each user's calls as that user, a using client's close leaves the channel open."""

        def work() -> None:
            with Client.keyless(stack.gateway.address) as shared:
                mine = shared.using(key=stack.space.key, space=stack.space.sid)
                theirs = shared.using(key=other_space.key, space=other_space.sid)
                made = mine.create_root(label="mine")
                theirs.create_root(label="theirs")
                assert [n.id for n in mine.get_tree()] == [made.id]
                assert [n.label for n in theirs.get_tree()] == ["theirs"]
                theirs.close()  # closes nothing: the channel is the keyless client's
                assert [n.label for n in mine.get_tree()] == ["mine"]
                with pytest.raises(ConfigurationError, match="no API key"):
                    shared.who_am_i()

        await asyncio.to_thread(work)

    async def test_the_sync_client_in_a_thread(self, stack: Stack) -> None:
        """Client (no asyncio) works from a worker thread: create, send, stream, pages, a
        streamed continuation."""

        def work() -> tuple[str, list[str], int]:
            with Client(
                stack.gateway.address, stack.space.key, stack.space.sid, plaintext=True
            ) as sync:
                root = sync.create_root(label="sync")
                sync.send(root.id, "one")
                deltas = [e.text for e in sync.stream(root.id, "two") if isinstance(e, TextDelta)]
                walked = [r.content for r in sync.records(root.id, page_size=1)]
                call = sync.send(root.id, "/tool clock {}", tools=[tool("clock")])
                results = [tool_result(call.pending_tool_calls[0].id, "noon")]
                with sync.submit_tool_results_stream(root.id, results) as events:
                    continued = list(events)
                assert isinstance(continued[-1], SubmitToolResultsResponse)
                return "".join(deltas), walked, len(sync.get_tree())

        text, walked, nodes = await asyncio.to_thread(work)
        assert text == "echo: two"
        assert walked == ["one", "echo: one", "two", "echo: two"]
        assert nodes == 1

    async def test_two_threads_share_one_client(self, stack: Stack) -> None:
        """One Client answers calls made from several threads at once."""
        async_client = client_of(stack)
        await async_client.close()
        with Client(stack.gateway.address, stack.space.key, stack.space.sid, plaintext=True) as c:
            made = await asyncio.gather(
                *(asyncio.to_thread(c.create_root, label=f"t{i}") for i in range(4))
            )
            labels = await asyncio.to_thread(lambda: sorted(n.label for n in c.get_tree()))
        assert len({m.id for m in made}) == 4 and labels == ["t0", "t1", "t2", "t3"]

    async def test_a_sync_watch(self, stack: Stack) -> None:
        """The sync client's watch: start(), then events as plain iteration, then close()."""

        def work() -> list[str]:
            with Client(stack.gateway.address, stack.space.key, stack.space.sid) as sync:
                watch = sync.watch(kinds=["session_committed"])
                assert watch.start() is not None
                made = [sync.create_root(label=f"w{i}").id for i in range(2)]
                seen = [next(watch).session_id for _ in made]
                watch.close()
                assert seen == made
                return seen

        assert len(await asyncio.to_thread(work)) == 2

    async def test_closed_sync_clients_leave_no_late_grpc_event_to_the_caller_s_loop(
        self, stack: Stack
    ) -> None:
        """A sync Client closed while an asyncio loop runs in the process (a thread of an
        async app): gRPC's last events for its calls, which can arrive after close() returned,
        reach a loop that still runs, never the app's loop as "Event loop is closed" (the
        loop_errors fixture fails this test on one; seen once in CI). The race showed in about
        half the runs of 200 rounds with a loop per client, so each round also checks what
        rules it out, which fails in the first round without it: the loop the closed
        client's calls ran on still takes callbacks. 40 rounds: the check, not the race,
        is what fails (200 took 20 to 30 s of each pass that runs it)."""

        def one_round(i: int) -> asyncio.AbstractEventLoop:
            with Client(stack.gateway.address, stack.space.key, stack.space.sid) as sync:
                watch = sync.watch(kinds=["session_committed"])
                watch.start()
                made = sync.create_root(label=f"late{i}").id
                assert next(watch).session_id == made  # the client's close ends the watch
            return sync._loop.loop

        for i in range(40):
            loop = await asyncio.to_thread(one_round, i)
            loop.call_soon_threadsafe(lambda: None)  # raises on a closed loop
