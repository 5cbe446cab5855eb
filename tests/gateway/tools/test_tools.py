"""Tool calls (DESIGN §4.2): client tools, SubmitToolResults, the built-in stello_create_session.

Restates STELLO-SPEC §6.2 items 29-32 and §6.6 items 11 and 41-57 for gRPC:
tool results come through SubmitToolResults (DESIGN §5.6), the engine's tool
loop is the gateway's built-in loop, the "runtime turn counter" is the
stored turn_count (§5.7), and an abort is the client cancelling the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import asyncpg
import grpc
import pytest

from agent_gateway.llm import LLMMessage, ToolCallSpec
from agent_gateway.tools.base import CREATE_SESSION
from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello.errors import Unavailable, error_info_reason, field_violations
from stello.reasons import LLM_UNAVAILABLE
from tests.gateway.conftest import Stack, StackMaker, record, row_counts, rpc_error
from tests.gateway.turns_support import (
    SpyProvider,
    answer,
    calls_ended,
    roles,
    send,
    stream_events,
    submit,
    tool_call,
    tool_definition,
)

pytestmark = pytest.mark.sql

LOOKUP = tool_definition("lookup", "Look something up")
SEARCH = tool_definition("search")


def create_call(call_id: str, **arguments: object) -> ToolCallSpec:
    """A call of the built-in tool."""
    return ToolCallSpec(call_id, CREATE_SESSION, dict(arguments))


class SlowForks:
    """A saga fault seam that holds each fork at one point (and counts how many at once)."""

    def __init__(
        self, delay_s: float = 0.0, gate: asyncio.Event | None = None, *, meet: int = 0
    ) -> None:
        self.delay_s = delay_s
        self.gate = gate
        self.meet = meet
        """Hold each fork until this many are held at once (for at most `delay_s`)."""
        self.active = 0
        self.peak = 0
        self.reached = asyncio.Event()
        self.met = asyncio.Event()
        self.armed = False

    async def hit(self, point: str) -> None:
        """Hold forks after their provisional creation, once armed."""
        if point != "fork.after_create" or not self.armed:
            return
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.reached.set()
        if self.meet and self.active >= self.meet:
            self.met.set()
        try:
            if self.meet:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.met.wait(), self.delay_s)
            else:
                await asyncio.sleep(self.delay_s)
            if self.gate is not None:
                await self.gate.wait()
        finally:
            self.active -= 1


async def children(stack: Stack, session_id: str) -> list[agent_pb2.SessionView]:
    """The visible children of a session."""
    view = await stack.view(session_id)
    return [await stack.view(child) for child in view.node.children]


class TestClientTools:
    """A client tool call stops the turn; SubmitToolResults continues it."""

    async def test_pending_call_stored_exactly(self, make_stack: StackMaker) -> None:
        """A tool-only answer has empty content and is stored with exactly its calls (29, 30)."""
        spy = SpyProvider().then(answer("", tool_call("search", "tc_1", q="test")))
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "搜索 test", tools=[SEARCH])
        expected = common_pb2.ToolCall(id="tc_1", name="search", arguments_json='{"q":"test"}')
        assert reply.assistant.content == ""
        assert list(reply.pending_tool_calls) == [expected]
        stored = await stack.records(root.id)
        assert list(stored[1].tool_calls) == [expected]

    async def test_submit_continues_turn(self, make_stack: StackMaker) -> None:
        """The continuation sees the call and its result; roles become user, assistant, tool,
        assistant; the turn is counted once (item 31; §6.6 items 11, 41)."""
        spy = SpyProvider().then(answer("", tool_call("search", "tc_1", q="test")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "搜索 test", tools=[SEARCH])
        reply = await submit(stack, root.id, ("tc_1", '{"hits":3}'))
        second = spy.turns[1].messages
        assert [(m.role, m.content) for m in second] == [
            ("system", second[0].content),
            ("user", "搜索 test"),
            ("assistant", ""),
            ("tool", '{"hits":3}'),
        ]
        assert second[2].tool_calls == (ToolCallSpec("tc_1", "search", {"q": "test"}),)
        assert second[3].tool_call_id == "tc_1"
        assert roles(await stack.records(root.id)) == ["user", "assistant", "tool", "assistant"]
        assert roles(reply.records) == ["tool", "assistant"]
        assert reply.assistant.content == 'tool results: search: {"hits":3}'
        assert (await stack.view(root.id)).turn_count == 1

    async def test_error_result_reaches_model(self, make_stack: StackMaker) -> None:
        """A failed tool result is shown as a failed call and kept in metadata (§6.6 item 49)."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")), answer("fallback"))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[LOOKUP])
        reply = await submit(stack, root.id, ("c1", "split blocked", True))
        assert spy.turns[1].messages[-1] == LLMMessage(
            "tool", "split blocked", tool_call_id="c1", is_error=True
        )
        assert reply.assistant.content == "fallback"
        assert reply.records[0].metadata.fields["is_error"].bool_value is True

    async def test_results_stored_in_call_order(self, make_stack: StackMaker) -> None:
        """Results given in any order are stored in the model's call order."""
        spy = SpyProvider().then(
            answer("", tool_call("lookup", "a"), tool_call("lookup", "b")), answer("ok")
        )
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[LOOKUP])
        reply = await submit(stack, root.id, ("b", "B"), ("a", "A"))
        assert [(r.tool_call_id, r.content) for r in reply.records[:2]] == [("a", "A"), ("b", "B")]

    async def test_model_calls_again(self, make_stack: StackMaker) -> None:
        """A continuation may stop on new client calls, which a second submit answers."""
        spy = SpyProvider().then(
            answer("", tool_call("lookup", "c1")),
            answer("", tool_call("lookup", "c2")),
            answer("done"),
        )
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[LOOKUP])
        middle = await submit(stack, root.id, ("c1", "1"), tools=[LOOKUP])
        assert [c.id for c in middle.pending_tool_calls] == ["c2"]
        final = await submit(stack, root.id, ("c2", "2"))
        assert final.assistant.content == "done" and not final.pending_tool_calls

    @pytest.mark.parametrize(
        ("results", "field"),
        [
            pytest.param(
                [("nope", "x"), ("c1", "y"), ("c2", "z")], "results[0].tool_call_id", id="unknown"
            ),
            pytest.param([("c1", "y")], "results", id="missing"),
        ],
    )
    async def test_results_must_match_pending(
        self,
        make_stack: StackMaker,
        pool: asyncpg.Pool,
        results: list[tuple[str, str]],
        field: str,
    ) -> None:
        """Results for unknown calls, or leaving one out, are INVALID_ARGUMENT; nothing written."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1"), tool_call("lookup", "c2")))
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "go", tools=[LOOKUP])
        before = await row_counts(pool, stack.space)
        error = await rpc_error(submit(stack, root.id, *results))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in [v.field for v in field_violations(error)]
        assert await row_counts(pool, stack.space) == before
        assert len(spy.turns) == 1
        await submit(stack, root.id, ("c1", "1"), ("c2", "2"))

    async def test_no_pending_calls(self, make_stack: StackMaker) -> None:
        """Submitting with nothing pending is FAILED_PRECONDITION NO_PENDING_TOOL_CALLS."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        await send(stack, root.id, "plain")
        error = await rpc_error(submit(stack, root.id, ("c1", "x")))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_info_reason(error) == "NO_PENDING_TOOL_CALLS"

    async def test_tool_records_from_storage_count(self, make_stack: StackMaker) -> None:
        """Stored records are no turns; a Send counts one, a continuation none (§6.6 41)."""
        spy = SpyProvider().then(answer("", tool_call("lookup", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        await stack.append(
            root.id, *(record(r, str(i)) for i, r in enumerate(["user", "assistant"] * 2))
        )
        assert (await stack.view(root.id)).turn_count == 0
        await send(stack, root.id, "go", tools=[LOOKUP])
        assert (await stack.view(root.id)).turn_count == 1
        await submit(stack, root.id, ("c1", "r"))
        assert (await stack.view(root.id)).turn_count == 1


class TestToolDeclarations:
    """Client tool names (§6.6 items 55-56 restated: built-ins cannot be shadowed)."""

    @pytest.mark.parametrize(
        ("tools", "field"),
        [
            pytest.param([tool_definition(CREATE_SESSION)], "tools[0].name", id="builtin-name"),
            pytest.param([LOOKUP, LOOKUP], "tools[1].name", id="duplicate"),
            pytest.param([tool_definition("has space")], "tools[0].name", id="bad-name"),
            pytest.param([tool_definition("")], "tools[0].name", id="empty"),
            pytest.param([tool_definition("a" * 65)], "tools[0].name", id="name-65"),
            pytest.param([tool_definition("a.b")], "tools[0].name", id="name-dot"),
            pytest.param([tool_definition(f"t{i}") for i in range(129)], "tools", id="129-tools"),
        ],
    )
    async def test_invalid_tools(
        self, make_stack: StackMaker, tools: list[common_pb2.ToolDefinition], field: str
    ) -> None:
        """Invalid client tool declarations are INVALID_ARGUMENT naming the tool."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        error = await rpc_error(send(stack, root.id, "hi", tools=tools))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [v.field for v in field_violations(error)] == [field]
        assert spy.calls == []

    @pytest.mark.parametrize(
        ("schema", "got"),
        [
            pytest.param({"type": "string"}, "type 'string'", id="string"),
            pytest.param({"properties": {"q": {"type": "string"}}}, "no type", id="no-type"),
            pytest.param({"type": ["object", "null"]}, "type ['object', 'null']", id="type-list"),
        ],
    )
    async def test_parameters_that_are_not_an_object_schema(
        self, make_stack: StackMaker, schema: dict[str, Any], got: str
    ) -> None:
        """A tool whose parameters are not an object schema is INVALID_ARGUMENT naming the tool
        and `tools[i].parameters`, before any model call: both providers refuse it (the turn
        was sent on and failed at the model)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        tools = [LOOKUP, tool_definition("fetch", **schema)]
        error = await rpc_error(send(stack, root.id, "hi", tools=tools))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert [(v.field, v.description) for v in field_violations(error)] == [
            (
                "tools[1].parameters",
                'tool \'fetch\': must be an object schema, {"type": "object", "properties": '
                f"{{...}}}} (what OpenAI and Anthropic take as a tool's parameters), got {got}",
            )
        ]
        assert spy.calls == []

    async def test_the_documented_limits_are_allowed(self, make_stack: StackMaker) -> None:
        """128 tools, a name of 64 characters (common.v1 ToolDefinition's limits) are a turn."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        tools = [tool_definition(f"t{i}") for i in range(127)] + [tool_definition("a" * 64)]
        await send(stack, root.id, "hi", tools=tools)
        assert len(spy.calls) == 1

    async def test_one_call_without_tools(self, make_stack: StackMaker) -> None:
        """A turn whose model calls no tool makes exactly one LLM call (§6.6 item 44)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root()
        await send(stack, root.id, "hi", tools=[LOOKUP])
        assert len(spy.calls) == 1


class TestBuiltinTool:
    """stello_create_session runs in the gateway (spec §4.4.5)."""

    async def test_creates_child(self, make_stack: StackMaker) -> None:
        """The tool forks the session, answers its id and label, and the model goes on (45)."""
        spy = SpyProvider()
        stack = await make_stack(spy)
        root = await stack.root(system_prompt="parent prompt")
        await send(stack, root.id, "earlier")
        arguments = {"label": "kid", "prompt": "open", "context": "inherit"}
        reply = await send(stack, root.id, f"/tool {CREATE_SESSION} {json.dumps(arguments)}")
        assert roles(reply.records) == ["user", "assistant", "tool", "assistant"]
        result = json.loads(reply.records[2].content)
        kids = await children(stack, root.id)
        assert [k.node.id for k in kids] == [result["sessionId"]]
        assert result["label"] == "kid"
        assert kids[0].system_prompt == "parent prompt"
        assert [r.content for r in await stack.records(result["sessionId"])] == [
            "earlier",
            "echo: earlier",
            "open",
        ]
        assert len(spy.turns) == 3  # the earlier turn, then the tool round's two calls
        assert spy.turns[2].messages[-1].role == "tool"

    async def test_options_pass_through(self, make_stack: StackMaker) -> None:
        """Profile, its variables, skills and system prompt reach the fork."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        arguments = {
            "label": "research",
            "profile": "research",
            "profileVars": {"topic": "tides", "region": "Brittany"},
            "skills": [],
            "systemPrompt": "Be precise.",
        }
        reply = await send(stack, root.id, f"/tool {CREATE_SESSION} {json.dumps(arguments)}")
        child = await stack.view(json.loads(reply.records[2].content)["sessionId"])
        assert child.system_prompt == "You research tides in Brittany.\n\nBe precise."
        assert child.config.HasField("skills") and list(child.config.skills.names) == []

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            pytest.param(
                {"label": "x", "profile": "nope"}, 'Profile "nope" is not configured', id="profile"
            ),
            pytest.param({"prompt": "p"}, "label is required", id="no-label"),
            pytest.param({"label": "a\nb"}, "label must be one line", id="two-line-label"),
            pytest.param({"label": "x", "context": "all"}, "context must be", id="context"),
            pytest.param({"label": "x", "skills": "a"}, "skills must be", id="skills"),
            pytest.param(
                {"label": "x", "skills": ["a"]},
                "skills[0] names no configured skill: this gateway has none, got 'a'",
                id="unconfigured-skill",
            ),
            pytest.param({"label": "x", "profile": "research"}, "topic", id="missing-variable"),
        ],
    )
    async def test_refused_arguments(
        self, make_stack: StackMaker, arguments: dict[str, object], message: str
    ) -> None:
        """Bad arguments answer an error result the model sees; no session is made."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        reply = await send(stack, root.id, f"/tool {CREATE_SESSION} {json.dumps(arguments)}")
        tool = reply.records[2]
        assert tool.metadata.fields["is_error"].bool_value is True
        assert message in tool.content
        assert await children(stack, root.id) == []

    async def test_builtins_run_in_parallel(self, make_stack: StackMaker) -> None:
        """Three calls in one answer run at once, results in call order (§6.6 item 47)."""
        forks = SlowForks(delay_s=5.0, meet=3)  # run one after another, they never meet
        spy = SpyProvider().then(
            answer("", *(create_call(f"c{i}", label=f"k{i}") for i in range(3))), answer("ok")
        )
        stack = await make_stack(spy, faults=forks)
        root = await stack.root()
        forks.armed = True
        reply = await send(stack, root.id, "fan out")
        assert forks.peak == 3
        labels = [json.loads(r.content)["label"] for r in reply.records if r.role == 4]
        assert labels == ["k0", "k1", "k2"]

    async def test_a_retried_turn_whose_model_asks_another_fork_makes_it(
        self, make_stack: StackMaker
    ) -> None:
        """A turn failed after its built-in fork; its retry with the same request_id, whose
        model now asks another fork at that place, has it made (the first stays, as a
        built-in's effects do; a retry asking the same fork makes none: test_lease_outage).
        Before, the model was told "request_id ... was already used for a different
        request" (explore10 F5)."""
        down = Unavailable("provider down", reason=LLM_UNAVAILABLE)
        spy = SpyProvider().then(
            answer("", create_call("a", label="branch-A")),
            down,
            answer("", create_call("a", label="branch-B")),
            answer("made B"),
            answer("", create_call("a", label="branch-B")),
            answer("made B again"),
        )
        stack = await make_stack(spy)
        root = await stack.root()
        with pytest.raises(grpc.aio.AioRpcError):
            await send(stack, root.id, "fork please", request_id="turn-1")
        reply = await send(stack, root.id, "fork please", request_id="turn-1")
        [tool] = [r for r in reply.records if r.role == common_pb2.RECORD_ROLE_TOOL]
        assert not tool.metadata.fields["is_error"].bool_value, tool.content
        assert json.loads(tool.content)["label"] == "branch-B"
        labels = sorted(k.node.label for k in await children(stack, root.id))
        assert labels == ["branch-A", "branch-B"]
        await send(stack, root.id, "fork please", request_id="turn-2")  # a new turn: B again
        assert len(await children(stack, root.id)) == 3

    async def test_failing_call_leaves_siblings(self, make_stack: StackMaker) -> None:
        """The middle of three calls fails; its siblings succeed; results in order (§6.6 48)."""
        spy = SpyProvider().then(
            answer(
                "",
                create_call("a", label="first"),
                create_call("b", label="second", profile="missing"),
                create_call("c", label="third"),
            ),
            answer("fallback"),
        )
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "fan out")
        tools = [r for r in reply.records if r.role == common_pb2.RECORD_ROLE_TOOL]
        assert [t.tool_call_id for t in tools] == ["a", "b", "c"]
        assert [t.metadata.fields["is_error"].bool_value for t in tools] == [False, True, False]
        assert len(await children(stack, root.id)) == 2

    async def test_rounds_bounded(self, make_stack: StackMaker, pool: asyncpg.Pool) -> None:
        """An endless loop stops after max rounds: RESOURCE_EXHAUSTED, turn not written, the
        fork it made stays (§6.6 item 50)."""
        spy = SpyProvider().then(
            answer("", create_call("c1", label="one")), answer("", create_call("c2", label="two"))
        )
        stack = await make_stack(spy, max_tool_rounds=1)
        root = await stack.root()
        error = await rpc_error(send(stack, root.id, "loop"))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info_reason(error) == "TOOL_ROUNDS_EXCEEDED"
        assert [c.node.label for c in await children(stack, root.id)] == ["one"]
        assert await stack.records(root.id) == []
        await send(stack, root.id, "next")

    async def test_unknown_tool(self, make_stack: StackMaker) -> None:
        """A call to an undeclared tool answers 'Unknown tool' and the model goes on (§6.6 55)."""
        spy = SpyProvider().then(answer("", tool_call("nonexistent", "c1")))
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "go")
        assert reply.records[2].content == "Unknown tool: nonexistent"
        assert (
            reply.assistant.content
            == "tool results: nonexistent (error): Unknown tool: nonexistent"
        )

    async def test_mixed_builtin_and_client(self, make_stack: StackMaker) -> None:
        """Built-in calls run at once; the client's call stays pending and is answered later."""
        spy = SpyProvider().then(
            answer("", create_call("b1", label="kid"), tool_call("lookup", "c1"))
        )
        stack = await make_stack(spy)
        root = await stack.root()
        reply = await send(stack, root.id, "both", tools=[LOOKUP])
        assert roles(reply.records) == ["user", "assistant", "tool"]
        assert [c.id for c in reply.pending_tool_calls] == ["c1"]
        done = await submit(stack, root.id, ("c1", "found"))
        assert roles(done.records) == ["tool", "assistant"]
        assert "create_session" not in done.records[0].tool_call_id

    async def test_cancel_inside_tool(self, make_stack: StackMaker) -> None:
        """Cancelling while a built-in tool runs writes nothing of the turn (§6.6 items 51, 53)."""
        forks = SlowForks(gate=asyncio.Event())
        spy = SpyProvider().then(answer("", create_call("c1", label="kid")))
        stack = await make_stack(spy, faults=forks)
        root = await stack.root()
        forks.armed = True
        call = stack.gw.Send(
            agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="go")
        )
        await forks.reached.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await calls_ended(stack)
        assert len(spy.calls) == 1
        assert await stack.records(root.id) == []
        assert await children(stack, root.id) == []
        assert (await send(stack, root.id, "next")).records[0].seq == 1

    async def test_streamed_rounds(self, make_stack: StackMaker) -> None:
        """A stream shows the built-in call and the text of the round after it, then done."""
        stack = await make_stack(SpyProvider())
        root = await stack.root()
        events = await stream_events(stack, root.id, f'/tool {CREATE_SESSION} {{"label":"s"}}')
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds[0] == "tool_call" and kinds[-1] == "done"
        assert set(kinds[1:-1]) == {"text_delta"}
        text = "".join(e.text_delta.text for e in events[1:-1])
        assert text == events[-1].done.assistant.content
