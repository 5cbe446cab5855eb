"""`stello memory list|get|put|rm`, `stello skills`, `stello lineage` as real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from stello.auth import KeyStore
from stello.channels import open_channel
from stello.common.v1 import common_pb2
from stello.settings import StelloSettings
from stello.tree.v1 import tree_pb2, tree_pb2_grpc
from tests.cli.processes import private_env
from tests.cli.suite import Servers, Suite, start_chain, stello
from tests.support.fixtures import TestSpace

# Not `sql`: the PostgreSQL 15 pass runs the gateway tests, which carry this SQL.
pytestmark = pytest.mark.subprocess


async def ok(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Run a command that must succeed; its stdout."""
    done = await stello(env, *args, stdin=stdin)
    assert done.returncode == 0, f"stello {' '.join(args)}: {done.stderr}"
    return done.stdout


async def as_json(env: dict[str, str], *args: str) -> Any:
    """Run a command with --json; its answer."""
    return json.loads(await ok(env, *args, "--json"))


async def failed(env: dict[str, str], *args: str, code: int = 1) -> str:
    """Run a command that must fail with `code` on one line; that line."""
    done = await stello(env, *args)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    return done.stderr.rstrip("\n")


@pytest.fixture(name="env")
def _env(suite: Suite, home: Path, space: TestSpace) -> dict[str, str]:
    return suite.env(home, space)


class TestSharedMemory:
    async def test_put_list_get_rm(self, env: dict[str, str]) -> None:
        """put creates and replaces, list shows slug: summary in order, get the body, rm removes."""
        assert (await ok(env, "memory", "list")).startswith("no shared memory yet")
        assert await ok(env, "memory", "put", "tides", "--summary", "when", "High at 6.") == (
            "tides created\n"
        )
        # From stdin, less the line end `echo` adds (`echo Bowline. | stello memory put ...`).
        await ok(env, "memory", "put", "knots", "--summary", "which", "-", stdin="Bowline.\n")
        replaced = await as_json(env, "memory", "put", "tides", "--summary", "times", "6 and 18")
        assert (replaced["created"], replaced["body"]) == (False, "6 and 18")
        assert await ok(env, "memory", "list") == "tides: times\nknots: which\n"
        listed = await as_json(env, "memory", "list")
        assert [e["slug"] for e in listed] == ["tides", "knots"]
        # The id that the shared memory events name (they never carry the slug).
        assert listed[0]["entry_id"] == replaced["entry_id"] != listed[1]["entry_id"]
        assert await ok(env, "memory", "get", "knots") == "Bowline.\n"
        assert await ok(env, "memory", "rm", "knots") == "knots removed\n"
        assert await ok(env, "memory", "rm", "knots") == "no entry knots (nothing removed)\n"
        missing = await failed(env, "memory", "get", "knots")
        assert missing.startswith("stello: ") and "NOT_FOUND" not in missing and "knots" in missing

    async def test_usage_and_refusals(self, env: dict[str, str]) -> None:
        """A missing --summary or SLUG is a usage error (2), and so is a value the gateway
        refuses, named by its argument."""
        assert "--summary" in await failed(env, "memory", "put", "a", "body", code=2)
        assert "one SLUG" in await failed(env, "memory", "get", code=2)
        blank = await failed(env, "memory", "put", "a", "--summary", "two\nlines", "b", code=2)
        assert blank.startswith("stello memory: --summary: must be one line")

    async def test_the_session_form_still_works(self, env: dict[str, str]) -> None:
        """`stello memory SESSION TEXT` sets that session's memory, as before."""
        root = (await ok(env, "root", "-q")).strip()
        assert await ok(env, "memory", root[:8], "kept") == "memory set\n"
        assert await ok(env, "memory", root[:8]) == "kept\n"
        assert "at most one TEXT" in await failed(env, "memory", root[:8], "a", "b", code=2)


class TestSkillsAndLineage:
    async def test_skills_all_and_per_session(self, env: dict[str, str]) -> None:
        """skills lists the README example's skills; a session's allow-list narrows them."""
        assert (await ok(env, "skills")).splitlines() == [
            "tides: Tide tables and how to read them.",
            "knots: Which knot for which job.",
        ]
        root = (await ok(env, "root", "--skills", "knots", "-q")).strip()
        assert [s["name"] for s in await as_json(env, "skills", root[:8])] == ["knots"]
        child = (await ok(env, "fork", root, "--label", "kid", "--skills", "", "-q")).strip()
        assert await ok(env, "skills", child) == (
            'no skills for this session: its config allows none (--skills "")\n'
        )

    async def test_empty_skills_say_why(
        self, env: dict[str, str], suite: Suite, space: TestSpace
    ) -> None:
        """A skill the gateway lacks is refused by name; a session whose allow-list names
        only skills the gateway no longer has (the configuration changed since) is told
        apart from one that allows none."""
        refused = await failed(env, "root", "--skills", "search,tides", code=2)
        assert refused == (
            "stello root: --skills #1: names no configured skill (tides, knots), got 'search' "
            "(see `stello root --help`)"
        )
        root = (await ok(env, "root", "--skills", "tides", "-q")).strip()
        child = (await ok(env, "fork", root, "--label", "kid", "--skills", "tides", "-q")).strip()
        for session, names in ((root, ["search", "tides"]), (child, ["search"])):
            await _put_config(suite, space, session, names)
        assert [s["name"] for s in await as_json(env, "skills", root)] == ["tides"]
        assert await ok(env, "skills", child) == (
            "no skills for this session: its config allows only search, which the gateway "
            "does not have (`stello skills` lists those it has)\n"
        )

    async def test_no_skills_on_the_gateway(
        self,
        settings: StelloSettings,
        pool: asyncpg.Pool,
        keys: KeyStore,
        home: Path,
        space: TestSpace,
    ) -> None:
        """On a gateway without skills a session's empty list says so, not 'allows none'."""
        servers = Servers(settings, pool, keys)
        try:
            gateway = await start_chain(servers)
            env = {**private_env(home), "STELLO_GATEWAY": gateway, "STELLO_KEY": space.key}
            root = (await ok(env, "root", "-q")).strip()
            assert await ok(env, "skills", root) == (
                "no skills: the gateway reads them from STELLO_GATEWAY_SKILLS_FILE (TOML)\n"
            )
        finally:
            await servers.stop()

    async def test_lineage(self, env: dict[str, str]) -> None:
        """lineage shows the ancestors nearest first with their memory; a root has none."""
        root = (await ok(env, "root", "--label", "Top", "-q")).strip()
        mid = (await ok(env, "fork", root, "--label", "Mid", "-q")).strip()
        leaf = (await ok(env, "fork", mid, "--label", "Leaf", "-q")).strip()
        await ok(env, "memory", root, "the plan")
        ancestors = await as_json(env, "lineage", leaf[:8])
        assert [(a["label"], a["memory"]) for a in ancestors] == [
            ("Mid", None),
            ("Top", "the plan"),
        ]
        lines = (await ok(env, "lineage", leaf)).splitlines()
        assert "Mid" in lines[0] and "Top" in lines[1] and lines[2] == "    memory: the plan"
        assert await ok(env, "lineage", root) == "a root: no ancestors\n"


async def _put_config(suite: Suite, space: TestSpace, session_id: str, skills: list[str]) -> None:
    """Give a session an allow-list through the tree (as if the gateway's skills had changed
    since it was made: the gateway refuses names it does not have)."""
    async with open_channel(suite.tree, key=space.key) as channel:
        await tree_pb2_grpc.SessionTreeStub(channel).PutConfig(
            tree_pb2.PutConfigRequest(
                space_id=space.sid,
                session_id=session_id,
                config=common_pb2.SessionConfig(skills=common_pb2.SkillList(names=skills)),
            )
        )
