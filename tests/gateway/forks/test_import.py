"""ImportSession: a session from given records, config and slots, through the saga (DESIGN §4.1)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from agent_gateway.app import create_app
from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.common.v1 import common_pb2
from stello.errors import error_info_reason, field_violations
from stello.settings import StelloSettings
from tests.gateway.conftest import (
    Backends,
    Stack,
    StackMaker,
    close_stack,
    new_id,
    open_stack,
    record,
    row_counts,
    rpc_error,
)
from tests.gateway.probes import provisional_ids
from tests.gateway.turns_support import send
from tests.storage.tokens import token_problems
from tests.support.fixtures import ServerStarter, TestSpace
from tests.support.hostile import NOT_STRICT_JSON, deep_json_object

pytestmark = pytest.mark.sql

ARCHIVED = common_pb2.SESSION_STATUS_ARCHIVED


def stamp(seconds: int) -> timestamp_pb2.Timestamp:
    """A timestamp `seconds` after 2024-01-01."""
    return timestamp_pb2.Timestamp(seconds=1_704_067_200 + seconds)


def metadata(**values: Any) -> struct_pb2.Struct:
    """A Struct of `values`."""
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def conversation() -> list[common_pb2.Record]:
    """A conversation with every kind of record: timestamps, a tool round trip, metadata."""
    call = common_pb2.ToolCall(id="call_1", name="lookup", arguments_json='{"q": "x"}')
    return [
        record("user", "what is x?", created_at=stamp(1), seq=41),
        record("assistant", "", tool_calls=[call], created_at=stamp(2)),
        record(
            "tool",
            "x is 1",
            tool_call_id="call_1",
            created_at=stamp(3),
            metadata=metadata(is_error=False),
        ),
        record("assistant", "x is 1.", created_at=stamp(4), metadata=metadata(model="m", n=2)),
    ]


def import_request(stack: Stack, **fields: Any) -> agent_pb2.ImportSessionRequest:
    """An ImportSessionRequest in the stack's space (label "imported" unless given)."""
    fields.setdefault("label", "imported")
    return agent_pb2.ImportSessionRequest(space_id=stack.space.sid, **fields)


async def import_session(stack: Stack, **fields: Any) -> common_pb2.SessionSummary:
    """ImportSession; its session."""
    reply: agent_pb2.ImportSessionResponse = await stack.gw.ImportSession(
        import_request(stack, **fields)
    )
    return reply.session


def content(records: list[common_pb2.Record]) -> list[tuple[Any, ...]]:
    """What a record holds but its seq."""
    return [
        (
            r.role,
            r.content,
            [(c.id, c.name, c.arguments_json) for c in r.tool_calls],
            r.tool_call_id if r.HasField("tool_call_id") else None,
            r.created_at.seconds,
            dict(r.metadata),
        )
        for r in records
    ]


class TestImport:
    async def test_everything_is_kept(self, stack: Stack) -> None:
        """Records (roles, times, tool calls, metadata), config, slots, status and turns arrive."""
        parent = await stack.root(label="parent")
        config = common_pb2.SessionConfig(system_prompt="cfg", skills=common_pb2.SkillList())
        session = await import_session(
            stack,
            parent_id=parent.id,
            label="brought back",
            status=ARCHIVED,
            config=config,
            system_prompt="be brief",
            memory="remembered",
            insight="",
            records=conversation(),
            turn_count=3,
        )
        assert (session.label, session.parent_id, session.status) == (
            "brought back",
            parent.id,
            ARCHIVED,
        )
        assert session.turn_count == 3
        view = await stack.view(session.id)
        assert view.config == config and view.config.HasField("skills")
        assert (view.system_prompt, view.memory, view.insight) == ("be brief", "remembered", "")
        assert view.node.status == ARCHIVED and view.turn_count == 3
        records = await stack.records(session.id)
        assert [r.seq for r in records] == [1, 2, 3, 4]  # the given seq (41) is ignored
        assert content(records) == content(conversation())
        assert list((await stack.view(parent.id)).node.children) == [session.id]

    async def test_the_largest_turn_count_takes_more_turns(self, stack: Stack) -> None:
        """An import of 2,147,483,647 turns (int32's largest) is a session like any other:
        its next turn is stored and the count stays there (it overflowed the column:
        INTERNAL on every Send)."""
        most = 2**31 - 1
        session = await import_session(stack, turn_count=most)
        assert session.turn_count == most
        reply = await send(stack, session.id, "one more")
        assert reply.assistant.content == "echo: one more"
        assert (await stack.view(session.id)).turn_count == most

    async def test_records_are_counted_in_tokens(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """Imported records get their token estimates and cumulatives like any append."""
        session = await import_session(stack, records=conversation())
        assert await token_problems(pool, stack.space.id, uuid.UUID(session.id)) == []

    async def test_root_with_nothing(self, stack: Stack) -> None:
        """Only a label: a root with no records, no config and empty slots."""
        session = await import_session(stack, label="bare")
        view = await stack.view(session.id)
        assert not session.HasField("parent_id")
        assert not view.HasField("config")
        assert not any(view.HasField(s) for s in ("system_prompt", "memory", "insight"))
        assert await stack.records(session.id) == []

    async def test_inherits_like_a_fork(self, stack: Stack) -> None:
        """With inherit_until_seq the session starts with what a Fork INHERIT would copy."""
        source = await import_session(stack, label="source", records=conversation())
        for until in (1, 2, 4):
            fork = await stack.fork(
                source.id, context=common_pb2.FORK_CONTEXT_INHERIT, inherit_until_seq=until
            )
            own = [record("user", "mine", created_at=stamp(9))]
            imported = await import_session(
                stack, source_session_id=source.id, inherit_until_seq=until, records=own
            )
            forked = await stack.records(fork.id)
            records = await stack.records(imported.id)
            assert records[: len(forked)] == forked
            assert content(records[len(forked) :]) == content(own)
            assert (await stack.view(imported.id)).node.source_session_id == source.id
        # seq 2 cuts the tool group open: the call is left out, as a fork leaves it out.
        cut = await import_session(stack, source_session_id=source.id, inherit_until_seq=2)
        assert [r.content for r in await stack.records(cut.id)] == ["what is x?"]

    async def test_a_cut_beyond_the_source_is_out_of_range_like_a_forks(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """inherit_until_seq beyond the source's last seq is OUT_OF_RANGE naming it, as a
        Fork's is, and nothing is written: the import inherited everything instead."""
        source = await import_session(stack, label="source", records=conversation())
        before = await row_counts(pool, stack.space)
        for beyond in (5, 2**63 - 1):
            error = await rpc_error(
                import_session(stack, source_session_id=source.id, inherit_until_seq=beyond)
            )
            assert error.code() is grpc.StatusCode.OUT_OF_RANGE, error
            assert [v.field for v in field_violations(error)] == ["inherit_until_seq"]
        assert await row_counts(pool, stack.space) == before

    async def test_a_record_over_the_content_limit_is_imported(
        self, make_stack: StackMaker
    ) -> None:
        """Records are bounded by the shared record limit, not by Send's content limit: a long
        answer exported from one deployment re-imports."""
        stack = await make_stack(max_content_bytes=1000)
        imported = await import_session(stack, records=[record("assistant", "y" * 5000)])
        assert [len(r.content) for r in await stack.records(imported.id)] == [5000]

    async def test_source_without_inheritance_is_a_link(self, stack: Stack) -> None:
        """source_session_id alone records the source and copies nothing."""
        source = await import_session(stack, label="source", records=conversation())
        linked = await import_session(stack, source_session_id=source.id)
        assert (await stack.view(linked.id)).node.source_session_id == source.id
        assert await stack.records(linked.id) == []


@pytest.fixture(name="small")
async def _small(
    start_server: ServerStarter, backends: Backends, space: TestSpace, stack: Stack
) -> AsyncIterator[Stack]:
    """A gateway whose shared record and slot limits (STELLO_MAX_RECORD_BYTES,
    STELLO_MAX_SLOT_BYTES) are 1000 bytes, over the same storage and tree."""

    def factory(settings: StelloSettings, p: asyncpg.Pool, k: KeyStore) -> Any:
        limited = settings.model_copy(update={"max_record_bytes": 1000, "max_slot_bytes": 1000})
        return create_app(limited, p, k, backends.gateway_config())

    gateway = await start_server(factory)
    small = await open_stack(backends, gateway, space, stack.summarizer)
    yield small
    await close_stack(small)


class TestRefused:
    @pytest.mark.parametrize(
        ("fields", "bad"),
        [
            pytest.param({"label": ""}, ["label"], id="empty-label"),
            pytest.param({"label": "x" * 201}, ["label"], id="long-label"),
            pytest.param({"label": "a\x00b"}, ["label"], id="nul-label"),
            pytest.param({"parent_id": "p"}, ["parent_id"], id="parent"),
            pytest.param({"status": 7}, ["status"], id="status"),
            pytest.param({"turn_count": -1}, ["turn_count"], id="turns"),
            pytest.param({"inherit_until_seq": 3}, ["inherit_until_seq"], id="until-no-source"),
            pytest.param({"memory": "m\x00"}, ["memory"], id="nul-slot"),
            pytest.param({"insight": "i" * 2000}, ["insight"], id="big-slot"),
            pytest.param(
                {"config": common_pb2.SessionConfig(system_prompt="\x00")},
                ["config.system_prompt"],
                id="nul-config",
            ),
            pytest.param(
                {"records": [common_pb2.Record(content="x")]}, ["records[0].role"], id="role"
            ),
            pytest.param(
                {"records": [record("user", "ok"), record("user", "x" * 2000)]},
                ["records[1]"],
                id="big-record",
            ),
            pytest.param(
                {"records": [record("user", "x\x00")]}, ["records[0].content"], id="nul-content"
            ),
            pytest.param(
                {
                    "records": [
                        record("user", "x", created_at=timestamp_pb2.Timestamp(seconds=-(10**12)))
                    ]
                },
                ["records[0].created_at"],
                id="time",
            ),
            pytest.param(
                {
                    "records": [
                        record(
                            "user",
                            "x",
                            created_at=timestamp_pb2.Timestamp(
                                seconds=253_402_300_799, nanos=999_999_000
                            ),
                        )
                    ]
                },
                ["records[0].created_at"],
                id="the-last-instant",
            ),
            pytest.param(
                {"records": [record("assistant", "", tool_calls=[common_pb2.ToolCall(id="c")])]},
                ["records[0].tool_calls[0].name"],
                id="tool-name",
            ),
            pytest.param(
                {"records": [record("assistant", "", tool_calls=[common_pb2.ToolCall(name="n")])]},
                ["records[0].tool_calls[0].id"],
                id="tool-id",
            ),
            pytest.param(
                {
                    "records": [
                        record("tool", "result"),
                        record("user", "x", tool_calls=[common_pb2.ToolCall(id="c", name="n")]),
                        record("assistant", "x", tool_call_id="c"),
                    ]
                },
                ["records[0].tool_call_id", "records[1].tool_calls", "records[2].tool_call_id"],
                id="tool-fields-on-the-wrong-role",
            ),
            pytest.param({"request_id": "r" * 201}, ["request_id"], id="request-id"),
        ],
    )
    async def test_bad_fields_are_named_and_nothing_is_written(
        self, small: Stack, pool: asyncpg.Pool, fields: dict[str, Any], bad: list[str]
    ) -> None:
        """Each bad field is INVALID_ARGUMENT naming it, before any row is written (sizes
        against the shared 1000-byte record and slot limits)."""
        before = await row_counts(pool, small.space)
        error = await rpc_error(import_session(small, **fields))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
        assert [v.field for v in field_violations(error)] == bad
        assert await row_counts(pool, small.space) == before

    async def test_size_limits_name_the_shared_settings(
        self, small: Stack, pool: asyncpg.Pool
    ) -> None:
        """A record over STELLO_MAX_RECORD_BYTES and a slot over STELLO_MAX_SLOT_BYTES are
        named with the setting that bounds them, together, and nothing is written."""
        before = await row_counts(pool, small.space)
        error = await rpc_error(
            import_session(small, system_prompt="p" * 1001, records=[record("user", "x" * 1000)])
        )
        described = {v.field: v.description for v in field_violations(error)}
        assert set(described) == {"system_prompt", "records[0]"}
        assert "STELLO_MAX_SLOT_BYTES" in described["system_prompt"]
        assert "STELLO_MAX_RECORD_BYTES" in described["records[0]"]
        assert await row_counts(pool, small.space) == before

    @pytest.mark.parametrize(
        "arguments",
        [
            "not json",
            "[1, 2]",
            '"text"',
            pytest.param(deep_json_object(1000), id="nested-1000-deep"),
            *(pytest.param(text, id=text) for text in NOT_STRICT_JSON),
        ],
    )
    async def test_tool_arguments_must_be_a_json_object(
        self, stack: Stack, pool: asyncpg.Pool, arguments: str
    ) -> None:
        """Tool-call arguments that are not a JSON object text are refused by the gateway
        itself, naming the field, before the provisional session is written: nested past
        what Python's json reads (it raised RecursionError: INTERNAL), or holding a NaN or
        infinite number (which it read) too."""
        call = common_pb2.ToolCall(id="c", name="lookup", arguments_json=arguments)
        before = await row_counts(pool, stack.space)
        error = await rpc_error(
            import_session(stack, records=[record("assistant", "", tool_calls=[call])])
        )
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
        fields = [v.field for v in field_violations(error)]
        assert fields == ["records[0].tool_calls[0].arguments_json"]
        assert await row_counts(pool, stack.space) == before

    async def test_deep_metadata_is_refused(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """Metadata nested deeper than 16 levels is INVALID_ARGUMENT naming it."""
        deep: dict[str, Any] = {}
        for _ in range(20):
            deep = {"d": deep}
        error = await rpc_error(
            import_session(stack, records=[record("user", "x", metadata=metadata(**deep))])
        )
        assert [v.field for v in field_violations(error)] == ["records[0].metadata"]

    async def test_metadata_that_is_not_json_is_refused(self, stack: Stack) -> None:
        """NaN in metadata (no JSON can hold it) is INVALID_ARGUMENT naming the metadata."""
        error = await rpc_error(
            import_session(stack, records=[record("user", "x", metadata=metadata(n=float("nan")))])
        )
        assert [v.field for v in field_violations(error)] == ["records[0].metadata"]

    async def test_unknown_or_foreign_parent_and_source(
        self, stack: Stack, pool: asyncpg.Pool, other_space: TestSpace
    ) -> None:
        """A parent or source of another space, or none at all, is NOT_FOUND; nothing is left."""
        other = await open_stack(stack.backends, stack.gateway, other_space, stack.summarizer)
        try:
            theirs = await other.root(label="theirs")
            counts = await row_counts(pool, other_space)
            for fields in (
                {"parent_id": theirs.id},
                {"source_session_id": theirs.id},
                {"source_session_id": theirs.id, "inherit_until_seq": 5},
                {"parent_id": new_id()},
            ):
                error = await rpc_error(import_session(stack, **fields))
                assert error.code() is grpc.StatusCode.NOT_FOUND, fields
            assert await row_counts(pool, other_space) == counts
            tree = await stack.gw.GetTree(agent_pb2.GetTreeRequest(space_id=stack.space.sid))
            assert list(tree.nodes) == []
            assert await provisional_ids(pool, stack.space) == []
        finally:
            await close_stack(other)

    async def test_another_spaces_id_is_not_found(
        self, stack: Stack, other_space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """Importing into a space the key does not reach is NOT_FOUND and writes nothing there."""
        counts = await row_counts(pool, other_space)
        error = await rpc_error(
            stack.gw.ImportSession(
                agent_pb2.ImportSessionRequest(space_id=other_space.sid, label="x")
            )
        )
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert await row_counts(pool, other_space) == counts

    async def test_write_over_the_message_limit(
        self,
        start_server: ServerStarter,
        backends: Backends,
        space: TestSpace,
        stack: Stack,
        pool: asyncpg.Pool,
    ) -> None:
        """A write over the message limit is refused on `records`, before anything is
        written; inherited records cost nothing (a lineage, DESIGN §4.4), so a child of a
        source as large as the limit allows is made."""

        def small(settings: StelloSettings, p: asyncpg.Pool, k: KeyStore) -> Any:
            limited = settings.model_copy(update={"max_message_bytes": 200_000})
            return create_app(limited, p, k, backends.gateway_config())

        gateway = await start_server(small)
        limited = await open_stack(backends, gateway, space, stack.summarizer)
        try:
            big = [record("user", "x" * 50_000) for _ in range(2)]
            source = await import_session(limited, label="source", records=big)
            child = await import_session(
                limited, source_session_id=source.id, inherit_until_seq=2, records=big
            )
            page = await limited.gw.ListRecords(
                agent_pb2.ListRecordsRequest(space_id=space.sid, session_id=child.id, limit=1)
            )
            assert page.records[0].inherited and page.records[0].seq == 1
            before = await row_counts(pool, space)
            error = await rpc_error(
                import_session(limited, source_session_id=source.id, records=[*big, *big[:1]])
            )
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
            [violation] = field_violations(error)
            assert violation.field == "records"
            assert "STELLO_MAX_MESSAGE_BYTES" in violation.description
            assert await row_counts(pool, space) == before
        finally:
            await close_stack(limited)


class TestRequestId:
    async def test_retry_answers_the_same_session(self, stack: Stack, pool: asyncpg.Pool) -> None:
        """The same request_id and request answer the first session; one session exists."""
        first = await import_session(stack, records=conversation(), request_id="imp")
        counts = await row_counts(pool, stack.space)
        again = await import_session(stack, records=conversation(), request_id="imp")
        assert again.id == first.id
        assert await row_counts(pool, stack.space) == counts

    async def test_reuse_for_another_request_is_refused(
        self, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """Another request under a used request_id is ALREADY_EXISTS and writes nothing."""
        await import_session(stack, label="one", request_id="imp")
        counts = await row_counts(pool, stack.space)
        error = await rpc_error(import_session(stack, label="two", request_id="imp"))
        assert error.code() is grpc.StatusCode.ALREADY_EXISTS
        assert error_info_reason(error) == "REQUEST_ID_REUSED"
        assert await row_counts(pool, stack.space) == counts
        assert await provisional_ids(pool, stack.space) == []

    async def test_scope_is_its_own(self, stack: Stack) -> None:
        """A request_id used by CreateRoot does not collide with ImportSession's."""
        root = await stack.root(label="r", request_id="shared")
        imported = await import_session(stack, label="r", request_id="shared")
        assert imported.id != root.id

    async def test_no_key(self, stack: Stack) -> None:
        """Without a key ImportSession is UNAUTHENTICATED."""
        async with stack.gateway.channel() as channel:
            stub = agent_pb2_grpc.AgentGatewayStub(channel)
            error = await rpc_error(stub.ImportSession(import_request(stack)))
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
