"""`stello export` reads of a fork by reference (in process, against a real gateway).

A fork that inherits its source's records by lineage is written as its own records and
``inherits``: only those are asked for, so its cost does not grow with the history it
inherited (STYLE 17), counted in ListRecords calls and in the records they answered.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from stello.common.v1 import common_pb2
from stello.storage.v1 import storage_pb2
from stello_cli.parser import build_parser
from tests.cli.test_records import list_records_calls
from tests.gateway.conftest import (  # noqa: F401 (fixtures used by name)
    Stack,
    _backends,
    _local_calls,
    _profiles_file,
    _provisioning_ttl_s,
    _stack,
    _start_gateway,
    _summarizer,
    record,
)
from tests.support.history import seed_history

pytestmark = pytest.mark.sql

INHERIT = common_pb2.FORK_CONTEXT_INHERIT
PAGE = 1000
"""Records per ListRecords page the CLI asks for."""


@pytest.fixture(autouse=True)
def _config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No saved credentials are read."""
    monkeypatch.setenv("STELLO_CONFIG_DIR", str(tmp_path))


async def export(stack: Stack, session: str, path: Path) -> tuple[dict[str, Any], int]:
    """Run `stello export SESSION -o PATH` on the stack's gateway; the file's sessions by
    label, and the ListRecords calls it made."""
    args = build_parser().parse_args(
        [
            "export",
            session,
            "-o",
            str(path),
            "--gateway",
            stack.gateway.address,
            "--key",
            stack.space.key,
            "--space",
            stack.space.sid,
        ]
    )
    before = list_records_calls(stack)
    assert await args.run(args) == 0
    calls = list_records_calls(stack) - before
    document = json.loads(await asyncio.to_thread(path.read_text, encoding="utf-8"))
    return {s["label"]: s for s in document["sessions"]}, calls


async def long_root(stack: Stack, pool: Any, count: int) -> str:
    """A root with `count` records."""
    root = await stack.root(label="root")
    async with pool.acquire() as con:
        await seed_history(con, stack.space.id, uuid.UUID(root.id), count)
    return root.id


class TestExportOfAForkByReference:
    @pytest.mark.parametrize("inherited", [10, 2_500])
    async def test_a_fork_costs_the_same_whatever_it_inherited(
        self, stack: Stack, pool: Any, tmp_path: Path, inherited: int
    ) -> None:
        """The fork costs two ListRecords calls (its first record, its own records) for 10
        inherited records as for 2,500; the file keeps its own records and `inherits`."""
        root = await long_root(stack, pool, inherited)
        fork = await stack.fork(root, "fork", context=INHERIT)
        await stack.append(fork.id, record("user", "mine"), record("assistant", "yours"))
        sessions, calls = await export(stack, root, tmp_path / "out.json")
        root_pages = -(-inherited // PAGE)
        assert calls == root_pages + 2
        entry = sessions["fork"]
        assert entry["inherits"] == {"from": root, "until_seq": inherited, "count": inherited}
        assert [(r["seq"], r["content"]) for r in entry["records"]] == [
            (inherited + 1, "mine"),
            (inherited + 2, "yours"),
        ]
        assert len(sessions["root"]["records"]) == inherited

    async def test_a_fork_of_a_fork_counts_its_source_view(
        self, stack: Stack, pool: Any, tmp_path: Path
    ) -> None:
        """A fork of a fork by reference counts its cut among its source's whole view
        (what it inherited itself, then its own records)."""
        root = await long_root(stack, pool, 5)
        middle = await stack.fork(root, "middle", context=INHERIT)
        await stack.append(middle.id, record("user", "m1"), record("assistant", "m2"))
        await stack.fork(middle.id, "last", context=INHERIT, inherit_until_seq=6)
        sessions, calls = await export(stack, root, tmp_path / "out.json")
        assert calls == 1 + 2 + 2
        assert sessions["middle"]["inherits"] == {"from": root, "until_seq": 5, "count": 5}
        assert sessions["last"]["inherits"] == {"from": middle.id, "until_seq": 6, "count": 6}
        assert sessions["last"]["records"] == []

    async def test_a_trimmed_source_makes_copies(
        self, stack: Stack, pool: Any, tmp_path: Path
    ) -> None:
        """A source trimmed since the fork no longer starts where the fork's inherited part
        does: the fork is written with its inherited records as copies, no `inherits`."""
        root = await long_root(stack, pool, 6)
        fork = await stack.fork(root, "fork", context=INHERIT)
        await stack.append(fork.id, record("user", "mine"))
        await stack.storage.TrimRecords(
            storage_pb2.TrimRecordsRequest(space_id=stack.space.sid, session_id=root, keep_recent=3)
        )
        sessions, _ = await export(stack, root, tmp_path / "out.json")
        entry = sessions["fork"]
        assert "inherits" not in entry
        assert [r["seq"] for r in entry["records"]] == list(range(1, 8))
        assert [r["seq"] for r in sessions["root"]["records"]] == [4, 5, 6]
