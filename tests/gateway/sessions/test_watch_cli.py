"""`stello watch` against a real gateway: events as lines or JSON, resumed by --after."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from stello_cli.space.watch import event_dict, event_line
from tests.cli.processes import client_env, private_env
from tests.gateway.conftest import Stack

pytestmark = [pytest.mark.sql, pytest.mark.subprocess]


async def watch_cli(stack: Stack, tmp_path: Path, *args: str) -> list[str]:
    """Run `stello watch ARGS` as the stack's space until it exits; its stdout lines."""
    env = private_env(tmp_path / "home")
    env.update(
        STELLO_GATEWAY=stack.gateway.address,
        STELLO_KEY=stack.space.key,
        STELLO_SPACE_ID=stack.space.sid,
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stello_cli",
        "watch",
        *args,
        env=client_env(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode().splitlines()


async def test_json_events_then_resume_after_a_cursor(stack: Stack, tmp_path: Path) -> None:
    """--json prints one object per event; --after resumes exactly after that cursor."""
    root = await stack.root(label="r")
    await stack.gw.Send(
        agent_pb2.SendRequest(space_id=stack.space.sid, session_id=root.id, content="hi")
    )
    lines = await watch_cli(stack, tmp_path, "--after", "0", "--count", "3", "--json")
    events = [json.loads(line) for line in lines]
    assert [(e["cursor"], e["kind"], e["session_id"]) for e in events] == [
        ("1", "session_committed", root.id),
        ("2", "records_appended", root.id),
        ("3", "turn_committed", root.id),
    ]
    assert (events[1]["first_seq"], events[1]["last_seq"]) == (1, 2)
    [line] = await watch_cli(stack, tmp_path, "--after", "2", "--count", "1")
    assert line == f"3 turn_committed {root.id}"


def test_a_line_names_seqs_refs_and_erased_sessions() -> None:
    """The text form: cursor, kind, session, then the seq range, ref target or erased count."""
    appended = common_pb2.SpaceEvent(
        cursor="9",
        kind=common_pb2.EVENT_KIND_RECORDS_APPENDED,
        session_id="s",
        first_seq=3,
        last_seq=4,
    )
    ref = common_pb2.SpaceEvent(
        cursor="10", kind=common_pb2.EVENT_KIND_REF_ADDED, session_id="s", other_session_id="t"
    )
    erased = common_pb2.SpaceEvent(
        cursor="11",
        kind=common_pb2.EVENT_KIND_SUBTREE_DELETED,
        session_id="s",
        session_ids=["s", "c"],
    )
    assert [event_line(e) for e in (appended, ref, erased)] == [
        "9 records_appended s seq 3-4",
        "10 ref_added s -> t",
        "11 subtree_deleted s (2 sessions)",
    ]


def test_a_shared_memory_event_names_its_entry_id() -> None:
    """A shared memory event shows its entry's id where a session event shows its session."""
    entry = "0b7a2c1e-3f4d-4e5f-8a9b-1c2d3e4f5a6b"
    event = common_pb2.SpaceEvent(
        cursor="12", kind=common_pb2.EVENT_KIND_SHARED_MEMORY_UPSERTED, entry_id=entry
    )
    assert event_line(event) == f"12 shared_memory_upserted {entry}"
    assert event_dict(event)["entry_id"] == entry
    assert "slug" not in event_dict(event)
