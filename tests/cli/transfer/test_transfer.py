"""export → import: the copy of a subtree equals the original (records, configs, slots, topology).

The subtree is built through the gateway with every kind of session: a root with a
system prompt, skills, memory, insight and a client tool round trip; INHERIT forks
(all records, and one cut inside the tool group), a fork of a fork, a NONE fork
placed under another session, a COMPRESS fork, an archived one.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stello.agent.v1 import agent_pb2, agent_pb2_grpc
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello_cli.transfer.exports import inherited_prefix
from stello_cli.transfer.import_file import import_order, load, plans
from stello_cli.transfer.importer import Importer
from stello_client.aio import AsyncClient
from stello_client.errors import ClientError
from stello_client.exceptions import NotFound
from tests.cli.suite import Suite, stello
from tests.support.fixtures import TestSpace

# Not `sql`: the PostgreSQL 15 pass runs the gateway tests, which carry this SQL.
pytestmark = pytest.mark.subprocess

INHERIT = common_pb2.FORK_CONTEXT_INHERIT


class Builder:
    """Gateway calls in one space, shortened."""

    def __init__(self, stub: Any, space: TestSpace) -> None:
        self.gw = stub
        self.sid = space.sid

    async def fork(self, source: str, label: str, **fields: Any) -> str:
        reply = await self.gw.Fork(
            agent_pb2.ForkRequest(
                space_id=self.sid, source_session_id=source, label=label, **fields
            )
        )
        return str(reply.session.id)

    async def send(self, session: str, text: str, **fields: Any) -> agent_pb2.SendResponse:
        request = agent_pb2.SendRequest(
            space_id=self.sid, session_id=session, content=text, **fields
        )
        reply: agent_pb2.SendResponse = await self.gw.Send(request)
        return reply


@pytest.fixture(name="builder")
async def _builder(suite: Suite, space: TestSpace) -> AsyncIterator[Builder]:
    async with open_channel(suite.gateway, key=space.key) as channel:
        yield Builder(agent_pb2_grpc.AgentGatewayStub(channel), space)


async def build_subtree(b: Builder) -> str:
    """The subtree of the module docstring; its root's id."""
    root = await b.gw.CreateRoot(  # the README's profile: a config with every kind of field
        agent_pb2.CreateRootRequest(
            space_id=b.sid,
            label="Research",
            system_prompt="Be brief.",
            profile="researcher",
            profile_vars={"topic": "forks", "audience": "us"},
        )
    )
    r = str(root.session.id)
    await b.send(r, "q1")
    lookup = common_pb2.ToolDefinition(name="lookup", description="look it up")
    turn = await b.send(r, '/tool lookup {"q": 1}', tools=[lookup])
    [call] = turn.pending_tool_calls
    await b.gw.SubmitToolResults(
        agent_pb2.SubmitToolResultsRequest(
            space_id=b.sid,
            session_id=r,
            results=[agent_pb2.ToolResult(tool_call_id=call.id, content="found", is_error=True)],
            tools=[lookup],
        )
    )
    await b.gw.PutMemory(agent_pb2.PutMemoryRequest(space_id=b.sid, session_id=r, content="m"))
    await b.gw.PutInsight(agent_pb2.PutInsightRequest(space_id=b.sid, session_id=r, content="i"))
    a = await b.fork(r, "All of it", context=INHERIT)
    await b.send(a, "a1")
    elsewhere = await b.fork(
        r, "Elsewhere", topology_parent_id=a, context=common_pb2.FORK_CONTEXT_NONE
    )
    await b.gw.PinSession(  # a restore keeps the pin (explore4 F1: it came back unpinned)
        agent_pb2.PinSessionRequest(space_id=b.sid, session_id=elsewhere, pinned=True)
    )
    c = await b.fork(a, "Fork of a fork", context=INHERIT, inherit_until_seq=8)
    await b.gw.Archive(agent_pb2.ArchiveRequest(space_id=b.sid, session_id=c))
    await b.fork(r, "Cut in the tool call", context=INHERIT, inherit_until_seq=5)
    await b.fork(r, "Summary", context=common_pb2.FORK_CONTEXT_COMPRESS, prompt="Go on.")
    return r


def normalised(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The sessions with ids replaced by their place in the file and the import's times left
    out (session times are the import's; records keep theirs)."""
    place = {s["id"]: i for i, s in enumerate(document["sessions"])}
    found = []
    for session in document["sessions"]:
        entry = dict(session)
        for name in ("id", "created_at", "last_active_at"):
            entry.pop(name)
        for name in ("parent_id", "source_session_id"):
            entry[name] = place.get(entry[name], "outside" if entry[name] else None)
        if "inherits" in entry:
            entry["inherits"] = {**entry["inherits"], "from": place[entry["inherits"]["from"]]}
        found.append(entry)
    return found


async def test_export_import_round_trip(
    builder: Builder, suite: Suite, home: Path, space: TestSpace
) -> None:
    """The imported copy exports exactly as the original did; forks come back by reference."""
    root = await build_subtree(builder)
    env = suite.env(home, space)
    exported = home / "tree.json"
    done = await stello(env, "export", root[:8], "-o", str(exported))
    assert done.returncode == 0, done.stderr
    original = json.loads(exported.read_text())
    labels = [s["label"] for s in original["sessions"]]
    assert labels[0] == "Research" and len(labels) == 6
    by_label = {s["label"]: s for s in original["sessions"]}
    # INHERIT forks keep only their own records and a reference to their source.
    assert by_label["All of it"]["inherits"]["count"] == 7
    assert set(original["sessions"][0]["config"]) == {
        "system_prompt",
        "skills",
        "compressor_prompt",
    }
    assert [r["content"] for r in by_label["All of it"]["records"]] == ["a1", "echo: a1"]
    assert by_label["Fork of a fork"]["inherits"]["from"] == by_label["All of it"]["id"]
    assert by_label["Fork of a fork"]["records"] == []
    cut = by_label["Cut in the tool call"]  # forked at 5, the open tool call left out
    assert (cut["inherits"]["until_seq"], cut["records"]) == (4, [])
    assert "inherits" not in by_label["Summary"] and "inherits" not in by_label["Elsewhere"]
    assert [s["label"] for s in original["sessions"] if s["pinned"]] == ["Elsewhere"]

    imported = await stello(env, "import", str(exported), "--json")
    assert imported.returncode == 0, imported.stderr
    answer = json.loads(imported.stdout)
    made = answer["imported"]
    # The exported sessions are still here: the import made copies, and says so.
    assert (answer["again"], answer["copies"]) == (False, True)
    assert set(made) == {s["id"] for s in original["sessions"]}
    again = await stello(env, "export", made[root])
    assert again.returncode == 0, again.stderr
    copy = json.loads(again.stdout)
    assert normalised(copy) == normalised(original)
    assert not set(made.values()) & {s["id"] for s in original["sessions"]}

    # The same file again: the first import's sessions, not a second copy.
    twice = await stello(env, "import", str(exported), "--json")
    assert json.loads(twice.stdout)["imported"] == made
    assert json.loads(twice.stdout)["again"] is True
    thrice = await stello(env, "import", str(exported))
    assert thrice.stdout == (
        f"this file was imported before: nothing new was made; its 6 sessions are under "
        f"{made[root]}\n"
    )
    tree = await stello(env, "tree", "--json")
    assert len(json.loads(tree.stdout)) == 12


async def test_markdown_is_for_reading(
    builder: Builder, suite: Suite, home: Path, space: TestSpace
) -> None:
    """--format markdown writes each session as a section with its records."""
    root = await build_subtree(builder)
    done = await stello(suite.env(home, space), "export", root, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    page = done.stdout
    assert page.startswith("# Stello export: Research\n")
    assert "**user** · " in page
    # Heading levels follow the depth: Research, its fork, the fork of that fork.
    assert "\n## Research\n" in page and "\n### All of it\n" in page
    assert "\n#### Fork of a fork\n" in page
    assert "> You research forks for us. Cite sources." in page and '→ `lookup({"q":1})`' in page


async def test_bad_files_are_one_line(suite: Suite, home: Path, space: TestSpace) -> None:
    """A file that is not an export, or a record the gateway refuses, fails naming the session."""
    env = suite.env(home, space)
    junk = home / "junk.json"
    junk.write_text('{"hello": 1}')
    done = await stello(env, "import", str(junk))
    assert (done.returncode, done.stderr) == (
        1,
        f"stello: {junk}: not a Stello export (version 1): write one with "
        "`stello export SESSION > FILE`\n",
    )
    bad = {
        "stello_export": 1,
        "sessions": [
            {"id": "x", "label": "L", "records": [{"role": "user", "content": "a\u0000"}]}
        ],
    }
    done = await stello(env, "import", "-", stdin=json.dumps(bad))
    assert done.returncode == 1
    assert done.stderr == (
        "stello: importing session 1 of 1 ('L'): records[0].content: "
        "must not contain U+0000 (NUL)\n"
    )
    # A session without a label (imported as "Imported") is said so, not "(None)".
    unlabelled = {"stello_export": 1, "sessions": [{"id": "x", "status": "gone"}]}
    done = await stello(env, "import", "-", stdin=json.dumps(unlabelled))
    assert (done.returncode, done.stderr) == (
        1,
        "stello: importing session 1 of 1 (no label): status: must be one of "
        "['active', 'archived'], got 'gone'\n",
    )
    pin = {"stello_export": 1, "sessions": [{"id": "x", "label": "L", "pinned": "yes"}]}
    done = await stello(env, "import", "-", stdin=json.dumps(pin))
    assert (done.returncode, done.stderr) == (
        1,
        "stello: importing session 1 of 1 ('L'): pinned: must be true or false, got 'yes'\n",
    )
    nameless = {"stello_export": 1, "sessions": [{"label": "L", "records": []}]}
    done = await stello(env, "import", "-", stdin=json.dumps(nameless))
    assert (done.returncode, done.stderr) == (
        1,
        "stello: -: session 1 of 1 ('L') has no `id`: every session of an export needs its id "
        "(export the subtree again)\n",
    )
    page = home / "tree.md"
    page.write_text("# Stello export: Research\n\nExported 2025-06-01 12:00 UTC.\n")
    done = await stello(env, "import", str(page))
    assert (done.returncode, done.stderr) == (
        1,
        f"stello: {page}: this is a Markdown export; only JSON exports can be imported "
        "(`stello export SESSION > FILE` writes one)\n",
    )


async def test_a_parent_that_is_no_session_names_parent(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """`import --parent ID` with a whole id that names no session fails before the first
    session, naming --parent and what to do: it said "importing session 1 of 1 ('L'):
    parent session ID not found", as if the file's first session were at fault."""
    env = suite.env(home, space)
    missing = "00000000-0000-4000-8000-000000000000"
    document = export_of({"id": "a", "label": "L", "records": []})
    done = await stello(env, "import", "-", "--parent", missing, stdin=document)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"stello: --parent: no session {missing} in this space (`stello tree` lists them)\n",
    )
    assert await sessions_in(env) == 0


async def test_a_file_name_that_is_not_utf8_is_read_and_written(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """`stello export -o FILE` and `stello import FILE` take a file whose name holds bytes
    that are not UTF-8 (Linux names files by bytes): both were refused ("FILE: is not
    valid UTF-8"); a message naming such a file shows those bytes as \\xff."""
    env = suite.env(home, space)
    made = await stello(env, "root", "--label", "Bytes", "-q")
    assert made.returncode == 0, made.stderr
    named = os.fsdecode(os.fsencode(home) + b"/tree\xff.json")
    shown = f"{home}/tree\\xff.json"
    done = await stello(env, "export", made.stdout.strip(), "-o", named)
    assert (done.returncode, done.stderr) == (0, f"exported 1 session to {shown}\n")
    done = await stello(env, "import", named)
    assert done.returncode == 0, done.stderr
    assert await sessions_in(env) == 2
    await asyncio.to_thread(Path(named).write_text, '{"hello": 1}')
    done = await stello(env, "import", named)
    assert (done.returncode, done.stderr) == (
        1,
        f"stello: {shown}: not a Stello export (version 1): write one with "
        "`stello export SESSION > FILE`\n",
    )
    await asyncio.to_thread(Path(named).unlink)
    done = await stello(env, "import", named)
    assert (done.returncode, done.stderr) == (
        1,
        f"stello: {shown}: cannot read an export from it (No such file or directory)\n",
    )


def export_of(*sessions: dict[str, Any]) -> str:
    """An export file of `sessions` (each a dict of the format)."""
    return json.dumps({"stello_export": 1, "sessions": list(sessions)})


async def sessions_in(env: dict[str, str]) -> int:
    """How many sessions the space holds."""
    tree = await stello(env, "tree", "--json")
    assert tree.returncode == 0, tree.stderr
    return len(json.loads(tree.stdout))


async def test_a_failed_import_leaves_the_space_as_it_was(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """What the client can check is checked in every session before the first call; a
    session the gateway refuses later takes back what the import made before it."""
    env = suite.env(home, space)
    root: dict[str, Any] = {
        "id": "r",
        "label": "R",
        "records": [{"role": "user", "content": "hello"}],
    }
    child: dict[str, Any] = {"id": "c", "parent_id": "r", "label": "C", "records": []}
    before = await sessions_in(env)
    checks: list[tuple[dict[str, Any], str]] = [
        ({"records": [{"role": "user", "tool_calls": "x"}]}, "records[0].tool_calls: must be"),
        ({"records": ["x"]}, "records[0]: must be an object, got 'x'"),
        ({"records": [{"role": "user", "content": 5}]}, "records[0].content: must be text"),
        ({"memory": {"a": 1}}, "memory: must be text, got {'a': 1}"),
        ({"status": "bogus"}, "status: must be one of ['active', 'archived'], got 'bogus'"),
        ({"turn_count": 1e30}, "turn_count: must be a whole number from 0 to 2147483647"),
        ({"metadata": {"k": 1}}, "metadata['k']: must be text, got 1"),
        ({"config": {"skills": "x"}}, "config.skills: must be a list of names"),
    ]
    for change, said in checks:
        done = await stello(env, "import", "-", stdin=export_of(root, child | change))
        assert done.returncode == 1, (change, done.stderr)
        assert done.stderr.startswith("stello: importing session 2 of 2 ('C'): " + said), (
            done.stderr
        )
    # The gateway's per-field limits, checked before the first session is made (the line
    # says nothing was deleted: nothing was made).
    shortened = "'" + "L" * 58 + "…"
    limits: list[tuple[dict[str, Any], str]] = [
        (
            {"label": "L" * 201},
            f"({shortened}): label: must be at most 200 characters, got 201",
        ),
        ({"label": "a\nb"}, "('a\\nb'): label: must be one line"),
        ({"metadata": {"1bad": "v"}}, "('C'): metadata[\"1bad\"]: key must match"),
        ({"metadata": {"k": "v" * 513}}, "('C'): metadata[\"k\"]: value must be at most 512"),
        (
            {"records": [{"role": "assistant", "tool_calls": [{"id": "1", "name": ""}]}]},
            "('C'): records[0].tool_calls[0].name: is required",
        ),
        (
            {"records": [{"role": "assistant", "tool_calls": [{"name": "n"}]}]},
            "('C'): records[0].tool_calls[0].id: is required",
        ),
        (
            {"records": [{"role": "tool", "content": "result"}]},
            "('C'): records[0].tool_call_id: is required on a TOOL record",
        ),
    ]
    for change, said in limits:
        done = await stello(env, "import", "-", stdin=export_of(root, child | change))
        assert done.returncode == 1, (change, done.stderr)
        # the file's field, not a --label the command has none of
        assert done.stderr.startswith("stello: importing session 2 of 2 " + said), done.stderr
        assert "deleted" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert await sessions_in(env) == before
    # A source with fewer records than the fork inherits is found at the call for the fork:
    # session 1 goes again.
    refused = child | {"source_session_id": "r", "inherits": {"from": "r", "count": 5}}
    done = await stello(env, "import", "-", stdin=export_of(root, refused))
    assert done.returncode == 1
    assert done.stderr.startswith("stello: importing session 2 of 2 ('C'): ")
    assert done.stderr.endswith(
        "(nothing of the file was kept: the 1 session made before it was deleted)\n"
    ), done.stderr
    assert await sessions_in(env) == before
    # The file mended: imported once, whole.
    done = await stello(env, "import", "-", stdin=export_of(root, child))
    assert done.returncode == 0, done.stderr
    assert await sessions_in(env) == before + 2

    empty = await stello(env, "import", "-", stdin=export_of())
    assert (empty.returncode, empty.stderr) == (
        1,
        "stello: -: the export holds no session: nothing to import\n",
    )
    listed = await stello(env, "import", "-", stdin=export_of(root, child | {"parent_id": ["r"]}))
    assert (listed.returncode, listed.stderr) == (
        1,
        "stello: -: session 2 of 2 ('C'): parent_id: must be text, got ['r']\n",
    )
    orphan = child | {
        "source_session_id": "elsewhere",
        "inherits": {"from": "elsewhere", "count": 1},
    }
    done = await stello(env, "import", "-", stdin=export_of(root, orphan))
    assert (done.returncode, done.stderr) == (
        1,
        "stello: -: session 2 of 2 ('C'): inherits.from must be its source_session_id, a "
        "session of the file: export the subtree again\n",
    )  # its inherited records were lost without a word
    circle = export_of(root | {"parent_id": "c"}, child)
    done = await stello(env, "import", "-", stdin=circle)
    assert (done.returncode, done.stderr) == (
        1,
        "stello: -: session 1 of 2 ('R'): its parent_id leads round in a circle: export the "
        "subtree again\n",
    )
    assert await sessions_in(env) == before + 2


async def test_a_backup_restores_after_its_first_import_was_deleted(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """export, import, delete the copy and the original: the file imports again (the first
    import's request ids answer REQUEST_ERASED, so the next of a fixed series is used), and
    a third run answers that second import, not a third copy."""
    env = suite.env(home, space)
    root = await stello(env, "root", "--label", "Backup", "-q")
    original = root.stdout.strip()
    assert (await stello(env, "send", original, "precious")).returncode == 0
    backup = home / "backup.json"
    assert (await stello(env, "export", original, "-o", str(backup))).returncode == 0
    first = json.loads((await stello(env, "import", str(backup), "--json")).stdout)["imported"]
    for session in (first[original], original):
        assert (await stello(env, "delete", session, "--yes")).returncode == 0
    restored = await stello(env, "import", str(backup), "--json")
    assert restored.returncode == 0, restored.stderr
    answer = json.loads(restored.stdout)
    assert (answer["again"], answer["copies"]) == (False, False)
    again = answer["imported"][original]
    assert again != first[original]
    records = await stello(env, "records", again, "--json")
    assert "precious" in records.stdout
    third = json.loads((await stello(env, "import", str(backup), "--json")).stdout)
    assert (third["imported"][original], third["again"]) == (again, True)


async def test_a_partly_deleted_import_is_finished_and_said(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """Run again after part of its first import was deleted, an import makes only what is
    gone, under the first import's top, and says so: in words, and with --json in
    "made_now" (the file's ids it made; on main the JSON said only "again": false)."""
    env = suite.env(home, space)
    top = (await stello(env, "root", "--label", "Top", "-q")).stdout.strip()
    kid = (await stello(env, "fork", top, "--label", "Kid", "-q")).stdout.strip()
    grandkid = (await stello(env, "fork", kid, "--label", "Grandkid", "-q")).stdout.strip()
    backup = home / "backup.json"
    assert (await stello(env, "export", top, "-o", str(backup))).returncode == 0
    answer = json.loads((await stello(env, "import", str(backup), "--json")).stdout)
    first = answer["imported"]
    assert (answer["again"], answer["made_now"]) == (False, [top, kid, grandkid])
    assert (await stello(env, "delete", first[kid], "--yes")).returncode == 0
    answer = json.loads((await stello(env, "import", str(backup), "--json")).stdout)
    assert (answer["again"], answer["copies"]) == (False, False)
    assert answer["made_now"] == [kid, grandkid]
    assert answer["imported"][top] == first[top]
    assert (await stello(env, "delete", answer["imported"][kid], "--yes")).returncode == 0
    again = await stello(env, "import", str(backup))
    assert (again.returncode, again.stdout) == (
        0,
        f"this file was imported before; 2 of its 3 sessions had been deleted since and were "
        f"made again, under {first[top]}\n",
    )
    answer = json.loads((await stello(env, "import", str(backup), "--json")).stdout)
    assert (answer["again"], answer["imported"][top]) == (True, first[top])
    assert answer["made_now"] == []
    assert await sessions_in(env) == 6


async def interrupted_import(
    suite: Suite, space: TestSpace, path: Path, sessions: int
) -> dict[str, str]:
    """What an import of `path` does before it is killed after its first `sessions`: the
    command's own Importer, through the SDK, stopped there. The file's ids it made."""
    sessions_of, digest = load(str(path))
    order = import_order(sessions_of)
    planned = plans(sessions_of, order)
    async with AsyncClient(suite.gateway, space.key, space.sid, plaintext=True) as client:
        run = Importer(client, digest, None, datetime.now(UTC))
        for position in order[:sessions]:
            await run.one(sessions_of[position], planned[position])
    return run.made


async def test_a_parent_deleted_meanwhile_is_said_not_kept(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """An import whose --parent is deleted while it runs fails at the next session, and its
    line says the sessions it had made went with that parent: not that they stay, under an
    id that no longer exists (explore4 F6b)."""
    env = suite.env(home, space)
    parent = (await stello(env, "root", "--label", "Parent", "-q")).stdout.strip()
    document = export_of(
        {"id": "a", "label": "A", "records": []},
        {"id": "b", "parent_id": "a", "label": "B", "records": []},
        {"id": "c", "label": "C", "records": []},
    )
    path = home / "three.json"
    path.write_text(document)
    sessions, digest = load(str(path))
    order = import_order(sessions)
    planned = plans(sessions, order)
    async with AsyncClient(suite.gateway, space.key, space.sid, plaintext=True) as client:
        run = Importer(client, digest, parent, datetime.now(UTC))
        for position in order[:2]:
            await run.one(sessions[position], planned[position])
        await client.delete_session(parent)
        with pytest.raises(NotFound, match="not found") as refused:
            await run.one(sessions[order[2]], planned[order[2]])
        said = await run.undo(refused.value)
    assert said == (
        f" (nothing of the file was kept: the 2 sessions made before it went with --parent "
        f"{parent}, deleted meanwhile)"
    )


async def test_an_interrupted_import_finished_says_what_it_made_now(
    suite: Suite, home: Path, space: TestSpace
) -> None:
    """Run again after it was interrupted, an import makes the sessions the first run had
    not made and says so, not that they "had been deleted since" (explore4 F6a); with one
    of the first run's sessions deleted too, it counts each kind ("made_again" in --json)."""
    env = suite.env(home, space)
    top = (await stello(env, "root", "--label", "Top", "-q")).stdout.strip()
    kid = (await stello(env, "fork", top, "--label", "Kid", "-q")).stdout.strip()
    other = (await stello(env, "fork", top, "--label", "Other", "-q")).stdout.strip()
    exported = home / "export.json"
    assert (await stello(env, "export", top, "-o", str(exported))).returncode == 0

    def variant(name: str) -> Path:
        """The export with another top label: another file, imported on its own."""
        path = home / f"{name}.json"
        path.write_text(exported.read_text().replace('"Top"', f'"{name}"'))
        return path

    async def kid_deleted(name: str) -> Path:
        """A file whose import was interrupted after Top and Kid, its Kid deleted since."""
        path = variant(name)
        made = await interrupted_import(suite, space, path, 2)
        assert (await stello(env, "delete", made[kid], "--yes")).returncode == 0
        return path

    interrupted = variant("Interrupted")
    await interrupted_import(suite, space, interrupted, 1)
    said = await stello(env, "import", str(interrupted))
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith(
        "this file was imported before but not finished; the 2 of its 3 sessions it had not "
        "made were made now, under "
    )
    answer = json.loads((await stello(env, "import", str(await kid_deleted("A")), "--json")).stdout)
    assert (answer["made_now"], answer["made_again"]) == ([kid, other], [kid])
    said = await stello(env, "import", str(await kid_deleted("B")))
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith(
        "this file was imported before; of its 3 sessions, 1 had been deleted since and was "
        "made again, and 1 it had not made was made now, under "
    )


class TestFileLogic:
    def test_copies_are_recognised_only_when_exact(self) -> None:
        """A child's leading records count as inherited only if a fork would give exactly them."""
        user = common_pb2.RECORD_ROLE_USER
        source = [common_pb2.Record(seq=i, role=user, content=f"r{i}") for i in (1, 2, 3)]
        own = common_pb2.Record(seq=3, role=user, content="mine")
        child = [
            common_pb2.Record(seq=1, role=user, content="r1"),
            common_pb2.Record(seq=2, role=user, content="r2"),
            own,
        ]
        assert inherited_prefix(child, source) == (2, 2, 2)
        assert inherited_prefix([own], source) is None
        changed = [common_pb2.Record(seq=1, role=user, content="r1"), own]
        changed[0].created_at.seconds = 5  # the same text at another time is not a copy
        assert inherited_prefix(changed, source) is None

    def test_sources_come_first(self) -> None:
        """A fork whose source sits later in the file is imported after it; siblings keep order."""
        sessions: list[dict[str, Any]] = [
            {"id": "r", "parent_id": None},
            {"id": "a", "parent_id": "r", "source_session_id": "b", "inherits": {"count": 1}},
            {"id": "b", "parent_id": "r"},
        ]
        # a needs b (its source) and b needs a (an earlier sibling): a real export never has
        # that, so a's reference cannot be kept and the import says so.
        with pytest.raises(ClientError, match="cannot be imported before it"):
            import_order([dict(s) for s in sessions])
        sessions[1].pop("inherits")
        assert import_order([dict(s) for s in sessions]) == [0, 1, 2]
        nested: list[dict[str, Any]] = [
            {"id": "r", "parent_id": None},
            {"id": "a", "parent_id": "r"},
            {"id": "a1", "parent_id": "a", "source_session_id": "b"},
            {"id": "b", "parent_id": "r"},
        ]
        assert import_order(nested) == [0, 1, 3, 2]

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param('{"sessions": ' + "[" * 100_000 + "]" * 100_000 + "}", id="deep"),
            pytest.param('{"stello_export": NaN}', id="nan"),
        ],
    )
    def test_a_file_json_does_not_read_is_one_line(self, tmp_path: Path, text: str) -> None:
        """A file nested past what Python's json reads (it raised RecursionError, a
        traceback) or holding NaN is the one-line "cannot read an export" error."""
        path = tmp_path / "deep.json"
        path.write_text(text)
        with pytest.raises(ClientError, match="cannot read an export from it"):
            load(str(path))
