"""Every client command as a real `stello` process against running servers, errors included."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.auth import KeyStore
from stello.channels import open_channel
from stello.settings import StelloSettings
from tests.cli.processes import client_env, private_env
from tests.cli.suite import Servers, Suite, start_chain, stello
from tests.support.fixtures import TestSpace
from tree_service.config import TreeSettings

# Not `sql`: the PostgreSQL 15 pass runs the gateway tests, which carry this SQL.
pytestmark = pytest.mark.subprocess


async def ok(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Run a command that must succeed; its stdout."""
    done = await stello(env, *args, stdin=stdin)
    assert done.returncode == 0, f"stello {' '.join(args)}: {done.stderr}"
    assert "\x1b[" not in done.stdout  # no colour into a pipe
    return done.stdout


async def as_json(env: dict[str, str], *args: str) -> Any:
    """Run a command with --json; its answer."""
    return json.loads(await ok(env, *args, "--json"))


async def failed(env: dict[str, str], *args: str, code: int = 1, stdin: str | None = None) -> str:
    """Run a command that must fail with `code` on one line; that line."""
    done = await stello(env, *args, stdin=stdin)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    return done.stderr.rstrip("\n")


HOLD_LEASE = """
UPDATE sessions SET turn_token = $3, turn_expires_at = now() + interval '60 seconds'
WHERE space_id = $1 AND id = $2
"""
"""Another turn's lease on the session, as a running turn holds it."""


@pytest.fixture(name="env")
def _env(suite: Suite, home: Path, space: TestSpace) -> dict[str, str]:
    return suite.env(home, space)


@pytest.fixture(name="gw")
async def _gw(suite: Suite, space: TestSpace) -> AsyncIterator[Any]:
    """A gateway stub as the space's key, to set things up quickly."""
    async with open_channel(suite.gateway, key=space.key) as channel:
        yield agent_pb2_grpc.AgentGatewayStub(channel)


class TestSpaceFromTheKey:
    async def test_no_space_needed(self, env: dict[str, str], space: TestSpace) -> None:
        """Without --space the key's one space is used; `whoami` names it."""
        who = await as_json(env, "whoami")
        assert who["space_id"] == space.sid
        assert [s["id"] for s in who["spaces"]] == [space.sid]
        made = await as_json(env, "root", "--label", "here")
        assert [n["id"] for n in await as_json(env, "tree")] == [made["id"]]

    async def test_space_by_name_or_id(self, env: dict[str, str], space: TestSpace) -> None:
        """--space takes the space's name or its id; an unknown name lists the spaces."""
        name = (await as_json(env, "whoami"))["spaces"][0]["name"]
        assert (await as_json(env, "whoami", "--space", name))["space_id"] == space.sid
        assert (await as_json(env, "--space", space.sid, "whoami"))["space_id"] == space.sid
        line = await failed(env, "tree", "--space", "nope")
        assert line == (
            f"stello: --space: this key reaches no space named 'nope' (its spaces: "
            f"{name} ({space.sid}))"
        )

    async def test_admin_key_with_several_spaces(
        self, suite: Suite, home: Path, keys: KeyStore, space: TestSpace
    ) -> None:
        """A key reaching several spaces must be told which: the error lists them."""
        owner = f"owner-{space.sid[:8]}"
        await keys.create_key(space="one", principal=owner)
        await keys.create_key(space="two", principal=owner)
        admin = await keys.create_key(space=None, scope="admin", principal=owner)
        env = suite.env(home, space)
        env["STELLO_KEY"] = admin.secret
        line = await failed(env, "tree")
        assert line.startswith("stello: this key reaches 2 spaces (one (")
        assert line.endswith("choose one with --space NAME or set STELLO_SPACE_ID")
        assert await as_json(env, "tree", "--space", "two") == []

    async def test_whoami_lists_several_spaces(
        self, suite: Suite, home: Path, keys: KeyStore, space: TestSpace
    ) -> None:
        """`whoami` with a key reaching several spaces and none chosen lists them all."""
        owner = f"who-{space.sid[:8]}"
        await keys.create_key(space="one", principal=owner)
        await keys.create_key(space="two", principal=owner)
        admin = await keys.create_key(space=None, scope="admin", principal=owner)
        env = suite.env(home, space)
        env["STELLO_KEY"] = admin.secret
        who = await as_json(env, "whoami")
        assert [s["name"] for s in who["spaces"]] == ["one", "two"]
        assert who["space_id"] is None
        text = await ok(env, "whoami")
        assert [line.split()[1] for line in text.splitlines()[2:]] == ["one", "two"]
        assert "(in use)" not in text
        chosen = await ok(env, "whoami", "--space", "two")
        assert chosen.splitlines()[-1].endswith("(in use)")


class TestTreeTooLarge:
    async def test_hint_said_once(
        self,
        settings: StelloSettings,
        pool: asyncpg.Pool,
        keys: KeyStore,
        home: Path,
        space: TestSpace,
    ) -> None:
        """A tree past the tree service's cap says to narrow it with the flags, once."""
        servers = Servers(settings, pool, keys)
        try:
            gateway = await start_chain(servers, TreeSettings(max_tree_nodes=1))
            env = {**private_env(home), "STELLO_GATEWAY": gateway, "STELLO_KEY": space.key}
            root = (await ok(env, "root", "-q")).strip()
            await ok(env, "fork", root, "--label", "child")
            assert await failed(env, "tree") == (
                "stello: the tree has more than 1 nodes; narrow it with --root or --depth"
            )
        finally:
            await servers.stop()


class TestSessionCommands:
    async def test_lifecycle_by_prefix(self, env: dict[str, str]) -> None:
        """show, rename, archive, unarchive, insight, memory, consolidate, delete by 8 digits."""
        root = (
            await ok(env, "root", "--label", "Research", "--system-prompt", "Be brief.", "-q")
        ).strip()
        short = root[:8]
        shown = await ok(env, "show", short)
        assert shown.splitlines()[0] == f"Research  {root}"
        assert "system prompt:\n    Be brief." in shown
        assert (await as_json(env, "rename", short, "Renamed"))["label"] == "Renamed"
        assert (await as_json(env, "archive", short))["status"] == "archived"
        refused = await failed(env, "send", short, "hello")
        assert refused == (
            f"stello: session {root} is archived: `stello unarchive {short}` makes it active again"
        )
        assert (await as_json(env, "unarchive", short))["status"] == "active"
        assert await ok(env, "rename", short, "Again") == (
            f'renamed {short} from "Renamed" to "Again"\n'
        )
        assert await ok(env, "rename", short, "Renamed") == (
            f'renamed {short} from "Again" to "Renamed"\n'
        )
        assert await ok(env, "archive", short) == (
            f'archived "Renamed" ({short}): turns are refused until `stello unarchive {short}`\n'
        )
        assert await ok(env, "archive", short) == (
            f'"Renamed" ({short}) was already archived: nothing changed\n'
        )
        assert await ok(env, "unarchive", short) == (
            f'unarchived "Renamed" ({short}): it takes turns again\n'
        )
        assert await ok(env, "unarchive", short) == (
            f'"Renamed" ({short}) was already active (not archived): nothing changed\n'
        )
        assert await ok(env, "insight", short) == "(no insight)\n"
        assert await ok(env, "insight", short, "-", stdin="look here") == "insight set\n"
        assert await ok(env, "insight", short) == "look here\n"
        assert await ok(env, "memory", short, "kept") == "memory set\n"
        view = await as_json(env, "show", short)
        assert (view["label"], view["insight"], view["memory"]) == ("Renamed", "look here", "kept")
        await ok(env, "send", short, "remember this")
        consolidated = await ok(env, "consolidate", short)
        assert consolidated.strip() and consolidated != "kept\n"
        assert (await as_json(env, "show", short))["memory"] == consolidated.rstrip("\n")
        child = (await ok(env, "fork", short, "--label", "kid", "-q")).strip()
        deleted = await as_json(env, "delete", short, "--yes")
        assert deleted["deleted_ids"] == [root, child]
        gone = await failed(env, "show", short)
        assert gone == (
            f"stello: SESSION: no session id starts with {short!r} in this space "
            "(`stello tree` lists them)"
        )

    async def test_send_again_with_its_request_id_answers_the_stored_turn(
        self, env: dict[str, str]
    ) -> None:
        """`send --request-id ID` twice runs the turn once: the second answers the stored
        turn (what a turn whose end was not heard is told to do: the command had no way to
        give the id, and its advice named the SDK's request_id)."""
        root = (await ok(env, "root", "-q")).strip()
        first = await as_json(env, "send", root, "once", "--request-id", "cli-retry-1")
        again = await as_json(env, "send", root, "once", "--request-id", "cli-retry-1")
        assert again == first
        records = await as_json(env, "records", root)
        assert [r["content"] for r in records if r["role"] == "user"] == ["once"]

    async def test_a_turn_past_its_stream_timeout_names_that_flag(
        self, env: dict[str, str]
    ) -> None:
        """A turn past --stream-timeout says so, naming that flag (it named --timeout), that
        it was the command's own deadline and how to give it more, and how to settle whether
        it was stored."""
        root = (await ok(env, "root", "-q")).strip()
        said = await failed(env, "send", root, "hi", "--stream-timeout", "0.001")
        assert said.startswith(
            "stello: the turn did not end within --stream-timeout 0.001 s, this command's own "
            "deadline: give it more time with a larger --stream-timeout; "
        )
        assert "--request-id" in said

    async def test_an_emptied_insight_or_memory_is_said_so(self, env: dict[str, str]) -> None:
        """`stello insight S ""` says the insight was emptied (it said "insight set"), and
        showing it says there is none (it printed an empty line); so for the memory."""
        root = (await ok(env, "root", "-q")).strip()
        for slot in ("insight", "memory"):
            await ok(env, slot, root, "something")
            assert await ok(env, slot, root, "") == f"{slot} emptied\n"
            assert await ok(env, slot, root) == f"(no {slot})\n"

    async def test_a_refused_key_says_where_it_came_from(self, env: dict[str, str]) -> None:
        """A key the gateway refuses says where the command took it from and what to do
        (it said only "unknown or revoked API key": a STELLO_KEY left set from another
        setup, or a saved key of a database `stello up` no longer runs, looked the same)."""
        env["STELLO_KEY"] = "stello_abc"
        refused = "stello: unknown or revoked API key"
        assert await failed(env, "tree") == (
            f"{refused} (the key in STELLO_KEY: unset it to use the one `stello up` saved)"
        )
        assert await failed(env, "tree", "--key", "stello_abd") == (
            f"{refused} (the key given with --key)"
        )
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"space_id": "s", "key": "stello_abc"}))
        del env["STELLO_KEY"]
        assert await failed(env, "whoami") == (
            f"{refused} (the key `stello up` saved in {saved}: run `stello up` again, which "
            "saves one its gateway takes)"
        )

    async def test_show_says_the_progress(self, env: dict[str, str]) -> None:
        """`show` says how far the memory (and summaries) cover the records and each
        background job's state; a session without records says nothing of it."""
        root = (await ok(env, "root", "-q")).strip()
        assert "progress:" not in await ok(env, "show", root)
        await ok(env, "send", root, "remember this")
        await ok(env, "consolidate", root)
        shown = (await ok(env, "show", root)).splitlines()
        at = next(i for i, line in enumerate(shown) if line.startswith("progress:"))
        assert shown[at : at + 2] == [
            "progress: seq 2; memory to 2 (version 1)",
            "jobs: consolidate done to 2 (1 run, 1 model call)",
        ]
        progress = (await as_json(env, "show", root))["progress"]
        assert (progress["last_seq"], progress["memory_covered_until_seq"]) == (2, 2)
        assert [(j["kind"], j["status"], j["runs"]) for j in progress["jobs"]] == [
            ("consolidate", "done", 1)
        ]

    async def test_delete_says_how_many_went(self, env: dict[str, str]) -> None:
        """Without --json, delete asks for the count alone (any size fits) and says it."""
        root = (await ok(env, "root", "-q")).strip()
        await ok(env, "fork", root, "--label", "kid", "-q")
        assert await ok(env, "delete", root, "--yes") == "deleted 2 sessions\n"
        assert await as_json(env, "tree") == []

    async def test_delete_as_json_asks_on_stderr(self, env: dict[str, str]) -> None:
        """On a terminal, `delete --json` asks on stderr, so stdout holds only the JSON value
        (the question went before it on stdout, as `spaces delete --json`'s did)."""
        root = (await ok(env, "root", "-q")).strip()

        def answered() -> subprocess.CompletedProcess[str]:
            terminal, stdin = os.openpty()
            try:
                os.write(terminal, b"y\n")
                return subprocess.run(
                    [sys.executable, "-m", "stello_cli", "delete", root, "--json"],
                    env=client_env(env),
                    stdin=stdin,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            finally:
                os.close(stdin)
                os.close(terminal)

        done = await asyncio.to_thread(answered)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"deleted_ids": [root]}
        assert done.stderr.startswith("Erase ")
        assert await as_json(env, "tree") == []

    async def test_delete_needs_yes_without_a_terminal(self, env: dict[str, str]) -> None:
        """With stdin not a terminal, delete refuses to ask and erases nothing (exit 2)."""
        root = (await ok(env, "root", "-q")).strip()
        line = await failed(env, "delete", root, code=2)
        assert "--yes: required when stdin is not a terminal" in line
        assert [n["id"] for n in await as_json(env, "tree")] == [root]

    async def test_prefixes(self, env: dict[str, str], gw: Any, space: TestSpace) -> None:
        """An ambiguous prefix lists candidates; a non-hex one is a usage error (exit 2)."""
        ids = []
        for i in range(17):  # 17 ids, 16 first digits: two share one
            reply = await gw.CreateRoot(
                agent_pb2.CreateRootRequest(space_id=space.sid, label=f"r{i}")
            )
            ids.append(reply.session.id)
        digit = next(d for d in "0123456789abcdef" if sum(i.startswith(d) for i in ids) > 1)
        line = await failed(env, "show", digit)
        assert line.startswith(f"stello: SESSION: {digit!r} is the start of several session ids: ")
        assert line.endswith("; type more of it")
        usage = await failed(env, "records", "xyz", code=2)
        assert usage.startswith("stello records: SESSION: 'xyz' is neither a session id")

    async def test_fork_flags_and_their_errors(self, env: dict[str, str]) -> None:
        """--up-to inherits; gateway errors name --var and --label, not proto fields (usage
        errors: values typed)."""
        root = (await ok(env, "root", "-q")).strip()
        await ok(env, "send", root, "one")
        await ok(env, "send", root, "two")
        child = (await ok(env, "fork", root, "--label", "cut", "--up-to", "2", "-q")).strip()
        assert [r["content"] for r in await as_json(env, "records", child)] == ["one", "echo: one"]
        line = await failed(
            env, "fork", root, "--label", "x", "--profile", "researcher", "--var", "topic=t", code=2
        )
        assert line == (
            "stello fork: --var: profile 'researcher' needs the template "
            "variable(s) audience; give them in --var (see `stello fork --help`)"
        )
        assert await failed(env, "root", "--label", " ", code=2) == (
            "stello root: --label: must not be empty (see `stello root --help`)"
        )
        assert await failed(env, "fork", root, "--label", "x", "--up-to", "99", code=2) == (
            "stello fork: --up-to: 99 is beyond the source's last seq (4) "
            "(see `stello fork --help`)"
        )
        made = await as_json(
            env,
            "fork",
            root,
            "--label",
            "R",
            "--profile",
            "researcher",
            "--var",
            "topic=forks",
            "--var",
            "audience=us",
        )
        view = await as_json(env, "show", made["id"])
        assert view["system_prompt"] == "You research forks for us. Cite sources."
        assert view["config"]["skills"] == ["tides"]

    async def test_a_value_the_gateway_refuses_is_a_usage_error(self, env: dict[str, str]) -> None:
        """A value typed on the command line that the gateway refuses (INVALID_ARGUMENT or
        OUT_OF_RANGE naming its flag or argument, an unknown --profile) exits 2 with the line
        of a usage error
        found here (`stello CMD: FLAG: ... (see ...)`), as --var's own check does: it
        exited 1 as `stello: --label: ...`, as if the command had failed. What is not a
        value typed (no such session) still exits 1."""
        root = (await ok(env, "root", "-q")).strip()
        long = "x" * 201
        assert await failed(env, "root", "--label", long, code=2) == (
            "stello root: --label: must be at most 200 characters, got 201 "
            "(see `stello root --help`)"
        )
        assert await failed(env, "rename", root, long, code=2) == (
            "stello rename: LABEL: must be at most 200 characters, got 201 "
            "(see `stello rename --help`)"
        )
        assert await failed(env, "fork", root, "--label", "x", "--up-to", "99", code=2) == (
            "stello fork: --up-to: 99 is beyond the source's last seq (0) "
            "(see `stello fork --help`)"
        )
        assert await failed(env, "fork", root, "--label", "x", "--profile", "nope", code=2) == (
            "stello fork: --profile: fork profile 'nope' is not configured (known: researcher, "
            "summary; `stello profiles` lists them) (see `stello fork --help`)"
        )
        line = await failed(env, "meta", root, "bad key=1", code=2)
        assert line.startswith('stello meta: K=V "bad key": key must match'), line
        assert line.endswith(" (see `stello meta --help`)"), line
        assert [n["id"] for n in await as_json(env, "tree")] == [root]

    async def test_a_whole_id_of_no_session_names_its_argument(self, env: dict[str, str]) -> None:
        """A whole session id that names no session in the space fails (exit 1) naming the
        argument or flag it was typed as, and what to do, as digits no id starts with do:
        it said the gateway's 'session ID not found' alone, with no flag (`search
        --session ID`, `fork SOURCE`) and nothing to do."""
        root = (await ok(env, "root", "-q")).strip()
        missing = "00000000-0000-0000-0000-000000000000"
        tail = f"no session {missing} in this space (`stello tree` lists them)"
        assert await failed(env, "show", missing) == f"stello: SESSION: {tail}"
        forked = await failed(env, "fork", missing.replace("-", ""), "--label", "x")
        assert forked == f"stello: SOURCE: {tail}"
        assert await failed(env, "search", "hi", "--session", missing) == (
            f"stello: --session: {tail}"
        )
        assert await failed(env, "chat", missing, stdin="") == f"stello: SESSION: {tail}"
        assert [n["id"] for n in await as_json(env, "tree")] == [root]

    async def test_var_the_profile_does_not_use(self, env: dict[str, str]) -> None:
        """--var without --profile, or one the profile has no variable for, is a usage error
        (exit 2) made before anything is created."""
        root = (await ok(env, "root", "-q")).strip()
        alone = "--var: fills a profile's {NAME}, so it needs --profile NAME"
        assert await failed(env, "root", "--var", "k=v", code=2) == (
            f"stello root: {alone} (see `stello root --help`)"
        )
        assert await failed(env, "fork", root, "--label", "x", "--var", "k=v", code=2) == (
            f"stello fork: {alone} (see `stello fork --help`)"
        )
        typo = ("--var", "topc=t", "--var", "topic=t", "--var", "audience=a")
        line = await failed(
            env, "fork", root, "--label", "x", "--profile", "researcher", *typo, code=2
        )
        assert line == (
            "stello fork: --var: profile 'researcher' has no variable topc "
            "(its variables: topic, audience) (see `stello fork --help`)"
        )
        assert [n["id"] for n in await as_json(env, "tree")] == [root]

    async def test_profiles(self, env: dict[str, str]) -> None:
        """`profiles` lists the README's example file, with its variables."""
        listed = await as_json(env, "profiles")
        assert [p["name"] for p in listed] == ["researcher", "summary"]
        assert listed[0]["variables"] == ["topic", "audience"]
        text = await ok(env, "profiles")
        assert "    variables: topic, audience  (give each with --var)" in text

    async def test_send_with_a_busy_policy(self, env: dict[str, str]) -> None:
        """`send --busy` passes the policy (enqueue on a free session just runs); an unknown
        one is a usage error naming the choices."""
        root = (await ok(env, "root", "-q")).strip()
        assert await ok(env, "send", root, "in line", "--busy", "enqueue") == "echo: in line\n"
        refused = await failed(env, "send", root, "x", "--busy", "sideways", code=2)
        assert "--busy" in refused and "enqueue" in refused

    async def test_a_message_the_gateway_refuses_is_a_usage_error(
        self, env: dict[str, str]
    ) -> None:
        """A MESSAGE over the gateway's size limit is a value typed that the gateway refuses:
        a usage error naming MESSAGE (exit 2), as `stello root --label <too long>` is, and so
        is a --request-id over its length. Nothing is stored."""
        root = (await ok(env, "root", "-q")).strip()
        big = "x" * 1_048_577
        line = await failed(env, "send", root, "-", code=2, stdin=big)
        assert line == (
            "stello send: MESSAGE: is 1048577 bytes, over the limit of 1048576 "
            "(see `stello send --help`)"
        )
        long_id = "r" * 300
        line = await failed(env, "send", root, "hi", "--request-id", long_id, code=2)
        assert line.startswith("stello send: --request-id: must be at most "), line
        await ok(env, "send", root, "once", "--request-id", "cli-reused")
        # An id used before is the space's state, not a wrong value: it fails (exit 1).
        reused = await failed(env, "send", root, "other", "--request-id", "cli-reused")
        assert reused.startswith("stello: --request-id 'cli-reused' was already used"), reused
        assert [r["content"] for r in await as_json(env, "records", root)] == [
            "once",
            "echo: once",
        ]

    async def test_chat_commands_name_their_own_options(self, env: dict[str, str]) -> None:
        """A value a chat command was given that the gateway (or the chat) refuses names that
        command's option (`/fork --profile: ...`), and the chat goes on: /fork said the
        gateway's words alone ('fork profile 'nope' is not configured ...') or the
        command line's flags ('--label: ...', '--var: ...'), as if of `stello chat`."""
        root = (await ok(env, "root", "-q")).strip()
        lines = [
            "/fork --profile nope",
            "/fork --label " + "x" * 201,
            "/fork --up-to 99",
            "/fork --profile researcher --var nope=1",
            "/fork --var topic=t",
            "/fork --up-to -1",
            "hello",
        ]
        done = await stello(env, "chat", root, stdin="\n".join(lines) + "\n")
        assert done.returncode == 1, done.stderr  # a command failed: a piped chat ends with 1
        assert "echo: hello" in done.stdout
        said = [line.removeprefix("stello: ") for line in done.stderr.splitlines()]
        assert said[0] == (
            "/fork --profile: fork profile 'nope' is not configured (known: researcher, "
            "summary; `stello profiles` lists them)"
        )
        assert said[1] == "/fork --label: must be at most 200 characters, got 201"
        assert said[2] == "/fork --up-to: 99 is beyond the source's last seq (0)"
        assert said[3].startswith("/fork --var: profile 'researcher' has no variable nope")
        assert said[4].startswith("/fork --var: fills a profile's {NAME}")
        assert said[5] == "/fork --up-to: must not be negative, got -1"
        assert len(said) == 6, said
        assert [n["id"] for n in await as_json(env, "tree")] == [root]

    async def test_a_piped_chat_prints_only_the_replies(self, env: dict[str, str]) -> None:
        """Without a terminal a chat prints no banner: not at its start, and not after /fork
        or /switch either (they printed the session's banner, its label, turns and newest
        records, into the replies a script reads)."""
        root = (await ok(env, "root", "-q", "--label", "top")).strip()
        lines = ["hello", "/fork child", "there", f"/switch {root}", "again"]
        done = await stello(env, "chat", root, stdin="\n".join(lines) + "\n")
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == "echo: hello\necho: there\necho: again\n"
        child = [n for n in await as_json(env, "tree") if n["id"] != root]
        assert [n["label"] for n in child] == ["child"]
        assert [r["content"] for r in await as_json(env, "records", child[0]["id"])][-1] == (
            "echo: there"
        )

    async def test_a_piped_line_that_is_not_utf8_is_said_and_the_chat_goes_on(
        self, env: dict[str, str]
    ) -> None:
        """A line of a piped chat holding bytes that are not UTF-8 is not sent: the chat says
        so on stderr, showing the line, and reads on (the turn failed: exit 1). It ended the
        whole chat at that line, in the SDK's words about a field the user never typed
        ('content: is not valid Unicode text (a lone surrogate U+DCFF ...)')."""
        root = (await ok(env, "root", "-q")).strip()
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "stello_cli", "chat", root],
            env=client_env(env),
            input=b"hello\n\xff\xfe bad\nagain\n",
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (
            1,
            b"echo: hello\necho: again\n",
            b"stello: this line is not valid UTF-8, so it was not sent: '\\xff\\xfe bad'\n",
        )

    async def test_a_piped_chat_whose_command_failed_ends_with_exit_1(
        self, env: dict[str, str]
    ) -> None:
        """A piped chat in which a command failed (/switch to no session, /history 0, a
        command there is none of) reads on and does the next lines, then ends with exit 1, as
        one whose turn failed does: it ended with 0, so a script could not tell."""
        root = (await ok(env, "root", "-q")).strip()
        for failing in ("/switch 0000", "/history 0", "/nope"):
            done = await stello(env, "chat", root, stdin=f"{failing}\n/history 1\nhello\n")
            assert (done.returncode, len(done.stderr.splitlines())) == (1, 1), done.stderr
            assert done.stdout.endswith("echo: hello\n")
        done = await stello(env, "chat", root, stdin="/history 1\n/tree\nhello\n")
        assert (done.returncode, done.stderr) == (0, "")

    async def test_switch_to_an_unknown_session_names_switch(self, env: dict[str, str]) -> None:
        """/switch to a whole id that names no session says so as /switch's error and what to
        do (it said the gateway's words alone, naming no command), as to digits no id starts
        with, and the chat goes on in the session it was in."""
        root = (await ok(env, "root", "-q")).strip()
        unknown = "00000000-0000-4000-8000-000000000000"
        lines = f"/switch {unknown}\n/switch 0000\nhello\n"
        done = await stello(env, "chat", root, stdin=lines)
        assert done.returncode == 1, done.stderr  # a command failed: a piped chat ends with 1
        assert done.stderr.splitlines() == [
            f"stello: /switch: no session {unknown} in this space (/tree lists them)",
            "stello: /switch: no session id starts with '0000' in this space (/tree lists them)",
        ]
        assert done.stdout == "echo: hello\n"

    async def test_a_gateway_lost_mid_chat_says_where_its_address_came_from(
        self,
        settings: StelloSettings,
        pool: asyncpg.Pool,
        keys: KeyStore,
        home: Path,
        space: TestSpace,
    ) -> None:
        """A gateway that stops answering in the middle of a piped chat: the turn and the
        command after say it cannot be reached and where its address came from (--gateway),
        as a command that cannot reach it at its start says (they said the address only)."""
        servers = Servers(settings, pool, keys)
        try:
            address = await start_chain(servers)
            env = {**private_env(home), "STELLO_KEY": space.key}
            root = (await ok(env, "--gateway", address, "root", "-q")).strip()
            process = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "stello_cli", "chat", root, "--gateway", address),
                env=client_env(env),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(b"hello\n")
            assert await asyncio.wait_for(process.stdout.readline(), 30) == b"echo: hello\n"
        finally:
            await servers.stop()
        out, err = await asyncio.wait_for(process.communicate(b"again\n/tree\n"), 60)
        lost = (
            f"stello: cannot reach the gateway at {address}: is `stello up` running? "
            "(the address given with --gateway)"
        )
        assert (process.returncode, out, err.decode().splitlines()) == (1, b"", [lost, lost])

    async def test_a_send_failing_mid_reply_ends_its_line_and_says_not_stored(
        self, suite: Suite, home: Path, space: TestSpace, gw: Any
    ) -> None:
        """A `send` whose stream fails after part of the reply was shown (its session deleted
        meanwhile) ends that line, then fails on one line saying the error and that the turn
        was not stored (explore4 F6e: the error was glued to the reply, "… word9stello: …",
        and nothing said whether the turn was stored)."""
        root = (await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid))).session.id
        words = " ".join(f"word{i}" for i in range(40))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "stello_cli",
            "send",
            root,
            words,
            env=client_env(suite.env(home, space, slow=True)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        shown = await asyncio.wait_for(process.stdout.read(6), 30)  # the first piece
        assert shown == b"echo: "
        await gw.DeleteSession(agent_pb2.DeleteSessionRequest(space_id=space.sid, session_id=root))
        rest, err = await asyncio.wait_for(process.communicate(), 30)
        stdout, stderr = (shown + rest).decode(), err.decode()
        assert process.returncode == 1, stderr
        assert stdout.startswith("echo: word0") and stdout.endswith("\n")
        # The gateway's words say the turn was not stored: they are not said twice.
        assert stderr == (
            f"stello: session {root} was deleted during the turn; nothing of the turn was written\n"
        )

    async def test_text_from_stdin_loses_only_its_line_end(self, env: dict[str, str]) -> None:
        """`send SESSION -` (`echo hello | stello send SESSION -`) stores the text without
        the line end `echo` adds; `insight -` reads stdin by the same rule: one final
        "\\n" or "\\r\\n" off, inner line ends and outer spaces kept."""
        root = (await ok(env, "root", "-q")).strip()
        assert await ok(env, "send", root, "-", stdin="hello\n") == "echo: hello\n"
        await ok(env, "send", root, "-", stdin="  two\nlines  \r\n")
        await ok(env, "send", root, "-", stdin="kept\n\n")
        records = await as_json(env, "records", root)
        sent = [r["content"] for r in records if r["role"] == "user"]
        assert sent == ["hello", "  two\nlines  ", "kept\n"]
        await ok(env, "insight", root, "-", stdin="look\r\n")
        assert (await as_json(env, "show", root))["insight"] == "look"

    async def test_a_send_whose_stream_timeout_passes_in_line_was_not_stored(
        self, env: dict[str, str], gw: Any, space: TestSpace, pool: asyncpg.Pool
    ) -> None:
        """`send --busy enqueue --stream-timeout 1` while another turn holds the session: its
        time passes while it waits in line, which it leaves writing nothing. The line names
        the flag and says the turn was not stored (it said "may have been stored", and how
        to settle it: gRPC's deadline came before the gateway's answer)."""
        root = (await gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid))).session.id
        await pool.execute(HOLD_LEASE, space.id, uuid.UUID(root), uuid.uuid4())  # a turn runs
        refused = await failed(
            env, "send", root, "later", "--busy", "enqueue", "--stream-timeout", "1"
        )
        assert refused == (
            "stello: the turn did not end within --stream-timeout 1 s, this command's own "
            "deadline: give it more time with a larger --stream-timeout; the turn was not "
            "stored (nothing of it was written)"
        )
        assert await as_json(env, "records", root) == []

    async def test_retention(self, env: dict[str, str]) -> None:
        """`retention set|show|apply --dry-run|pin`: the policy in a sentence, a dry run's
        count, a pin by prefix; `set` with nothing to set is a usage error."""
        assert await ok(env, "retention", "show") == "no retention policy: nothing expires\n"
        assert (
            await ok(env, "retention", "set", "--archive-after", "30", "--delete-after", "90")
            == "archive subtrees idle 30 days; delete subtrees archived 90 days\n"
        )
        assert (await as_json(env, "retention", "show")) == {
            "archive_after_days": 30,
            "delete_after_days": 90,
        }
        # The connection flags and --json between the group's name and the command's too.
        between = json.loads(await ok(env, "retention", "--json", "show"))
        assert between == {"archive_after_days": 30, "delete_after_days": 90}
        assert await ok(env, "retention", "apply", "--dry-run") == "would change 0 subtrees\n"
        root = (await ok(env, "root", "-q")).strip()
        assert await ok(env, "retention", "pin", root[:8]) == "pinned\n"
        assert ", pinned" in (await ok(env, "show", root[:8])).splitlines()[1]
        assert (await as_json(env, "show", root[:8]))["pinned"] is True
        assert (await ok(env, "digests")).splitlines()[0].rstrip().endswith(", pinned")
        assert await ok(env, "retention", "pin", root[:8], "--off") == "unpinned\n"
        refused = await failed(env, "retention", "set", code=2)
        assert "--archive-after" in refused
        # --none with a step set no policy and kept the step, without a word.
        refused = await failed(env, "retention", "set", "--archive-after", "30", "--none", code=2)
        assert "--none: not with --archive-after or --delete-after" in refused

    async def test_retention_apply_without_a_policy(self, env: dict[str, str]) -> None:
        """`retention apply` on a space that never had a policy, and after `set --none`,
        fails the same way (exit 1), naming `stello retention set`, as `show` says the same."""
        never = await failed(env, "retention", "apply")
        assert never == (
            "stello: this space has no retention policy: nothing expires; "
            "`stello retention set` makes one"
        )
        await ok(env, "retention", "set", "--archive-after", "30")
        assert await ok(env, "retention", "set", "--none") == (
            "no retention policy: nothing expires\n"
        )
        assert await failed(env, "retention", "apply") == never
        assert await failed(env, "retention", "apply", "--dry-run") == never

    async def test_retention_days_past_the_most_name_the_flag(self, env: dict[str, str]) -> None:
        """A number of days past what a step takes is one flag error, in days, whether the
        gateway would refuse it or no int32 field could carry it (before: "argument
        --archive-after: expected a whole number up to 2147483647", the wire's bound)."""
        for flag in ("--archive-after", "--delete-after"):
            for value in ("40000", "99999999999", "0", "-3000000000"):
                refused = await failed(env, "retention", "set", flag, value, code=2)
                assert refused == (
                    f"stello retention set: {flag}: must be within 1..36500 days, got {value} "
                    "(see `stello retention set --help`)"
                )
        assert await ok(env, "retention", "show") == "no retention policy: nothing expires\n"


class TestOutput:
    async def test_tree_previews(self, env: dict[str, str]) -> None:
        """`tree` shows each session's newest record; --no-preview leaves it out."""
        root = (await ok(env, "root", "--label", "R", "-q")).strip()
        await ok(env, "send", root, "hi")
        assert await ok(env, "tree") == f"R  [active, 1 turn]  {root[:8]}  assistant: echo: hi\n"
        assert await ok(env, "tree", "--no-preview") == f"R  [active, 1 turn]  {root[:8]}\n"

    async def test_records_with_times(self, env: dict[str, str]) -> None:
        """`records` says how long ago each record was made."""
        root = (await ok(env, "root", "-q")).strip()
        await ok(env, "send", root, "hi")
        lines = (await ok(env, "records", root)).splitlines()
        assert [line.split(" · ")[0] for line in lines] == ["[1] user", "[2] assistant"]
        assert all(" ago: " in line or " just now: " in line for line in lines)

    async def test_inherited_records_are_marked(self, env: dict[str, str]) -> None:
        """A fork's inherited records say so (text and --json); its own do not."""
        root = (await ok(env, "root", "-q")).strip()
        await ok(env, "send", root, "hi")
        child = (await ok(env, "fork", root, "--label", "c", "--context", "inherit", "-q")).strip()
        await ok(env, "send", child, "more")
        lines = (await ok(env, "records", child)).splitlines()
        marked = [line.split(": ", 1)[0].endswith(" · inherited") for line in lines]
        assert marked == [True, True, False, False], lines
        flags = [r.get("inherited", False) for r in await as_json(env, "records", child)]
        assert flags == [True, True, False, False]

    async def test_broken_pipe_is_quiet(
        self, env: dict[str, str], gw: Any, space: TestSpace
    ) -> None:
        """`stello digests | head -1` ends with the first line, no error, exit 0."""
        for batch in range(0, 400, 40):
            await asyncio.gather(
                *(
                    gw.CreateRoot(agent_pb2.CreateRootRequest(space_id=space.sid, label=f"s{i}"))
                    for i in range(batch, batch + 40)
                )
            )
        command = f'"{sys.executable}" -m stello_cli digests | head -1'
        done = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-o", "pipefail", "-c", command],
            env=client_env(env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert len(done.stdout.splitlines()) == 1

    async def test_health_defaults_to_the_gateway(self, env: dict[str, str], suite: Suite) -> None:
        """`stello health` with no address asks the gateway the environment (or `up`) names."""
        assert await ok(env, "health") == f"{suite.gateway}: SERVING\n"
        saved = Path(env["STELLO_CONFIG_DIR"]) / "credentials.json"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps({"space_id": "s", "key": "k", "gateway": suite.gateway}))
        del env["STELLO_GATEWAY"]
        assert await ok(env, "health") == f"{suite.gateway}: SERVING\n"

    async def test_health_of_an_unknown_service_names_the_known_ones(
        self, env: dict[str, str], suite: Suite
    ) -> None:
        """`health --service gateway` fails naming the full names to give (a bare NOT_FOUND
        before), and the names it gives are the servers' own (the gateway's and the tree's
        answer SERVING)."""
        done = await stello(env, "health", "--service", "gateway")
        names = (
            "stello.agent.v1.AgentGateway, stello.storage.v1.SessionStorage, "
            "stello.tree.v1.SessionTree"
        )
        assert (done.returncode, done.stdout, done.stderr) == (
            1,
            "",
            f"{suite.gateway}: NOT_FOUND (no service 'gateway' here: give a full name, {names})\n",
        )
        done = await stello(env, "health", "--service", "gateway", "--json")
        assert done.returncode == 1
        assert json.loads(done.stdout)["hint"].startswith("no service 'gateway' here")
        gateway_name, _, tree_name = names.split(", ")
        for address, name in ((suite.gateway, gateway_name), (suite.tree, tree_name)):
            assert await ok(env, "health", address, "--service", name) == f"{address}: SERVING\n"

    async def test_health_asks_the_gateway_flag(self, env: dict[str, str], suite: Suite) -> None:
        """`stello --gateway HOST:PORT health` (or `stello health --gateway HOST:PORT`) asks
        that address, over STELLO_GATEWAY."""
        done = await stello(env, "--gateway", "127.0.0.1:1", "health")
        assert (done.returncode, done.stdout, done.stderr) == (1, "", "127.0.0.1:1: UNAVAILABLE\n")
        env["STELLO_GATEWAY"] = "127.0.0.1:1"
        assert await ok(env, "--gateway", suite.gateway, "health") == f"{suite.gateway}: SERVING\n"
        assert await ok(env, "health", "--gateway", suite.gateway) == f"{suite.gateway}: SERVING\n"
