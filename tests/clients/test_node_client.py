"""The Node.js client in examples/node-client against real storage, tree and gateway servers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from google.protobuf import json_format, struct_pb2

from stello.agent.v1 import agent_pb2
from stello.common.v1 import common_pb2
from storage_service.events.repository import PURGE
from tests.gateway.conftest import Stack

pytestmark = pytest.mark.sql

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "examples" / "node-client"
# Written after a successful `npm ci`: the hash of the manifest and lock it installed.
STAMP = CLIENT_DIR / "node_modules" / ".stello-installed.sha256"
# Held while one test process checks the stamp and installs (per checkout, outside it).
INSTALL_LOCK = Path(tempfile.gettempdir()) / (
    "stello-node-client-" + hashlib.sha256(str(CLIENT_DIR).encode()).hexdigest()[:16] + ".lock"
)
MIN_NODE_MAJOR = 18
NPM_CI_TIMEOUT_S = 240.0
CLIENT_TIMEOUT_S = 60.0
PROXY_VARIABLES = {"grpc_proxy", "http_proxy", "https_proxy", "all_proxy"}

MESSAGE = "Grüße from pytest 🌳"
FORK_MESSAGE = "And now from the fork"  # fixed in client.js
USER = common_pb2.RECORD_ROLE_USER
ASSISTANT = common_pb2.RECORD_ROLE_ASSISTANT


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished process: exit code and its output."""

    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        """Both streams, for assertion messages."""
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


async def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout_s: float
) -> Finished:
    """Run a program without blocking the event loop the servers share; kill it on timeout."""
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"{' '.join(args)} did not finish within {timeout_s:.0f} s")
    assert process.returncode is not None
    return Finished(process.returncode, stdout.decode(), stderr.decode())


def require(tool: str) -> str:
    """The path of `tool`; skip the test without it, but fail in CI (env CI set)."""
    path = shutil.which(tool)
    if path is not None:
        return path
    reason = f"`{tool}` is not on PATH (the Node.js client test needs Node.js >= 18 and npm)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run this test, install Node.js there")
    pytest.skip(reason)


@contextlib.contextmanager
def lock_file(path: Path) -> Iterator[int]:
    """An open descriptor of `path` (created); closing it releases a lock taken on it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def lock_hash() -> str:
    """The hash of package.json and package-lock.json, which decides if node_modules is stale."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((CLIENT_DIR / name).read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class NodeClient:
    """The installed client and the node binary that runs it."""

    node: str

    async def run(self, gateway: str, key: str, space_id: str) -> Finished:
        """Run client.js against `gateway` as `key`, without proxies and other STELLO_ settings."""
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("STELLO_") and name.lower() not in PROXY_VARIABLES
        }
        env.update(
            STELLO_GATEWAY=gateway,
            STELLO_KEY=key,
            STELLO_SPACE_ID=space_id,
            STELLO_MESSAGE=MESSAGE,
            STELLO_DEADLINE_S="20",
        )
        return await run(
            self.node, "client.js", cwd=CLIENT_DIR, env=env, timeout_s=CLIENT_TIMEOUT_S
        )

    async def script(self, source: str, *args: str, **env: str) -> Finished:
        """Run the ES module `source` in the client's directory (its node_modules), with
        `args` and `env` added to this process's environment."""
        return await run(
            self.node,
            "--input-type=module",
            "-e",
            source,
            *args,
            cwd=CLIENT_DIR,
            env={**os.environ, **env},
            timeout_s=CLIENT_TIMEOUT_S,
        )


@pytest.fixture(name="node_client", scope="session")
async def _node_client() -> NodeClient:
    """`npm ci` once, skipped while node_modules matches the lock (see STAMP)."""
    node = require("node")
    npm = require("npm")
    version = await run(node, "--version", cwd=CLIENT_DIR, timeout_s=30)
    major = re.match(r"v(\d+)\.", version.stdout)
    assert major and int(major.group(1)) >= MIN_NODE_MAJOR, f"Node.js {version.stdout!r} is too old"
    wanted = lock_hash()
    # The test passes of scripts/test run side by side: one installs, the others wait for it.
    with lock_file(INSTALL_LOCK) as lock:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        if not (STAMP.is_file() and STAMP.read_text(encoding="utf-8") == wanted):
            installed = await run(
                npm, "ci", "--no-audit", "--no-fund", cwd=CLIENT_DIR, timeout_s=NPM_CI_TIMEOUT_S
            )
            assert installed.returncode == 0, f"npm ci failed\n{installed.explain()}"
            STAMP.write_text(wanted, encoding="utf-8")
    return NodeClient(node)


@dataclass(slots=True)
class Turn:
    """One streamed turn as the client printed it."""

    session_id: str
    content: str
    deltas: list[str]
    reply: str | None = None
    stored: list[int] | None = None


@dataclass(slots=True)
class Output:
    """The client's stdout, by line kind."""

    root: str
    fork: str
    turns: list[Turn]
    digests: set[tuple[str, str, int, str]]
    events: list[tuple[str, str, str]]
    tree: list[str]


def parse(stdout: str) -> Output:
    """Split the client's lines by their first word (root, send, delta, reply, ..., tree)."""
    ids: dict[str, str] = {}
    turns: list[Turn] = []
    digests: set[tuple[str, str, int, str]] = set()
    events: list[tuple[str, str, str]] = []
    tree: list[str] | None = None
    for line in stdout.splitlines():
        if tree is not None:
            tree.append(line)
            continue
        kind, _, rest = line.partition(": ")
        if kind in ("root", "fork"):
            ids[kind] = rest.split(" ", 1)[0]
        elif kind == "send":
            session_id, content = rest.split(" ", 1)
            turns.append(Turn(session_id, json.loads(content), []))
        elif kind == "delta":
            turns[-1].deltas.append(json.loads(rest))
        elif kind == "reply":
            session_id, content = rest.split(" ", 1)
            assert session_id == turns[-1].session_id
            turns[-1].reply = json.loads(content)
        elif kind == "stored":
            session_id, seqs = rest.split(" ", 1)
            assert session_id == turns[-1].session_id
            turns[-1].stored = [int(seq) for seq in seqs.split(",")]
        elif kind == "digest":
            session_id, parent, turn_count, label = rest.split(" ", 3)
            digests.add((session_id, parent.removeprefix("parent="), int(turn_count[6:]), label))
        elif kind == "event":
            cursor, event_kind, session_id = rest.split(" ")
            events.append((cursor, event_kind.removeprefix("EVENT_KIND_"), session_id))
        elif line == "tree:":
            tree = []
    assert tree is not None, "no tree printed"
    return Output(ids["root"], ids["fork"], turns, digests, events, tree)


SESSIONS = """
SELECT id::text, parent_id::text, source_session_id::text, turn_count, provisional_until,
       (SELECT count(*) FROM records r WHERE r.space_id = $1 AND r.session_id = s.id)
           AS records
FROM sessions s WHERE space_id = $1
"""

# Makes the space's events older than the storage's default retention, as a day-old space's are.
AGE_EVENTS = """
UPDATE space_events SET created_at = created_at - interval '2 days' WHERE space_id = $1
"""
RETENTION_S = 24 * 3600.0


class TestNodeClient:
    @pytest.mark.timeout(300)
    async def test_walks_the_gateway(
        self, node_client: NodeClient, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """Root, streamed turn, INHERIT fork, streamed turn, digests and tree, all stored, and
        the client's WatchSpace saw each committed change once, in order."""
        finished = await node_client.run(stack.gateway.address, stack.space.key, stack.space.sid)
        assert finished.returncode == 0, finished.explain()
        out = parse(finished.stdout)

        assert [(t.session_id, t.content) for t in out.turns] == [
            (out.root, MESSAGE),
            (out.fork, FORK_MESSAGE),
        ]
        for turn in out.turns:
            assert turn.deltas, f"no text_delta before done\n{finished.explain()}"
            assert "".join(turn.deltas) == turn.reply == f"echo: {turn.content}"
        assert out.digests == {
            (out.root, "-", 1, "node-root"),
            (out.fork, out.root, 1, "node-fork"),
        }
        assert out.tree == [
            f"  node-root [{out.root}] turns=1",
            f"    node-fork [{out.fork}] turns=1",
        ]
        assert out.events == [
            ("1", "SESSION_COMMITTED", out.root),
            ("2", "RECORDS_APPENDED", out.root),
            ("3", "TURN_COMMITTED", out.root),
            ("4", "SESSION_COMMITTED", out.fork),
            ("5", "RECORDS_APPENDED", out.fork),
            ("6", "TURN_COMMITTED", out.fork),
        ]

        root_records = await stack.records(out.root)
        fork_records = await stack.records(out.fork)
        assert [(r.role, r.content) for r in root_records] == [
            (USER, MESSAGE),
            (ASSISTANT, f"echo: {MESSAGE}"),
        ]
        inherited = [(r.role, r.content, r.created_at) for r in root_records]
        assert [(r.role, r.content, r.created_at) for r in fork_records[:2]] == inherited
        assert [(r.role, r.content) for r in fork_records[2:]] == [
            (USER, FORK_MESSAGE),
            (ASSISTANT, f"echo: {FORK_MESSAGE}"),
        ]
        assert [t.stored for t in out.turns] == [
            [r.seq for r in root_records],
            [r.seq for r in fork_records[2:]],
        ]

        rows = {row["id"]: row for row in await pool.fetch(SESSIONS, stack.space.id)}
        assert set(rows) == {out.root, out.fork}
        assert all(row["provisional_until"] is None for row in rows.values())
        assert (rows[out.root]["parent_id"], rows[out.root]["records"]) == (None, 2)
        assert rows[out.fork]["parent_id"] == rows[out.fork]["source_session_id"] == out.root
        assert rows[out.fork]["records"] == 2  # its own: it reads the root's two by reference
        assert rows[out.root]["turn_count"] == rows[out.fork]["turn_count"] == 1

    @pytest.mark.timeout(300)
    async def test_watches_a_space_whose_first_events_were_purged(
        self, node_client: NodeClient, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """On a space whose oldest events are past the retention and purged, the client still
        watches (from the present) and sees exactly its own changes."""
        old = await stack.root(label="older")
        await pool.execute(AGE_EVENTS, stack.space.id)
        assert await pool.fetch(PURGE, RETENTION_S)  # the storage's retention purge
        finished = await node_client.run(stack.gateway.address, stack.space.key, stack.space.sid)
        assert finished.returncode == 0, finished.explain()
        out = parse(finished.stdout)
        assert out.events == [
            ("2", "SESSION_COMMITTED", out.root),
            ("3", "RECORDS_APPENDED", out.root),
            ("4", "TURN_COMMITTED", out.root),
            ("5", "SESSION_COMMITTED", out.fork),
            ("6", "RECORDS_APPENDED", out.fork),
            ("7", "TURN_COMMITTED", out.fork),
        ]
        assert (old.id, "-", 0, "older") in out.digests

    @pytest.mark.timeout(300)
    async def test_bad_key_exits_with_the_grpc_error(
        self, node_client: NodeClient, stack: Stack, pool: asyncpg.Pool
    ) -> None:
        """An unknown key ends the client with exit 1 and the status name; nothing is stored."""
        finished = await node_client.run(stack.gateway.address, "stello_bogus", stack.space.sid)
        assert finished.returncode == 1, finished.explain()
        assert "error: WatchSpace failed: UNAUTHENTICATED" in finished.stderr, finished.explain()
        assert finished.stdout == ""
        assert await pool.fetch(SESSIONS, stack.space.id) == []

    async def test_missing_environment_exits_2(self, node_client: NodeClient) -> None:
        """Without its three variables the client names them and exits 2."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("STELLO_")}
        finished = await run(
            node_client.node, "client.js", cwd=CLIENT_DIR, env=env, timeout_s=CLIENT_TIMEOUT_S
        )
        assert finished.returncode == 2, finished.explain()
        assert "STELLO_GATEWAY, STELLO_KEY, STELLO_SPACE_ID" in finished.stderr


# Loads the protos as client.js does and converts with struct.js: the argument is
# "encode" (print a SendRequest's bytes: tools[0] with SCHEMA through toStruct, tools[1]
# with it as a plain object) or "decode" (read a Record from RECORD_B64, print its
# metadata through fromStruct as JSON).
STRUCT_SCRIPT = """
import path from "node:path";
import * as protoLoader from "@grpc/proto-loader";
import { fromStruct, toStruct } from "./struct.js";

const definition = protoLoader.loadSync("stello/agent/v1/agent.proto", {
  includeDirs: [path.resolve("..", "..", "protos")],
  keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
});
const schema = JSON.parse(process.env.SCHEMA);
if (process.argv[1] === "encode") {
  const type = definition["stello.agent.v1.SendRequest"];
  const tools = [
    { name: "converted", parameters: toStruct(schema) },
    { name: "plain", parameters: schema },
  ];
  console.log(type.serialize({ space_id: "s", tools }).toString("base64"));
} else {
  const type = definition["stello.common.v1.Record"];
  const record = type.deserialize(Buffer.from(process.env.RECORD_B64, "base64"));
  console.log(JSON.stringify(fromStruct(record.metadata)));
}
"""

SCHEMA = {
    "type": "object",
    "properties": {"tz": {"type": "string", "enum": ["UTC", "CET"]}, "n": {"type": "number"}},
    "required": ["tz"],
    "additionalProperties": False,
    "default": None,
    "maximum": 2.5,
}


class TestStructHelpers:
    async def test_to_struct_sends_the_schema(self, node_client: NodeClient) -> None:
        """toStruct's Struct reaches the server as the schema; a plain object arrives empty."""
        finished = await node_client.script(STRUCT_SCRIPT, "encode", SCHEMA=json.dumps(SCHEMA))
        assert finished.returncode == 0, finished.explain()
        request = agent_pb2.SendRequest.FromString(base64.b64decode(finished.stdout))
        converted, plain = request.tools
        assert json_format.MessageToDict(converted.parameters) == SCHEMA
        assert plain.HasField("parameters")
        assert json_format.MessageToDict(plain.parameters) == {}

    async def test_from_struct_reads_metadata(self, node_client: NodeClient) -> None:
        """fromStruct turns a record's metadata, as the loader reads it, into the object."""
        metadata = json_format.ParseDict(
            {"usage": {"completion_tokens": 5}, "is_error": True, "schema": SCHEMA},
            struct_pb2.Struct(),
        )
        record = common_pb2.Record(seq=1, content="x", metadata=metadata)
        finished = await node_client.script(
            STRUCT_SCRIPT,
            "decode",
            SCHEMA="{}",
            RECORD_B64=base64.b64encode(record.SerializeToString()).decode(),
        )
        assert finished.returncode == 0, finished.explain()
        assert json.loads(finished.stdout) == json_format.MessageToDict(metadata)
