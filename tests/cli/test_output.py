"""How the client commands look, without a gateway: colour, times, records, errors as flags."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.timestamp_pb2 import Timestamp
from grpc.aio import AioRpcError, Metadata
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    StelloError,
    Unavailable,
    Violations,
    to_rpc_status,
)
from stello_cli.output import format as fmt
from stello_cli.output.style import PLAIN, Style, ago, display_width, one_line
from stello_cli.space.retention import action_line, policy_line
from stello_cli.turns.talk import FAILED_NOT_STORED, failed_turn, with_outcome
from stello_client import dicts
from stello_client.errors import SHUT_DOWN, flag_names, rpc_error_line
from stello_client.exceptions import RpcError

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def stamp(moment: datetime) -> Timestamp:
    """A Timestamp of an aware datetime."""
    made = Timestamp()
    made.FromDatetime(moment)
    return made


def rpc_error(error: StelloError) -> AioRpcError:
    """The client-side error a server raising `error` gives (with its status details)."""
    status = to_rpc_status(error)
    trailing = Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return AioRpcError(error.code, Metadata(), trailing, details=error.message)


class TestStyle:
    def test_colour_only_on_a_terminal_without_no_color(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A pipe gets plain text; a terminal gets ANSI codes unless NO_COLOR is set."""

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        monkeypatch.delenv("NO_COLOR", raising=False)
        assert Style.of(io.StringIO()).bold("x") == "x"
        assert Style.of(Terminal()).bold("x") == "\x1b[1mx\x1b[0m"
        monkeypatch.setenv("NO_COLOR", "1")
        assert Style.of(Terminal()).bold("x") == "x"

    @pytest.mark.parametrize(
        ("delta", "said"),
        [
            pytest.param(timedelta(seconds=3), "just now", id="now"),
            pytest.param(timedelta(seconds=42), "42 s ago", id="seconds"),
            pytest.param(timedelta(minutes=5, seconds=9), "5 min ago", id="minutes"),
            pytest.param(timedelta(hours=3), "3 h ago", id="hours"),
            pytest.param(timedelta(days=1), "1 day ago", id="a-day"),
            pytest.param(timedelta(days=12), "12 days ago", id="days"),
            pytest.param(timedelta(days=400), "2024-04-27", id="a-date"),
        ],
    )
    def test_relative_times(self, delta: timedelta, said: str) -> None:
        """Times read as how long ago, then as a date past a month."""
        assert ago(stamp(NOW - delta), NOW) == said

    def test_unset_time(self) -> None:
        """An unset timestamp reads "never"."""
        assert ago(Timestamp(), NOW) == "never"


WIDE = "漢字" * 150  # 300 characters, 600 columns
"""A text longer than every cut, in characters and in columns."""


def _cut_places() -> list[tuple[str, int]]:
    """Each text the CLI cuts (the part after its name) and the columns it is cut to."""
    record = common_pb2.Record(role=common_pb2.RECORD_ROLE_USER, content=WIDE)
    digest = common_pb2.SessionDigest(id="a" * 16, label="l", memory=WIDE, metadata={"k": WIDE})
    config = common_pb2.SessionConfig(compressor_prompt=WIDE)
    view = agent_pb2.SessionView(node=common_pb2.TopologyNode(id="a"), config=config)
    digest_rows = fmt.digests_lines([digest])
    view_line = next(line for line in fmt.view_lines(view) if line.startswith("compressor"))
    return [
        (fmt.preview(record), fmt.PREVIEW_COLUMNS),
        (fmt.record_lines(record, PLAIN, NOW, width=100)[0].split(": ", 1)[1], 100),
        (digest_rows[1].removeprefix("    metadata: k="), 100),
        (digest_rows[2].removeprefix("    memory: "), 200),
        (view_line.removeprefix("compressor prompt: "), 100),
    ]


class TestDigests:
    def test_an_empty_memory_or_insight_says_so(self) -> None:
        """A memory or insight set to "" reads "(empty)" in `digests`, as in `show`: it was
        "    memory: " with nothing after it (and a trailing space)."""
        digest = common_pb2.SessionDigest(id="a" * 16, label="l", memory="", insight="")
        assert fmt.digests_lines([digest])[1:] == ["    memory: (empty)", "    insight: (empty)"]


class TestWidths:
    def test_narrow_characters_count_as_the_rules_count_them(self) -> None:
        """Printable ASCII and box drawing, which `display_width` counts at once (a column
        each), take a column each by its rules character by character too (read with a wide
        character after them, which takes two)."""
        narrow = "".join(map(chr, [*range(0x20, 0x7F), *range(0x2500, 0x2580)]))
        assert display_width(narrow) == len(narrow)
        assert display_width(narrow + "漢") == len(narrow) + 2
        assert display_width("│  └─ ab\u0301") == 8  # with a mark: the rules (none for it)


class TestCuts:
    def test_wide_text_is_cut_by_terminal_columns(self) -> None:
        """A tree's preview, a chat banner's record, a digest's metadata and memory and a
        prompt in `show` are cut to their widths in terminal columns, a CJK character taking
        two (cut by characters, a CJK preview took twice the columns of a Latin one)."""
        for text, columns in _cut_places():
            assert text.endswith("…"), text
            assert columns - 1 <= display_width(text) <= columns, (text, columns)

    @pytest.mark.parametrize(
        ("text", "width", "cut_to"),
        [
            pytest.param("x" * 70, 60, "x" * 59 + "…", id="latin"),
            pytest.param("x" * 60, 60, "x" * 60, id="fits"),
            pytest.param("漢" * 31, 60, "漢" * 29 + "…", id="cjk"),
            pytest.param("e\u0301" * 8, 5, "e\u0301" * 4 + "…", id="combining-kept"),
            pytest.param("a漢字", 3, "a…", id="wide-at-the-edge"),
        ],
    )
    def test_one_line_cuts_by_columns(self, text: str, width: int, cut_to: str) -> None:
        """`one_line` cuts to `width` columns with an `…` (combining marks stay with their
        letter; a wide character that would cross the edge goes), and leaves what fits."""
        assert one_line(text, width) == cut_to


class TestRecords:
    def test_record_lines(self) -> None:
        """`[seq] role · time: text`, more lines indented, then each tool call."""
        call = common_pb2.ToolCall(id="call_1", name="lookup", arguments_json="{}")
        record = common_pb2.Record(
            seq=3,
            role=common_pb2.RECORD_ROLE_ASSISTANT,
            content="one\ntwo",
            tool_calls=[call],
            created_at=stamp(NOW - timedelta(minutes=2)),
        )
        assert fmt.record_lines(record, PLAIN, NOW) == [
            "[3] assistant · 2 min ago: one",
            "    two",
            "    → lookup({})  call_1",
        ]
        assert fmt.record_lines(record, PLAIN, NOW, width=12) == [
            "[3] assistant · 2 min ago: one two"
        ]

    def test_stored_text_never_drives_the_terminal(self) -> None:
        """A record's, a tool call's and a slot's control characters print as escapes
        (tabs and line breaks kept, CRLF a line break): an escape sequence a model or
        another client stored recoloured or cleared the terminal (NO_COLOR or not), a lone
        carriage return drew the rest of the line over the record's head."""
        call = common_pb2.ToolCall(id="c\x1b[1m", name="lo\x07ok", arguments_json='{"a":\n1}')
        record = common_pb2.Record(
            seq=1,
            role=common_pb2.RECORD_ROLE_TOOL,
            tool_call_id="t\x1b]0;title\x07",
            content="\x1b[31mred\x1b[0m\tcell\r\nnext\rover\x9b2J",
            tool_calls=[call],
            created_at=stamp(NOW - timedelta(minutes=2)),
        )
        assert fmt.record_lines(record, PLAIN, NOW) == [
            "[1] tool (t\\x1b]0;title\\x07) · 2 min ago: \\x1b[31mred\\x1b[0m\tcell",
            "    next\\rover\\x9b2J",
            '    → lo\\x07ok({"a": 1})  c\\x1b[1m',
        ]
        view = agent_pb2.SessionView(memory="kept\n\x1b[2Jcleared")
        lines = fmt.view_lines(view)
        at = lines.index("memory:")
        assert lines[at + 1 : at + 3] == ["    kept", "    \\x1b[2Jcleared"]

    def test_inherited_marker_hook(self) -> None:
        """A record with `inherited` set is marked; one without the field never is."""
        assert not dicts.is_inherited(common_pb2.Record(content="own"))
        assert dicts.is_inherited(common_pb2.Record(content="theirs", inherited=True))
        proto = descriptor_pb2.FileDescriptorProto(name="lineage_probe.proto", package="probe")
        message = proto.message_type.add(name="Record")
        message.field.add(
            name="inherited",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("probe.Record"))
        assert dicts.is_inherited(cls(inherited=True))
        assert not dicts.is_inherited(cls(inherited=False))


class TestErrorsAsFlags:
    def test_field_violations_name_flags(self) -> None:
        """Violations of `inherit_until_seq` and `profile_vars` read as --up-to and --var."""
        violations = Violations()
        violations.add("inherit_until_seq", "is only allowed with INHERIT context, not NONE")
        violations.add("profile_vars", "needs topic; give them in profile_vars")
        with pytest.raises(InvalidArgument) as caught:
            violations.raise_if_any()
        assert rpc_error_line(rpc_error(caught.value)) == (
            "--up-to: is only allowed with INHERIT context, not NONE; "
            "--var: needs topic; give them in --var"
        )

    def test_a_command_names_its_own_arguments(self) -> None:
        """A command's own mapping wins (`content` is MESSAGE for send)."""
        error = rpc_error(InvalidArgument.field("content", "must not be empty"))
        assert rpc_error_line(error, flags={"content": "MESSAGE"}) == ("MESSAGE: must not be empty")

    def test_an_entry_of_a_field_names_its_flag(self) -> None:
        """A map entry or list item reads as its flag (`metadata["1k"]` was printed as is
        for `--meta 1k=v`, `remove[0]` for `--remove`, `filter.metadata[...]` for --where)."""
        violations = Violations()
        violations.add('metadata["1k"]', "key must match ^[A-Za-z]")
        violations.add("remove[0]", "key 'a' is also in set")
        violations.add('filter.metadata["x y"]', "key must match ^[A-Za-z]")
        with pytest.raises(InvalidArgument) as caught:
            violations.raise_if_any()
        flags = {"metadata": "--meta", "remove": "--remove", "filter.metadata": "--where"}
        assert rpc_error_line(rpc_error(caught.value), flags=flags) == (
            "--meta \"1k\": key must match ^[A-Za-z]; --remove #1: key 'a' is also in set; "
            '--where "x y": key must match ^[A-Za-z]'
        )

    def test_a_hint_joins_the_parenthesis_the_sentence_ends_with(self) -> None:
        """The hint of a reason goes into the parenthesis the gateway's sentence ends with
        ("(known: a, b; `stello profiles` lists them)"): it was a second one after it."""
        error = rpc_error(
            FailedPrecondition(
                "fork profile 'x' is not configured (known: a, b)", reason="PROFILE_NOT_FOUND"
            )
        )
        assert rpc_error_line(error) == (
            "fork profile 'x' is not configured (known: a, b; `stello profiles` lists them)"
        )

    def test_a_full_line_says_which_flag_interrupts(self) -> None:
        """A full ENQUEUE line's message names the request's busy policy; the command line
        adds its flag's words for it (it said nothing a `stello send` user could type)."""
        error = rpc_error(
            ResourceExhausted(
                "2 turns already wait in line for session s (busy policy enqueue), ...: retry "
                "later, or set busy to interrupt (stop the running turn and run "
                "this one)",
                reason="TURN_QUEUE_FULL",
            )
        )
        assert rpc_error_line(error).endswith(
            "(stop the running turn and run this one; pass --busy interrupt)"
        )

    def test_plain_words_stay_words(self) -> None:
        """Free text keeps English words that are also field names ("context", "profile")."""
        error = rpc_error(
            FailedPrecondition("fork profile 'x' is not configured", reason="PROFILE_NOT_FOUND")
        )
        assert rpc_error_line(error) == (
            "fork profile 'x' is not configured (`stello profiles` lists them)"
        )
        assert flag_names("set session_id and label", {"session_id": "SESSION"}) == (
            "set SESSION and label"
        )

    def test_unreachable_gateway_hint(self) -> None:
        """A gateway that did not answer: where it was looked for, and what to check."""
        details = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1"
        error = AioRpcError(grpc.StatusCode.UNAVAILABLE, Metadata(), Metadata(), details)
        assert rpc_error_line(error, "127.0.0.1:1") == (
            "cannot reach the gateway at 127.0.0.1:1: is `stello up` running?"
        )
        assert rpc_error_line(error, "127.0.0.1:1", service="the tree service") == (
            "cannot reach the tree service at 127.0.0.1:1: is `stello up` running?"
        )
        # The console keeps the status code and its own words.
        assert rpc_error_line(error, "127.0.0.1:1", as_flags=False).startswith("UNAVAILABLE: ")

    def test_a_gateway_that_answered_unavailable_is_not_unreachable(self) -> None:
        """An UNAVAILABLE with a reason (the model provider is down) says the gateway's words."""
        error = rpc_error(Unavailable("the model provider failed", reason="LLM_UNAVAILABLE"))
        assert rpc_error_line(error, "127.0.0.1:1") == "the model provider failed"

    async def test_a_call_cut_by_its_servers_shutdown(self) -> None:
        """A stream still running when its server's shutdown grace ends gets grpc core's
        UNAVAILABLE "Cancelling all calls" (a real server, here a health Watch): said as
        the gateway shutting down, and that what the call did may not be stored (`stello
        send` printed "stello: Cancelling all calls" after half a reply)."""
        server = grpc.aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
            await call.read()
            stopping = asyncio.ensure_future(server.stop(0.1))
            with pytest.raises(AioRpcError) as cut:
                await call.read()
            await stopping
        assert (cut.value.code(), cut.value.details()) == (grpc.StatusCode.UNAVAILABLE, SHUT_DOWN)
        assert rpc_error_line(cut.value, "127.0.0.1:1") == (
            "the gateway at 127.0.0.1:1 shut down before the call ended (its shutdown grace "
            "ran out): what the call was doing may not have been stored; retry once it is back"
        )

    def test_no_raw_codes(self) -> None:
        """Refusals read as sentences: no status code, an archived session names the way out."""
        sid = "78a4f408-0000-4000-8000-000000000000"
        archived = FailedPrecondition(
            f"session {sid} is archived; unarchive it to continue it", reason="SESSION_ARCHIVED"
        )
        assert rpc_error_line(rpc_error(archived)) == (
            f"session {sid} is archived: `stello unarchive 78a4f408` makes it active again"
        )
        missing = rpc_error(NotFound(f"session {sid} not found"))
        assert rpc_error_line(missing) == f"session {sid} not found"
        bare = AioRpcError(grpc.StatusCode.PERMISSION_DENIED, Metadata(), Metadata(), "")
        assert rpc_error_line(bare) == "this key may not do that"

    @pytest.mark.parametrize(
        "code", [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK], ids=lambda c: c.name
    )
    def test_every_status_without_details_is_a_sentence(self, code: grpc.StatusCode) -> None:
        """A status the gateway gave no words for still reads as a sentence, not its code."""
        line = rpc_error_line(AioRpcError(code, Metadata(), Metadata(), ""))
        assert line and code.name not in line

    @pytest.mark.parametrize(
        ("field", "flag"),
        [
            ("older_than_s", "--older-than"),
            ("after_cursor", "--after"),
            ("page_size", "--page-size"),
            ("parent_id", "--parent"),
            ("inherit_until_seq", "--up-to"),
            ("max_depth", "--depth"),
        ],
    )
    def test_every_field_a_flag_sets_is_named_as_the_flag(self, field: str, flag: str) -> None:
        """`older_than_s: must not be negative` reads `--older-than: must not be negative`."""
        error = rpc_error(InvalidArgument.field(field, "must not be negative"))
        assert rpc_error_line(error) == f"{flag}: must not be negative"


class TestFailedTurn:
    @pytest.mark.parametrize(
        ("code", "reason", "stored"),
        [
            pytest.param(grpc.StatusCode.NOT_FOUND, None, "not", id="deleted"),
            pytest.param(grpc.StatusCode.UNAVAILABLE, "LLM_UNAVAILABLE", "not", id="model"),
            pytest.param(grpc.StatusCode.UNAVAILABLE, "OUTCOME_UNKNOWN", "may", id="unknown"),
            pytest.param(grpc.StatusCode.UNAVAILABLE, None, "may", id="connection"),
            pytest.param(grpc.StatusCode.DEADLINE_EXCEEDED, None, "may", id="deadline"),
        ],
    )
    def test_says_whether_the_turn_was_stored(
        self, code: grpc.StatusCode, reason: str | None, stored: str
    ) -> None:
        """A turn's stream that failed after text was shown says it was not stored when the
        gateway answered the error, and that it may have been (and how to look) when the
        error may have come once its commit was sent."""
        session = str(uuid.uuid4())
        said = failed_turn(RpcError("failed", code=code, reason=reason), session)
        if stored == "not":
            assert said == "the turn was not stored (nothing of it was written)"
        else:
            assert said.startswith("the turn may have been stored")
            assert f"`stello records {session[:8]} --limit 2`" in said

    def test_a_deadline_the_gateway_answered_saying_nothing_was_written(self) -> None:
        """An ENQUEUE turn whose --stream-timeout passed while it waited in line: the
        gateway's DEADLINE_EXCEEDED says it left the line and nothing was written, so the
        turn was not stored (it said "may have been stored", and how to settle it)."""
        error = RpcError(
            "the turn waited in line for session s until its deadline (busy policy enqueue); "
            "it left the line and nothing was written: retry, with a later deadline to wait "
            "longer",
            code=grpc.StatusCode.DEADLINE_EXCEEDED,
        )
        assert failed_turn(error, "s", "rid-7") == FAILED_NOT_STORED
        heard_nothing = RpcError("Deadline Exceeded", code=grpc.StatusCode.DEADLINE_EXCEEDED)
        assert failed_turn(heard_nothing, "s", "rid-7").startswith("the turn may have been")

    def test_the_gateways_words_are_not_said_twice(self) -> None:
        """A failed turn's line adds that the turn was not stored unless the gateway's
        sentence already says so ("...; nothing of the turn was written; the turn was not
        stored (nothing of it was written)")."""
        said = "session s was deleted during the turn; nothing of the turn was written"
        assert with_outcome(said, FAILED_NOT_STORED) == said
        assert with_outcome("session s not found", FAILED_NOT_STORED) == (
            "session s not found; the turn was not stored (nothing of it was written)"
        )
        maybe = "the turn may have been stored (its end was not heard)"
        assert with_outcome("nothing was written", maybe) == f"nothing was written; {maybe}"

    def test_with_the_turns_request_id_it_says_how_to_settle_it(self) -> None:
        """`stello send` (which takes --request-id) says to run it again with its id, not
        to read the records."""
        error = RpcError("lost", code=grpc.StatusCode.UNAVAILABLE, reason="OUTCOME_UNKNOWN")
        said = failed_turn(error, str(uuid.uuid4()), "rid-7")
        assert said == (
            "the turn may have been stored (its end was not heard): the same command with "
            "--request-id rid-7 answers it if it was, else runs it once"
        )
        not_heard = RpcError("gone", code=grpc.StatusCode.NOT_FOUND)
        assert (
            failed_turn(not_heard, "s", "rid-7")
            == "the turn was not stored (nothing of it was written)"
        )


class TestRetentionLines:
    @pytest.mark.parametrize(
        ("count", "said"),
        [pytest.param(1, "1 session)", id="one"), pytest.param(2, "2 sessions)", id="two")],
    )
    def test_the_session_count_agrees_with_its_number(self, count: int, said: str) -> None:
        """An action over one session says "1 session" ("1 sessions" before)."""
        action = common_pb2.RetentionAction(
            root_id=str(uuid.uuid4()),
            kind=common_pb2.RetentionAction.KIND_ARCHIVE,
            label="old",
            session_ids=[str(uuid.uuid4()) for _ in range(count)],
        )
        action.last_active_at.FromDatetime(datetime(2026, 11, 25, tzinfo=UTC))
        assert action_line(action).endswith(f"(last active 2026-11-25, {said}")

    def test_a_policy_of_one_day_says_day(self) -> None:
        """`retention set --archive-after 1` answers "idle 1 day" ("1 days" before)."""
        one = common_pb2.RetentionPolicy(archive_after_days=1, delete_after_days=1)
        assert policy_line(one) == "archive subtrees idle 1 day; delete subtrees archived 1 day"
        two = common_pb2.RetentionPolicy(archive_after_days=2, delete_after_days=2)
        assert policy_line(two) == "archive subtrees idle 2 days; delete subtrees archived 2 days"
