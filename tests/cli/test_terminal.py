"""`stello chat`, `send` and `delete` on a pseudo terminal, typed at as a person would.

pexpect runs each command on its own pty (so prompt_toolkit edits lines and
Ctrl-C is a real SIGINT); the whole conversation runs in a thread, since
expecting blocks and this test's loop serves the gateway. The slow gateway's
echo model waits before each piece of a reply, so Ctrl-C lands mid-reply.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from tests.cli.processes import client_env
from tests.cli.suite import Suite
from tests.support.fixtures import TestSpace

# Not `sql`: the PostgreSQL 15 pass runs the gateway tests, which carry this SQL.
pytestmark = pytest.mark.subprocess

UP = "\x1b[A"
LONG = " ".join(f"word{i}" for i in range(40))  # echoed in three slow pieces


def spawn(env: dict[str, str], *args: str, colour: bool = False) -> pexpect.spawn[str]:
    """`stello ARGS` on a pty of 120 columns (without colour unless asked, so the text can be
    matched as typed)."""
    terminal = {**client_env(env), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    terminal.pop("NO_COLOR", None)
    if not colour:
        terminal["NO_COLOR"] = "1"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "stello_cli", *args],
        env=terminal,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 120),
        preexec_fn=interruptible,
    )
    return child


def interruptible() -> None:
    """In the child before exec: Ctrl-C interrupts, as in a terminal's shell. A run started
    in the background of a non-interactive shell (`bash scripts/test &`) ignores SIGINT, and
    an ignored signal stays ignored across exec: Python then installs no KeyboardInterrupt
    handler, and `stello send` printed its whole reply through the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ended(child: pexpect.spawn[str]) -> None:
    """Read the child's output to its end, wait for it to exit, then close it (`close`
    alone gives a slow exit 0.1 s, then kills it: no exit status on a loaded machine)."""
    child.expect(pexpect.EOF)
    child.wait()
    child.close()


async def drive(script: Callable[[], Any]) -> Any:
    """Run a blocking pexpect script off the loop."""
    return await asyncio.to_thread(script)


async def records(suite: Suite, space: TestSpace, session_id: str) -> list[str]:
    """The contents of a session's records."""
    async with open_channel(suite.gateway, key=space.key) as channel:
        reply = await agent_pb2_grpc.AgentGatewayStub(channel).ListRecords(
            agent_pb2.ListRecordsRequest(space_id=space.sid, session_id=session_id)
        )
    return [r.content for r in reply.records]


async def new_root(suite: Suite, space: TestSpace, label: str) -> str:
    """A root session with one turn."""
    async with open_channel(suite.gateway, key=space.key) as channel:
        gw = agent_pb2_grpc.AgentGatewayStub(channel)
        root = await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid, label=label))
        await gw.Send(
            agent_pb2.SendRequest(space_id=space.sid, session_id=root.session.id, content="first")
        )
    return str(root.session.id)


async def delete(suite: Suite, space: TestSpace, session_id: str) -> None:
    """Delete a session through the gateway."""
    async with open_channel(suite.gateway, key=space.key) as channel:
        await agent_pb2_grpc.AgentGatewayStub(channel).DeleteSession(
            agent_pb2.DeleteSessionRequest(space_id=space.sid, session_id=session_id)
        )


def quit_with_ctrl_d(child: pexpect.spawn[str]) -> None:
    """Ctrl-D at the prompt ends the chat with status 0."""
    child.sendeof()
    ended(child)
    assert child.exitstatus == 0, child.before


class TestChat:
    async def test_banner_history_help_fork_switch_tree(
        self, suite: Suite, home: Path, space: TestSpace
    ) -> None:
        """The banner shows label and records; ↑ recalls a line; /help, /fork (--label or a
        bare label), /switch, /tree, /history (saying when there is none)."""
        root = await new_root(suite, space, "Research")
        env = suite.env(home, space)

        def script() -> str:
            child = spawn(env, "chat", root[:8])
            child.expect_exact("Research")
            child.expect_exact("echo: first")  # the banner's newest records
            child.expect_exact("/help lists commands")
            child.expect_exact("Research>")
            child.sendline("hello there")
            child.expect_exact("echo: hello there")
            child.expect_exact("Research>")
            child.send(UP)  # the line editor recalls the last line ...
            child.expect_exact("hello there")
            child.send("\r")  # ... and sends it again
            child.expect_exact("echo: hello there")
            child.expect_exact("Research>")
            child.sendline("/help")
            child.expect_exact("/switch SESSION")
            child.expect_exact("Research>")
            child.sendline("/fork --label Kid --up-to 2")
            child.expect_exact("Kid>")
            child.sendline("/history 5")
            child.expect_exact("[2] assistant")
            child.expect_exact("Kid>")
            child.sendline("/tree")
            child.expect(r"Kid +\[active, 0 turns\] +\S+  .*◀")
            child.expect_exact("Kid>")
            child.sendline(f"/switch {root}")
            child.expect_exact("Research>")
            child.sendline("/nope")
            child.expect_exact("unknown command /nope")
            child.expect_exact("Research>")
            child.sendline("/fork Chat branch --context none")  # a bare label of two words
            child.expect_exact("Chat branch>")
            child.sendline("/history")
            child.expect_exact("no records yet: this session has had no turn")
            child.expect_exact("Chat branch>")
            child.sendline("/history 0")  # was "no records yet"; -1 and words passed silently
            child.expect_exact("/history N: N is a number of records from 1 to 10000, got '0'")
            child.expect_exact("Chat branch>")
            quit_with_ctrl_d(child)
            return str(child.before)

        await drive(script)
        assert (
            await records(suite, space, root)
            == ["first", "echo: first"]
            + [
                "hello there",
                "echo: hello there",
            ]
            * 2
        )

    async def test_ctrl_c_stops_only_the_reply(
        self, suite: Suite, home: Path, space: TestSpace
    ) -> None:
        """Ctrl-C while a reply streams stops it, says nothing was stored, and the chat goes on."""
        root = await new_root(suite, space, "Slow")
        env = suite.env(home, space, slow=True)

        def script() -> None:
            child = spawn(env, "chat", root)
            child.expect_exact("Slow>")
            child.sendline(LONG)
            child.expect_exact("echo: word0")  # the first piece arrived; more are coming
            child.sendintr()
            child.expect_exact("stopped: nothing of this turn was stored")
            child.expect_exact("Slow>")
            child.sendline("/quit")
            ended(child)
            assert child.exitstatus == 0

        await drive(script)
        assert await records(suite, space, root) == ["first", "echo: first"]

    async def test_wrong_session_fails_at_once(
        self, suite: Suite, home: Path, space: TestSpace
    ) -> None:
        """A session that is not there fails before any prompt, on one line, exit 1."""
        env = suite.env(home, space)

        def script() -> str:
            child = spawn(env, "chat", "abcdef12")
            ended(child)
            assert child.exitstatus == 1
            return str(child.before)

        output = await drive(script)
        assert "no session id starts with 'abcdef12'" in output
        assert "> " not in output

    async def test_a_reply_failing_midway_ends_its_line_and_says_not_stored(
        self, suite: Suite, home: Path, space: TestSpace
    ) -> None:
        """A reply whose turn fails after text was shown (its session deleted meanwhile) ends
        its line, then the chat says the error and that the turn was not stored (explore4
        F6e: the error was glued to the reply)."""
        root = await new_root(suite, space, "Doomed")
        env = suite.env(home, space, slow=True)
        loop = asyncio.get_running_loop()

        def script() -> str:
            child = spawn(env, "chat", root)
            child.expect_exact("Doomed>")
            child.sendline(LONG)
            child.expect_exact("echo: word0")
            asyncio.run_coroutine_threadsafe(delete(suite, space, root), loop).result(30)
            child.expect_exact("word39\r\nstello: session ")
            child.expect_exact("was deleted during the turn; nothing of the turn was written\r\n")
            child.expect_exact("Doomed>")
            child.sendline("/quit")
            ended(child)
            return str(child.before)

        await drive(script)


class TestSend:
    async def test_ctrl_c_says_the_turn_was_not_stored(
        self, suite: Suite, home: Path, space: TestSpace
    ) -> None:
        """Ctrl-C during `stello send` says the turn was not stored and exits 130."""
        root = await new_root(suite, space, "Slow")
        env = suite.env(home, space, slow=True)

        def script() -> str:
            child = spawn(env, "send", root, LONG)
            child.expect_exact("echo: word0")
            child.sendintr()
            ended(child)
            assert child.exitstatus == 130, child.before
            return str(child.before)

        output = await drive(script)
        assert "interrupted: the turn was not stored" in output
        assert "Traceback" not in output
        assert await records(suite, space, root) == ["first", "echo: first"]

    async def test_colour_on_a_terminal(self, suite: Suite, home: Path, space: TestSpace) -> None:
        """On a terminal `records` is coloured; with NO_COLOR it is not."""
        root = await new_root(suite, space, "Colour")
        env = suite.env(home, space)

        def script(colour: bool) -> str:
            child = spawn(env, "records", root, colour=colour)
            ended(child)
            return str(child.before)

        assert "\x1b[36muser\x1b[0m" in await drive(lambda: script(True))
        assert "\x1b[" not in await drive(lambda: script(False))


class TestDelete:
    async def test_asks_first(self, suite: Suite, home: Path, space: TestSpace) -> None:
        """delete names what it would erase and does nothing unless answered yes."""
        root = await new_root(suite, space, "Doomed")
        env = suite.env(home, space)

        def script(answer: str) -> int:
            child = spawn(env, "delete", root[:8])
            child.expect_exact(f'Erase "Doomed" ({root[:8]}), records and all? [y/N] ')
            child.sendline(answer)
            ended(child)
            return int(child.exitstatus or 0)

        assert await drive(lambda: script("n")) == 1
        assert await records(suite, space, root) == ["first", "echo: first"]
        assert await drive(lambda: script("y")) == 0
        async with open_channel(suite.gateway, key=space.key) as channel:
            tree = await agent_pb2_grpc.AgentGatewayStub(channel).GetTree(
                agent_pb2.GetTreeRequest(space_id=space.sid)
            )
        assert list(tree.nodes) == []
